"""The processes holding this node's modules, so that a drain is not "drained" while one still has a
device open after the in-flight count reached zero.

``--holders-from`` says where:

- ``command:CMD``: run ``CMD`` (through ``/bin/sh -c``; e.g. a vendor tool, or a wrapper around
  ``fuser``/``lsof`` on the device files) and read the JSON list it prints: one object per process
  and module, ``{"pid": 4242, "name": "vllm", "module": "SERIAL"}`` (``module``: the module's serial,
  or a value ``--module-alias VALUE=SERIAL`` maps, e.g. a device file). ``[]``: nothing holds a module.
- ``none`` (the default): the agent does not look; node samples carry no list and drains end on the
  in-flight count alone.

A read that fails (the command missing, timing out, exiting non-zero, printing something else) sends
no list for that sample and is logged once per episode: the server keeps the last list it had,
never an empty one made up (which would end a drain while a process still holds a device).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from agent.cp_agent.inflight import ReadFailed, command_output
from agent.cp_agent.once import Once

log = logging.getLogger("cp_agent.holders")

SPEC_HELP = "command:CMD | none"
MAX_HOLDERS = 256  # the contract's limit per sample


class HoldersSource(Protocol):
    description: str

    def read(self) -> list[dict[str, Any]] | None: ...


class NoHolders:
    description = "none (no list sent: drains end on the in-flight count)"

    def read(self) -> list[dict[str, Any]] | None:
        return None


class CommandHolders:
    def __init__(self, command: str, *, aliases: dict[str, str] | None = None, timeout: float = 5.0) -> None:
        if not command.strip():
            raise ValueError("name the command after 'command:'")
        self.command = command
        self.aliases = aliases or {}
        self.timeout = timeout
        self.description = f"command {command!r}"
        self._once = Once(log)

    def _failed(self, why: str) -> None:
        self._once.say("failing", logging.WARNING, "holders read from %s failed: %s; no list sent (the control "
                       "plane keeps the last one) until it recovers", self.description, why)

    def read(self) -> list[dict[str, Any]] | None:
        try:
            found = json.loads(command_output(self.command, timeout=self.timeout) or "null")
        except ReadFailed as exc:
            self._failed(str(exc))
            return None
        except ValueError as exc:
            self._failed(f"printed no JSON: {exc}")
            return None
        if not isinstance(found, list):
            self._failed("must print a JSON list of {pid, name, module}")
            return None
        out = []
        for i, h in enumerate(found):
            pid = h.get("pid") if isinstance(h, dict) else None
            name = h.get("name") if isinstance(h, dict) else None
            module = h.get("module") if isinstance(h, dict) else None
            if (isinstance(pid, bool) or not isinstance(pid, int) or pid < 1 or not isinstance(name, str)
                    or not name or not isinstance(module, str) or not module):
                self._failed(f"item {i} is not {{pid: a whole number, name: text, module: a serial}}: {h!r:.100}")
                return None
            out.append({"pid": pid, "name": name[:128], "module": self.aliases.get(module, module)})
        if len(out) > MAX_HOLDERS:
            out = out[:MAX_HOLDERS]
        if self._once.clear("failing"):
            log.warning("holders read from %s works again (%d holder(s))", self.description, len(out))
        return out


def make_holders(spec: str, *, aliases: dict[str, str] | None = None, timeout: float = 5.0) -> HoldersSource:
    """Build the source ``spec`` names. Raises ValueError with what is wrong."""
    spec = spec.strip()
    if spec in ("", "none"):
        return NoHolders()
    kind, sep, rest = spec.partition(":")
    if kind == "command" and sep:
        return CommandHolders(rest, aliases=aliases, timeout=max(timeout, 1.0))
    raise ValueError(f"{spec!r}: expected {SPEC_HELP}")
