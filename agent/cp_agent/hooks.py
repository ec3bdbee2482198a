"""Action hooks: what this node does when the control plane cordons, drains,
uncordons it, quarantines a module, installs versions...

Each action kind can have an operator-configured command (``--on-drain CMD``,
…). It runs through ``/bin/sh -c`` in its own process group with the agent's
environment plus the command's details:

- ``CP_NODE``, ``CP_COMMAND_ID``, ``CP_COMMAND_KIND``;
- ``CP_ARGS``: the command's args as JSON;
- ``CP_ARG_<NAME>`` per arg (name upper-cased, other characters ``_``):
  strings and numbers as they are, booleans ``true``/``false``, null empty,
  lists and objects as JSON.

Exit 0 is ``succeeded``; any other exit, a timeout (the process group is sent
SIGTERM, then SIGKILL 5 s later) or a failure to start is ``failed``. The ack
carries ``hook``: the command, exit code, whether it timed out, its duration
and the last lines of its output (stdout and stderr together). Without a hook
the action acks ``succeeded`` with ``"hook": null`` (routing work away is the
gateway's job, from ``/api/v1/schedulable/``), except ``install_versions``: a
node cannot claim versions it did not install, so without a hook it fails
unless the module backend is a stand-in that records them (reference,
simulated).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.cp_agent.commands import CommandRegistry, Result

log = logging.getLogger("cp_agent.hooks")

# Action kinds the control plane sends, and what each means for the node.
ACTIONS: dict[str, str] = {
    "cordon": "stop new work reaching this node; requests in flight finish",
    "drain": "stop new work reaching this node and let in-flight requests finish",
    "uncordon": "take new work again",
    "resume": "take new work again (a standby node activated by a scale-up)",
    "standby": "stop taking work: the node returns to standby",
    "maintenance": "the node enters maintenance",
    "quarantine_module": "take one module (CP_ARG_SERIAL) out of service",
    "release_module": "put one module (CP_ARG_SERIAL) back in service",
    "install_versions": "install a driver/framework combination on the modules",
}
DEFAULT_TIMEOUT_S = 300.0
TAIL_LINES = 20
TAIL_CHARS = 4000
KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class Hook:
    kind: str
    command: str
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass
class HookRun:
    command: str
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.error

    def as_dict(self, timeout_s: float) -> dict[str, Any]:
        out: dict[str, Any] = {"command": self.command, "exit_code": self.exit_code, "timed_out": self.timed_out,
                               "timeout_s": timeout_s, "duration_s": round(self.duration_s, 3),
                               "output_tail": self.output_tail}
        if self.error:
            out["error"] = self.error
        return out


_NAME = re.compile(r"[^A-Z0-9]+")


def _env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True)


def hook_env(command: dict[str, Any], *, node: str) -> dict[str, str]:
    """The variables a hook sees on top of the agent's own environment."""
    args = command.get("args") or {}
    if not isinstance(args, dict):
        args = {"value": args}
    env = {"CP_NODE": node, "CP_COMMAND_ID": str(command.get("id", "")),
           "CP_COMMAND_KIND": str(command.get("kind", "")), "CP_ARGS": json.dumps(args, sort_keys=True)}
    for key, value in args.items():
        name = _NAME.sub("_", str(key).upper()).strip("_")
        if name:
            env[f"CP_ARG_{name}"] = _env_value(value)
    return env


def _tail(lines: deque[str]) -> str:
    text = "".join(lines)
    return text[-TAIL_CHARS:]


def run_hook(command: str, *, env: dict[str, str], timeout_s: float) -> HookRun:
    """Run ``command`` through /bin/sh with ``env`` added; kill its process group at the timeout."""
    started = time.monotonic()
    lines: deque[str] = deque(maxlen=TAIL_LINES)
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True,
                                text=True, errors="replace")
    except OSError as exc:
        return HookRun(command, None, False, time.monotonic() - started, "", error=f"could not start: {exc}")

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=pump, name="cp-agent-hook-output", daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=2.0)  # a grandchild still holding the pipe must not hold the ack
    return HookRun(command, None if timed_out else proc.returncode, timed_out, time.monotonic() - started,
                   _tail(lines))


def _kill_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _describe(kind: str, run: HookRun) -> str:
    if run.error:
        return f"{kind} hook {run.error}"
    if run.timed_out:
        return f"{kind} hook timed out after {run.duration_s:.0f} s and was killed"
    if run.exit_code == 0:
        return f"{kind} hook exited 0 in {run.duration_s:.1f} s"
    return f"{kind} hook failed with exit code {run.exit_code}"


def hook_action(hook: Hook, *, node: str) -> Callable[[dict[str, Any]], Result]:
    """A command handler that runs ``hook`` and reports its outcome."""

    def handle(command: dict[str, Any]) -> Result:
        log.info("command #%s %s: running hook %r (timeout %g s)", command.get("id"), hook.kind, hook.command,
                 hook.timeout_s)
        run = run_hook(hook.command, env=hook_env(command, node=node), timeout_s=hook.timeout_s)
        message = _describe(hook.kind, run)
        if not run.ok:
            log.warning("command #%s: %s; last output: %s", command.get("id"), message,
                        run.output_tail.strip()[-500:] or "(none)")
        result: dict[str, Any] = {"hook": run.as_dict(hook.timeout_s), "message": message}
        return ("succeeded" if run.ok else "failed"), result

    return handle


def no_hook_action(kind: str, *, record_versions: Callable[[dict[str, Any]], None] | None = None
                   ) -> Callable[[dict[str, Any]], Result]:
    """A command handler for an action without a configured hook."""

    def handle(command: dict[str, Any]) -> Result:
        args = command.get("args") or {}
        if kind == "install_versions":
            if record_versions is None:
                return "failed", {"hook": None, "message": "no --on-install-versions hook configured: this "
                                  "node cannot install versions; nothing was changed"}
            record_versions(args if isinstance(args, dict) else {})
            return "succeeded", {"hook": None, "versions": args,
                                 "message": "no install hook: the stand-in module backend recorded the versions"}
        return "succeeded", {"hook": None,
                             "message": f"no {kind} hook configured; routing is the gateway's "
                                        "(it reads /api/v1/schedulable/)"}

    return handle


def register_actions(registry: CommandRegistry, hooks: dict[str, Hook], *, node: str,
                     record_versions: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Register a handler for every action kind: its hook, or the no-hook answer."""
    unknown = set(hooks) - set(ACTIONS)
    if unknown:
        raise ValueError(f"no such action kind: {', '.join(sorted(unknown))}")
    for kind in ACTIONS:
        hook = hooks.get(kind)
        if hook is None:
            registry.register_command(kind, no_hook_action(kind, record_versions=record_versions))
        else:
            registry.register_command(kind, hook_action(hook, node=node),
                                      progress_info={"hook": {"command": hook.command,
                                                              "timeout_s": hook.timeout_s}})
