"""cpctl's rollout and vector-run commands against answers given in place of the API: the preview
as an operator reads it, a refused start printed as the server worded it, the overrides sent by
name, and ``watch`` / ``--wait`` ending 0, 1 or 3 as the rollout or run ends (or does not)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cpctl import rollouts
from tests.cpctl.test_cli import answer, context, run  # noqa: F401  (context: the server and token)

COMBINATION = {"id": 7, "module_type": 2, "driver_version": "2.4.0", "framework_name": "axon-runtime",
               "framework_version": "1.19.0", "state": "validated"}
PREVIEW = {
    "combination": 7, "module_type": 2, "target": {"driver": "2.4.0", "framework": "1.19.0"}, "suite": 3,
    "pinned": {"driver": "2.3.1", "framework": "1.18.0"},
    "waves": [{"index": 0, "canary": True, "nodes": [{"node": 1, "hostname": "n-1", "tier": 1, "serving": True}],
               "capacity": [{"tier": 1, "tier_name": "Hybrid inference", "active_before": 4, "out": 1,
                             "active_during": 3, "floor": 2, "ok": True}]},
              {"index": 1, "canary": False, "nodes": [{"node": 2, "hostname": "n-2", "tier": 1, "serving": True},
                                                      {"node": 3, "hostname": "n-3", "tier": 1, "serving": True}],
               "capacity": [{"tier": 1, "tier_name": "Hybrid inference", "active_before": 4, "out": 2,
                             "active_during": 2, "floor": 2, "ok": True}]}],
    "skipped": [{"node": 4, "hostname": "n-4", "reason": "an open critical finding (ecc_errors)"}],
    "tiers": [], "gates": {"combination": {"ok": True, "detail": "validated", "overridable": False},
                           "health": {"ok": False, "detail": "1 finding the rollout will not fix",
                                      "overridable": True}},
    "failing": ["health"],
}


def rollout(state: str, **more: Any) -> dict[str, Any]:
    return {"id": 12, "state": state, "combination_name": "AX-40: driver 2.4.0 + axon-runtime 1.19.0",
            "current_wave": 1, "wave_count": 2, "waiting_for": "", "message": "", **more}


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rollouts, "POLL_S", 0.0)


def test_the_preview_reads_as_waves_capacity_skipped_nodes_and_gates() -> None:
    sent: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            if request.url.path == "/api/v1/version-combinations/7/":
                return answer(200, COMBINATION)
            assert request.url.path == "/api/v1/tiers/" and request.url.params["kind"] == "hybrid_inference"
            return answer(200, {"count": 1, "next": None, "results": [{"id": 1, "kind": "hybrid_inference"}]})
        sent.append(json.loads(request.content))
        return answer(200, PREVIEW)
    code, out, err = run(["rollout", "preview", "--combination", "7", "--tier", "hybrid_inference", "--canary", "10%",
                          "--wave-size", "2", "--bake", "5m"], handler)
    assert code == 0, err
    assert sent == [{"combination": 7, "module_type": 2, "tiers": [1], "canary": "10%", "wave_size": 2,
                     "bake_s": 300}]
    assert out.splitlines() == [
        "target: driver 2.4.0, framework 1.19.0",
        "pinned now: driver 2.3.1, framework 1.18.0",
        "canary: 1 node: n-1",
        "  Hybrid inference: 3 of 4 active during it (floor 2): ok",
        "wave 1: 2 nodes: n-2, n-3",
        "  Hybrid inference: 2 of 4 active during it (floor 2): ok",
        "skipped n-4: an open critical finding (ecc_errors)",
        "gates now (dry run):",
        "  combination: passes: validated",
        "  health: FAILS (overridable): 1 finding the rollout will not fix",
        "failing: health (a start needs --override for each, and a reason)",
    ]
    code, out, _ = run(["rollout", "preview", "--combination", "7", "-o", "json"], handler)
    assert code == 0 and json.loads(out) == PREVIEW


def test_a_start_refused_on_a_failing_gate_exits_1_with_the_servers_words_and_overrides_go_by_name() -> None:
    detail = "the dry-run gates fail: health (1 finding the rollout will not fix); override them by name, with a reason"
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return answer(200, COMBINATION)
        body = json.loads(request.content)
        bodies.append(body)
        if "override" not in body:
            return answer(409, {"detail": detail, "failing": ["health"]})
        return answer(201, rollout("planned"))
    code, out, err = run(["rollout", "create", "--combination", "7", "--reason", "driver 2.4.0"], handler)
    assert (code, out) == (1, "")
    assert err == f"rollout create: refused (HTTP 409):\n{detail}\n"
    code, out, err = run(["rollout", "create", "--combination", "7", "--reason", "driver 2.4.0", "--override",
                          "health"], handler)
    assert code == 0, err
    assert bodies[-1] == {"combination": 7, "module_type": 2, "reason": "driver 2.4.0", "override": ["health"]}
    assert out == ("rollout/12 created (planned): AX-40: driver 2.4.0 + axon-runtime 1.19.0, past the overridden "
                   "gates health\n")


def states(*sequence: dict[str, Any]) -> Any:
    it: Iterator[dict[str, Any]] = iter(sequence)
    last: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal last
        assert request.url.path == "/api/v1/rollouts/12/"
        last = next(it, last)
        return answer(200, last)
    return handler


def test_watch_ends_0_when_completed_1_when_rolled_back_and_3_on_its_timeout() -> None:
    code, out, err = run(["rollout", "watch", "12"], states(
        rollout("canary", current_wave=0, waiting_for="n-1: draining (2 in flight)"),
        rollout("canary", current_wave=0, waiting_for="n-1: draining (2 in flight)"),
        rollout("waves", waiting_for="baking until 14:02"), rollout("completed", current_wave=2)))
    assert code == 0, err
    assert err.splitlines() == ["rollout/12 canary, wave 0/2: n-1: draining (2 in flight)",
                                "rollout/12 waves, wave 1/2: baking until 14:02", "rollout/12 completed, wave 2/2"]
    assert out.startswith("rollout/12 completed after ")
    code, out, _ = run(["rollout", "watch", "12"], states(
        rollout("rolling_back", message="cohort gate failed: generation p95 +41 %"), rollout("rolled_back")))
    assert code == 1 and out.startswith("rollout/12 rolled_back after ")
    code, out, err = run(["rollout", "watch", "12", "--timeout", "0"], states(rollout("paused")))
    assert code == 3 and "timed out after 0s watching rollout/12: rollout/12 paused" in err


def test_a_control_prints_the_new_state_and_a_refusal_exits_1() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"reason": "peak hour"}
        if request.url.path.endswith("/pause/"):
            return answer(200, rollout("paused", waiting_for="paused by an operator"))
        return answer(409, {"detail": "the rollout has ended: nothing to resume"})
    code, out, _ = run(["rollout", "pause", "12", "--reason", "peak hour"], handler)
    assert (code, out) == (0, "rollout/12 paused, wave 1/2: paused by an operator\n")
    code, out, err = run(["rollout", "resume", "12", "--reason", "peak hour"], handler)
    assert (code, out) == (1, "")
    assert err == "rollout/12 resume: refused (HTTP 409):\nthe rollout has ended: nothing to resume\n"
    code, _, err = run(["rollout", "abort", "twelve", "--reason", "x"], handler)
    assert code == 2 and "a rollout's id" in err


@pytest.mark.parametrize(("verdict", "code"), [("passed", 0), ("failed", 1)])
def test_a_vector_run_waits_for_its_verdict(verdict: str, code: int) -> None:
    run_state = iter(["running", "running", verdict])
    created: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            created.append(json.loads(request.content))
            return answer(201, {"id": 5, "state": "queued", "suite_name": "onnx-int8 v1", "timeout_s": 600})
        if request.url.path == "/api/v1/vector-suites/":
            return answer(200, {"count": 1, "next": None, "results": [{"id": 3, "name": "onnx-int8"}]})
        if request.url.path == "/api/v1/version-combinations/7/":
            return answer(200, COMBINATION)
        state = next(run_state)
        return answer(200, {"id": 5, "state": state, "phase": "", "message": "" if state == "running" else
                            f"{verdict}: 24 of 24 cases on 4 modules", "summary": {}})
    got, out, err = run(["vectors", "run", "--suite", "onnx-int8", "--combination", "7", "--reason", "nightly",
                         "--wait"], handler)
    assert got == code, err
    assert created == [{"suite": 3, "reason": "nightly", "combination": 7}]
    assert out.splitlines() == ["vector-run/5 queued: onnx-int8 v1", f"vector-run/5 {verdict}: {verdict}: 24 of 24 "
                                "cases on 4 modules"]
