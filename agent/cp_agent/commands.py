"""The command channel: handlers by kind, the order they run in, and acks.

A handler returns ``(status, result)`` with status ``"succeeded"`` or
``"failed"``. Register one with ``CommandRegistry.register(kind, handler)``
(the handler gets the command's args) or ``register_command(kind, handler)``
(it gets the whole command: id, kind, args). A kind without a handler is
acknowledged ``"unknown"`` at once, with a message naming it and the kinds this
agent knows, so the control plane sees that this agent cannot do it.

Commands run one at a time in the order they arrived (a drain's hook finishes
before the uncordon's hook starts), in a worker thread, so the channel keeps
polling while a long hook runs. A command still running (or still queued)
``progress_after`` seconds after it arrived is acknowledged ``"in_progress"``,
and again every ``progress_every`` seconds while it runs, so the control plane
neither redelivers it nor takes a dead agent for a slow hook. Acks of one
command never overtake each other. A command delivered again while queued or
running is not run twice; one delivered again after it finished gets its
final ack again (the first was lost).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.cp_agent import __version__

log = logging.getLogger("cp_agent.commands")

Result = tuple[str, dict[str, Any]]
Handler = Callable[[dict[str, Any]], Result]
CommandHandler = Callable[[dict[str, Any]], Result]
# (command id, status, result, retry until delivered?) -> delivered
Ack = Callable[[int, str, dict[str, Any], bool], bool]

FINAL = ("succeeded", "failed", "unknown")


def _ping(args: dict[str, Any]) -> Result:
    return "succeeded", {"pong": True, "agent_version": __version__, "echo": args}


def _args(command: dict[str, Any]) -> dict[str, Any]:
    args = command.get("args") or {}
    return dict(args) if isinstance(args, dict) else {"value": args}


@dataclass
class _Entry:
    handler: CommandHandler
    progress_info: dict[str, Any] | None = None


class CommandRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, _Entry] = {}
        self.register("ping", _ping)

    def register(self, kind: str, handler: Handler, *, progress_info: dict[str, Any] | None = None) -> None:
        """``handler(args) -> (status, result)``."""
        self._handlers[kind] = _Entry(lambda command: handler(_args(command)), progress_info)

    def register_command(self, kind: str, handler: CommandHandler, *,
                         progress_info: dict[str, Any] | None = None) -> None:
        """``handler(command) -> (status, result)``; the command has id, kind and args."""
        self._handlers[kind] = _Entry(handler, progress_info)

    def kinds(self) -> list[str]:
        return sorted(self._handlers)

    def knows(self, kind: str) -> bool:
        return kind in self._handlers

    def progress_info(self, kind: str) -> dict[str, Any] | None:
        entry = self._handlers.get(kind)
        return entry.progress_info if entry else None

    def unknown(self, kind: str) -> Result:
        return "unknown", {
            "message": f"unknown command {kind!r}: this agent (cp-agent {__version__}) handles "
                       f"{', '.join(self.kinds())}",
            "known_kinds": self.kinds(),
        }

    def handle(self, command: dict[str, Any]) -> Result:
        kind = str(command.get("kind", ""))
        entry = self._handlers.get(kind)
        if entry is None:
            return self.unknown(kind)
        try:
            status, result = entry.handler(command)
        except Exception as exc:  # a failing handler is a failed command, reported, not a dead agent
            log.exception("command %s #%s failed", kind, command.get("id"))
            return "failed", {"message": f"{type(exc).__name__}: {exc}"}
        if status not in ("succeeded", "failed"):
            return "failed", {"message": f"handler returned an invalid status {status!r}"}
        return status, result


@dataclass
class _Job:
    command: dict[str, Any]
    received: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float | None = None
    done: bool = False
    final: Result | None = None
    last_progress: float | None = None

    @property
    def id(self) -> int:
        return int(self.command["id"])

    @property
    def kind(self) -> str:
        return str(self.command.get("kind", ""))


class CommandExecutor:
    """Runs commands in arrival order in one worker thread and acknowledges them."""

    def __init__(self, registry: CommandRegistry, ack: Ack, *, progress_after: float = 5.0,
                 progress_every: float = 20.0, remember: int = 1000) -> None:
        self.registry = registry
        self._ack = ack
        self.progress_after = progress_after
        self.progress_every = progress_every
        self._remember = remember
        self._jobs: OrderedDict[int, _Job] = OrderedDict()
        self._queue: deque[_Job] = deque()
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.handled = 0

    # -- intake -----------------------------------------------------------------------------------
    def submit(self, command: dict[str, Any]) -> None:
        """Take a delivered command: answer an unknown kind now, queue the rest (once per id)."""
        command_id = int(command["id"])
        kind = str(command.get("kind", ""))
        with self._cv:
            seen = self._jobs.get(command_id)
        if seen is not None:
            if seen.done and seen.final is not None:
                log.info("command #%s %s delivered again after it finished: acknowledging %s again",
                         command_id, kind, seen.final[0])
                self._send(seen, *seen.final, retry=True)
            else:
                log.info("command #%s %s delivered again while it is queued or running: not run twice",
                         command_id, kind)
            return
        job = _Job(command=command, received=time.monotonic())
        with self._cv:
            self._jobs[command_id] = job
            while len(self._jobs) > self._remember:
                old_id, old = next(iter(self._jobs.items()))
                if not old.done:
                    break
                del self._jobs[old_id]
        if not self.registry.knows(kind):
            self._finish(job, self.registry.unknown(kind))
            return
        with self._cv:
            self._queue.append(job)
            self._cv.notify_all()

    # -- running ----------------------------------------------------------------------------------
    def run_next(self, timeout: float = 0.0) -> bool:
        """Run the oldest queued command (waiting up to ``timeout`` s for one); False when none."""
        with self._cv:
            if not self._queue and timeout > 0:
                self._cv.wait(timeout)
            if not self._queue:
                return False
            job = self._queue.popleft()
            job.started = time.monotonic()
        log.info("command #%s %s: running", job.id, job.kind)
        self._finish(job, self.registry.handle(job.command))
        return True

    def run_pending(self) -> int:
        n = 0
        while self.run_next():
            n += 1
        return n

    def pending(self) -> int:
        with self._cv:
            return len(self._queue) + sum(1 for j in self._jobs.values() if j.started and not j.done)

    def _finish(self, job: _Job, outcome: Result) -> None:
        status, result = outcome
        took = time.monotonic() - (job.started or job.received)
        log.info("command #%s %s -> %s (%.1f s)%s", job.id, job.kind, status, took,
                 f": {result.get('message')}" if result.get("message") else "")
        with job.lock:  # an in_progress ack under way goes out first
            job.done, job.final = True, (status, result)
        self.handled += 1
        self._send(job, status, result, retry=True)

    def _send(self, job: _Job, status: str, result: dict[str, Any], *, retry: bool) -> bool:
        with job.lock:
            return self._ack(job.id, status, result, retry)

    # -- progress ---------------------------------------------------------------------------------
    def progress_due(self, now: float | None = None) -> int:
        """Acknowledge ``in_progress`` for every command that has waited or run long enough; returns how many."""
        now = time.monotonic() if now is None else now
        with self._cv:
            jobs = [j for j in self._jobs.values() if not j.done]
        sent = 0
        for job in jobs:
            if now - job.received < self.progress_after:
                continue
            if job.last_progress is not None and now - job.last_progress < self.progress_every:
                continue
            with job.lock:
                if job.done:
                    continue
                result = self._progress_result(job, now)
                job.last_progress = now
                if self._ack(job.id, "in_progress", result, False):
                    sent += 1
        return sent

    def _progress_result(self, job: _Job, now: float) -> dict[str, Any]:
        if job.started is None:
            with self._cv:
                ahead = next((i for i, j in enumerate(self._queue) if j is job), 0)
                ahead += sum(1 for j in self._jobs.values() if j.started is not None and not j.done)
            out: dict[str, Any] = {"message": f"{job.kind} queued behind {ahead} earlier command(s)",
                                   "queued_s": round(now - job.received, 1)}
        else:
            running = now - job.started
            out = {"message": f"{job.kind} running for {running:.0f} s", "running_s": round(running, 1)}
        info = self.registry.progress_info(job.kind)
        if info:
            out.update(info)
        return out

    # -- threads ----------------------------------------------------------------------------------
    def start(self) -> None:
        for name, target in (("worker", self._worker), ("progress", self._progress)):
            thread = threading.Thread(target=target, name=f"cp-agent-commands-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    @property
    def started(self) -> bool:
        return bool(self._threads)

    def _worker(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_next(timeout=0.5)
            except Exception:  # never lose the worker to one bad command
                log.exception("command worker error")

    def _progress(self) -> None:
        tick = max(0.1, min(1.0, self.progress_after / 2))
        while not self._stop.wait(tick):
            try:
                self.progress_due()
            except Exception:
                log.exception("command progress error")

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        for thread in self._threads:
            thread.join(timeout=timeout)
