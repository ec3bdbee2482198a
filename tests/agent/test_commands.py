"""The agent's command executor: commands in arrival order, acks that never overtake
each other, in_progress for slow ones, nothing run twice."""

from __future__ import annotations

import threading
import time
from typing import Any

from agent.cp_agent.commands import CommandExecutor, CommandRegistry
from tests.live.stack import wait_for


class Acks:
    def __init__(self) -> None:
        self.sent: list[tuple[int, str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, command_id: int, status: str, result: dict[str, Any], retry: bool) -> bool:
        with self.lock:
            self.sent.append((command_id, status, result))
        return True

    def of(self, command_id: int) -> list[str]:
        with self.lock:
            return [s for i, s, _ in self.sent if i == command_id]


def test_it_runs_commands_in_order_and_answers_unknown_kinds_at_once() -> None:
    ran: list[str] = []

    def drain(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        ran.append(f"drain {args['n']}")
        return "succeeded", {}

    def uncordon(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        ran.append("uncordon")
        return "succeeded", {}

    registry = CommandRegistry()
    registry.register("drain", drain)
    registry.register("uncordon", uncordon)
    acks = Acks()
    executor = CommandExecutor(registry, acks)
    executor.submit({"id": 1, "kind": "drain", "args": {"n": 1}})
    executor.submit({"id": 2, "kind": "frobnicate", "args": {}})
    executor.submit({"id": 3, "kind": "uncordon", "args": {}})
    assert acks.sent[0][:2] == (2, "unknown")  # answered before anything ran
    assert "handles drain, ping, uncordon" in acks.sent[0][2]["message"]
    assert executor.run_pending() == 2
    assert ran == ["drain 1", "uncordon"]
    assert [(i, s) for i, s, _ in acks.sent] == [(2, "unknown"), (1, "succeeded"), (3, "succeeded")]


def test_it_reports_a_crashing_handler_as_failed() -> None:
    registry = CommandRegistry()
    registry.register("diagnose", lambda args: 1 / 0)  # type: ignore[arg-type, return-value]
    acks = Acks()
    executor = CommandExecutor(registry, acks)
    executor.submit({"id": 9, "kind": "diagnose", "args": {}})
    executor.run_pending()
    assert acks.sent == [(9, "failed", {"message": "ZeroDivisionError: division by zero"})]


def test_it_acks_a_slow_command_in_progress_before_its_answer_and_keeps_polling() -> None:
    release = threading.Event()
    registry = CommandRegistry()
    def install(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        release.wait(10)
        return "succeeded", {"done": True}

    registry.register("install_versions", install, progress_info={"hook": {"command": "install.sh", "timeout_s": 600}})
    registry.register("uncordon", lambda args: ("succeeded", {}))
    acks = Acks()
    executor = CommandExecutor(registry, acks, progress_after=0.2, progress_every=0.3)
    executor.start()
    try:
        executor.submit({"id": 1, "kind": "install_versions", "args": {}})
        executor.submit({"id": 2, "kind": "uncordon", "args": {}})  # queued behind the slow one
        wait_for(lambda: acks.of(1).count("in_progress") >= 2, timeout=10, what="repeated progress acks")
        wait_for(lambda: "in_progress" in acks.of(2), timeout=10, what="the queued command's progress ack")
        progress = next(r for i, s, r in acks.sent if i == 1 and s == "in_progress")
        assert progress["hook"] == {"command": "install.sh", "timeout_s": 600}
        assert progress["message"].startswith("install_versions running for")
        queued = next(r for i, s, r in acks.sent if i == 2 and s == "in_progress")
        assert queued["message"] == "uncordon queued behind 1 earlier command(s)"
        executor.submit({"id": 1, "kind": "install_versions", "args": {}})  # redelivered meanwhile
        release.set()
        wait_for(lambda: "succeeded" in acks.of(2), timeout=10, what="both commands to finish")
        assert executor.progress_due(now=time.monotonic() + 3600) == 0  # finished: no progress acks after
    finally:
        executor.stop()
    assert acks.of(1)[-1] == "succeeded" and set(acks.of(1)[:-1]) == {"in_progress"}
    assert acks.of(2)[-1] == "succeeded" and set(acks.of(2)[:-1]) == {"in_progress"}
    assert executor.handled == 2  # the redelivered copy did not run again


def test_it_acks_a_finished_command_again_when_it_is_delivered_again() -> None:
    registry = CommandRegistry()
    acks = Acks()
    executor = CommandExecutor(registry, acks)
    executor.submit({"id": 5, "kind": "ping", "args": {"n": 1}})
    executor.run_pending()
    executor.submit({"id": 5, "kind": "ping", "args": {"n": 1}})  # the first ack was lost
    assert executor.run_pending() == 0
    assert acks.of(5) == ["succeeded", "succeeded"] and executor.handled == 1
