"""Vectors end to end on the live stack: the real server, a Celery worker on the vectors
queue, the beat's sweep, and the agents: the standalone agent (a subprocess, reference
backend: ONNX Runtime on the CPU) and the fleet simulator's agent loop."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import FrameworkRelease, Module, VersionCombination
from apps.operations import lifecycle
from apps.simulator.services import fault_set
from apps.vectors.models import VectorResult
from apps.vectors.services import suite_import
from tests.live.stack import LiveStack, api_client, wait_for
from tests.vectors.conftest import Fleet, int8_specs
from tests.vectors.test_import import EXPECTED

pytestmark = [pytest.mark.heavy, pytest.mark.live]

SWEEP = "apps.vectors.tasks.vector_runs_advance"
FINAL = ("passed", "failed", "error", "cancelled")



def _run_when_final(api: httpx.Client, run_id: int, *, timeout: float) -> dict[str, Any]:
    def final() -> dict[str, Any]:
        body = dict(api.get(f"/api/v1/vector-runs/{run_id}/").json())
        return body if body["state"] in FINAL else {}
    return wait_for(final, timeout=timeout, what=f"vector run #{run_id} to end", interval=1.0)


def test_the_standalone_agent_runs_a_suite_on_onnx_runtime(live_stack: LiveStack) -> None:
    fleet = Fleet()
    node = fleet.node("n-ref")
    module = Module.objects.get(node=node)
    suite, _ = suite_import(name="onnx-int8", specs=int8_specs(), actor="live-test")
    live_stack.web()
    live_stack.worker()
    live_stack.beat(every={SWEEP: 1}, only=[SWEEP])
    live_stack.agent(node, "--backend", "reference", "--module", module.serial, "--reference-rate", "5")
    api = api_client(live_stack, timeout=30)

    created = api.post("/api/v1/vector-runs/", json={"suite": suite.pk, "modules": [module.pk],
                                                     "reason": "live check"})
    assert created.status_code == 201, created.text
    run = _run_when_final(api, created.json()["id"], timeout=240)

    assert run["state"] == "passed", run
    assert run["summary"]["outcomes"] == {"pass": 17, "fail": 0, "unsupported": 27, "error": 1}
    outcomes = dict(VectorResult.objects.filter(run_id=run["id"]).values_list("vector__name", "outcome"))
    assert outcomes == EXPECTED
    timed = VectorResult.objects.filter(run_id=run["id"], outcome="pass", agent_ms__isnull=False).count()
    assert timed == 17  # the agent's own execution time of every case that ran


def test_validation_on_the_simulated_gray_pool_blocks_a_bad_combination_and_validates_a_clean_one(
        live_stack: LiveStack) -> None:
    fleet = Fleet()
    gray = [fleet.node("g-1", state=NodeState.STANDBY, modules=2), fleet.node("g-2", state=NodeState.STANDBY)]
    for node in gray:
        lifecycle.node_gray_set(node=node, gray=True, actor="live-test", reason="validation pool")
    suite, _ = suite_import(name="onnx-int8", specs=int8_specs(), actor="live-test")
    bad = fleet.candidate
    fault_set(kind="bad_combination", combination=bad, actor="live-test")
    framework = FrameworkRelease.objects.create(name="axon-runtime", version="1.19.0")
    clean = VersionCombination.objects.create(module_type=fleet.mtype, driver=fleet.new_driver, framework=framework)
    live_stack.web()
    live_stack.worker()
    live_stack.beat(every={SWEEP: 1}, only=[SWEEP])
    live_stack.simulator(speed=60, interval=2.0, command_interval=1.0)
    api = api_client(live_stack, timeout=30)

    for combination, verdict, state in ((bad, "failed", CombinationState.BLOCKED),
                                        (clean, "passed", CombinationState.VALIDATED)):
        started = api.post(f"/api/v1/version-combinations/{combination.pk}/validate/",
                           json={"suite": suite.pk, "reason": "live validation"})
        assert started.status_code == 201, started.text
        run = _run_when_final(api, started.json()["id"], timeout=300)
        assert run["state"] == verdict, run
        combination.refresh_from_db()
        assert combination.state == state
        versions = set(Module.objects.filter(node__in=gray).values_list("driver_version", "framework_version"))
        assert versions == {("2.3.1", "1.18.0")}  # back on their previous versions either way
        if verdict == "failed":
            assert run["summary"]["failing_cases"] == sorted(n for n in EXPECTED if "qlinearmatmul" in n)
