"""The command channel: handlers by kind, and the explicit "unknown" reply.

Command kinds (drain, install a driver, run vectors, diagnose) arrive with
later issues; each registers a handler here.  A handler returns (status,
result) with status "succeeded" or "failed"; a kind without a handler is
acknowledged "unknown" with a message naming it, so the control plane sees at
once that this agent cannot do it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agent.cp_agent import __version__

log = logging.getLogger("cp_agent.commands")

Handler = Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]


def _ping(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "succeeded", {"pong": True, "agent_version": __version__, "echo": args}


class CommandRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {"ping": _ping}

    def register(self, kind: str, handler: Handler) -> None:
        self._handlers[kind] = handler

    def kinds(self) -> list[str]:
        return sorted(self._handlers)

    def handle(self, command: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        kind = str(command.get("kind", ""))
        args = command.get("args") or {}
        handler = self._handlers.get(kind)
        if handler is None:
            return "unknown", {
                "message": f"unknown command {kind!r}: this agent (cp-agent {__version__}) handles "
                           f"{', '.join(self.kinds())}",
                "known_kinds": self.kinds(),
            }
        try:
            status, result = handler(dict(args) if isinstance(args, dict) else {"value": args})
        except Exception as exc:  # a failing handler is a failed command, reported, not a dead agent
            log.exception("command %s #%s failed", kind, command.get("id"))
            return "failed", {"message": f"{type(exc).__name__}: {exc}"}
        if status not in ("succeeded", "failed", "unknown"):
            return "failed", {"message": f"handler returned an invalid status {status!r}"}
        return status, result
