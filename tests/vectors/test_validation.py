"""Validating a candidate combination on the gray pool, with the fleet simulator's agent
loop playing the gray nodes (its bad_combination fault perturbs QLinearMatMul)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module
from apps.operations import lifecycle
from apps.operations.selectors import scale_up_candidates
from apps.simulator.engine import Engine
from apps.simulator.runner import FleetSimulator, Tokens
from apps.simulator.selectors import world
from apps.simulator.services import fault_set
from apps.vectors.advance import run_advance
from apps.vectors.choices import RunState
from apps.vectors.models import RunTarget, VectorResult, VectorRun
from tests.vectors.test_import import EXPECTED

pytestmark = pytest.mark.django_db

QLINEARMATMUL_CASES = sorted(n for n in EXPECTED if n.startswith("test_qlinearmatmul"))


class SimulatedGrayPool:
    """The simulator's agent loop for the fleet's nodes, its HTTP routed to the test API in-process."""

    def __init__(self, fleet: Any) -> None:
        self.fleet = fleet
        self.sim = FleetSimulator(api="http://testserver", tokens=Tokens(gateway="", nodes=dict(fleet.keys)),
                                  engine=Engine(seed=1), load_world=world)
        self.sim.sync_transport = httpx.MockTransport(self._route)

    def _route(self, request: httpx.Request) -> httpx.Response:
        key = request.headers["Authorization"].removeprefix("Agent ")
        hostname = next(h for h, k in self.fleet.keys.items() if k == key)
        response = self.fleet.client(hostname).get(request.url.path)
        return httpx.Response(response.status_code, content=response.content,
                              headers={"Content-Type": "application/json"})

    def poll(self, hostname: str) -> list[tuple[str, str]]:
        self.sim.last_nodes, self.sim.last_faults, _ = world()
        client = self.fleet.client(hostname)
        done = []
        for command in client.get("/api/v1/agent/commands/", {"wait": 0}).json():
            if command["kind"] == "run_vectors":
                status, result = self.sim.run_vectors(hostname, self.fleet.keys[hostname], command)
            else:
                status, result = self.sim.handle_command(hostname, command)
            ack = client.post(f"/api/v1/agent/commands/{command['id']}/ack/", {"status": status, "result": result},
                              format="json")
            assert ack.status_code == 200, ack.content
            done.append((command["kind"], status))
        return done


def _gray_pool(fleet: Any, admin_api: Any) -> list[Any]:
    nodes = [fleet.node("g-1", state=NodeState.STANDBY, modules=2), fleet.node("g-2", state=NodeState.STANDBY)]
    for node in nodes:
        response = admin_api.post(f"/api/v1/nodes/{node.pk}/gray/", {"gray": True, "reason": "validation pool"},
                                  format="json")
        assert response.status_code == 200, response.json()
        assert response.json() == {"changed": True, "node": {"id": node.pk, "hostname": node.hostname,
                                                              "state": "standby", "gray": True}}
    fleet.node("serving-1")  # an active node of the same type: never touched by validation
    return nodes


def _validate(fleet: Any, operator_api: Any, suite: Any, pool: SimulatedGrayPool, gray: list[Any]) -> VectorRun:
    response = operator_api.post(f"/api/v1/version-combinations/{fleet.candidate.pk}/validate/",
                                 {"suite": suite.pk, "reason": "new driver"}, format="json")
    assert response.status_code == 201, response.json()
    run = VectorRun.objects.get(pk=response.json()["id"])
    fleet.candidate.refresh_from_db()
    assert fleet.candidate.state == CombinationState.VALIDATING
    for _ in range(4):  # install, run, restore: each answered by the simulated agents
        run_advance(run.pk)
        for node in gray:
            pool.poll(node.hostname)
    assert run_advance(run.pk) in (RunState.PASSED, RunState.FAILED)
    run.refresh_from_db()
    return run


def _versions(gray: list[Any]) -> set[tuple[str, str]]:
    return set(Module.objects.filter(node__in=gray).values_list("driver_version", "framework_version"))


def test_a_clean_candidate_is_validated_and_the_gray_nodes_get_their_versions_back(fleet, admin_api, operator_api,
                                                                                   int8_suite) -> None:  # type: ignore[no-untyped-def]
    gray = _gray_pool(fleet, admin_api)
    pool = SimulatedGrayPool(fleet)
    run = _validate(fleet, operator_api, int8_suite, pool, gray)

    assert run.state == RunState.PASSED, run.message
    fleet.candidate.refresh_from_db()
    assert fleet.candidate.state == CombinationState.VALIDATED
    assert _versions(gray) == {("2.3.1", "1.18.0")}
    assert VectorResult.objects.filter(run=run).count() == 3 * len(EXPECTED)
    assert not VectorResult.objects.filter(module__node__hostname="serving-1").exists()
    installs = [e.changes for e in AuditEvent.objects.filter(action="module.update").order_by("id")]
    assert [c["driver_version"] for c in installs] == [["2.3.1", "2.4.0"]] * 3 + [["2.4.0", "2.3.1"]] * 3
    assert all(t.restored for t in RunTarget.objects.filter(run=run))

    pin = admin_api.post(f"/api/v1/version-combinations/{fleet.candidate.pk}/set-state/",
                            {"state": "pinned", "reason": "validated on the gray pool"}, format="json")
    assert pin.status_code == 200, pin.json()


def test_a_bad_combination_is_blocked_naming_the_perturbed_operators_cases(fleet, admin_api, operator_api,
                                                                           int8_suite) -> None:  # type: ignore[no-untyped-def]
    gray = _gray_pool(fleet, admin_api)
    fault_set(kind="bad_combination", combination=fleet.candidate, actor="test")
    pool = SimulatedGrayPool(fleet)
    run = _validate(fleet, operator_api, int8_suite, pool, gray)

    assert run.state == RunState.FAILED
    failing = sorted(set(VectorResult.objects.filter(run=run, outcome="fail").values_list("vector__name", flat=True)))
    assert failing == QLINEARMATMUL_CASES
    assert run.summary["failing_cases"] == QLINEARMATMUL_CASES
    fleet.candidate.refresh_from_db()
    assert fleet.candidate.state == CombinationState.BLOCKED
    blocked = AuditEvent.objects.get(action="versioncombination.blocked")
    assert blocked.reason.startswith(f"vector run #{run.pk}: 8 case(s) outside tolerance: "
                                     "test_qlinearmatmul_2D_int8_float16 (max abs error 20.0 on g-1-m0)")
    assert _versions(gray) == {("2.3.1", "1.18.0")}
    # Twins on the same combination computed the same (wrong) outputs.
    per_module = {}
    for r in VectorResult.objects.filter(run=run, vector__name="test_qlinearmatmul_3D_uint8_float32"):
        per_module[r.module.serial] = (r.max_abs_error, r.outputs[0]["mismatches"])
    assert len(set(per_module.values())) == 1 and len(per_module) == 3

    pin = admin_api.post(f"/api/v1/version-combinations/{fleet.candidate.pk}/set-state/",
                            {"state": "pinned", "reason": "ship it"}, format="json")
    assert pin.status_code == 409
    assert pin.json() == {"detail": "only a validated combination can be pinned or rolled out; this one is blocked",
                          "state": "blocked"}


def test_validation_needs_a_gray_pool_and_a_candidate(fleet, operator_api, int8_suite) -> None:  # type: ignore[no-untyped-def]
    url = f"/api/v1/version-combinations/{fleet.candidate.pk}/validate/"
    none = operator_api.post(url, {"suite": int8_suite.pk}, format="json")
    assert none.status_code == 409 and "no gray node holds a Axon AX-V module" in none.json()["detail"]
    pinned = operator_api.post(f"/api/v1/version-combinations/{fleet.pinned.pk}/validate/", {"suite": int8_suite.pk},
                               format="json")
    assert pinned.status_code == 409 and pinned.json()["state"] == "pinned"
    fleet.candidate.refresh_from_db()
    assert fleet.candidate.state == CombinationState.CANDIDATE and not VectorRun.objects.exists()


def test_gray_nodes_never_serve_nor_scale_up(fleet, admin_api, operator_api) -> None:  # type: ignore[no-untyped-def]
    active = fleet.node("a-1")
    refused = admin_api.post(f"/api/v1/nodes/{active.pk}/gray/", {"gray": True, "reason": "pool"}, format="json")
    assert refused.status_code == 409 and "only a standby or maintenance node joins" in refused.json()["detail"]
    assert operator_api.post(f"/api/v1/nodes/{active.pk}/gray/", {"gray": True, "reason": "pool"},
                             format="json").status_code == 403
    standby = fleet.node("s-1", state=NodeState.STANDBY)
    lifecycle.node_gray_set(node=standby, gray=True, actor="test", reason="pool")
    chosen, skipped = scale_up_candidates(tier=fleet.tier, count=5)
    assert standby not in chosen and "gray pool" in skipped["s-1"]
    from apps.common.errors import Conflict

    with pytest.raises(Conflict, match="is in the gray pool"):
        lifecycle.node_activate(node=standby, actor="test", reason="scale up")
    standby.refresh_from_db()
    assert standby.state == NodeState.STANDBY


def test_a_candidates_run_shows_its_difference_from_the_pinned_outputs(fleet, admin_api, operator_api,  # type: ignore[no-untyped-def]
                                                                       int8_suite) -> None:
    gray = _gray_pool(fleet, admin_api)
    pool = SimulatedGrayPool(fleet)
    # The pinned combination's outputs, from a run on a serving module.
    from apps.vectors.runs import run_create

    pinned_run = run_create(suite=int8_suite, modules=list(Module.objects.filter(node__hostname="serving-1")),
                            actor="test", combination=fleet.pinned)
    run_advance(pinned_run.pk)
    pool.poll("serving-1")
    assert run_advance(pinned_run.pk) == RunState.PASSED

    fault_set(kind="bad_combination", combination=fleet.candidate, actor="test")
    run = _validate(fleet, operator_api, int8_suite, pool, gray)
    assert run.summary["baseline_moved_cases"] == QLINEARMATMUL_CASES
    moved = VectorResult.objects.get(run=run, module__serial="g-1-m0",
                                     vector__name="test_qlinearmatmul_2D_int8_float16")
    assert moved.baseline["run"] == pinned_run.pk and moved.baseline["identical"] is False
    assert moved.baseline["outputs"][0]["max_abs_error"] == moved.outputs[0]["max_abs_error"] == 20.0
    same = VectorResult.objects.get(run=run, module__serial="g-1-m0", vector__name="test_qlinearconv")
    assert same.baseline["identical"] is True and same.baseline["inside_tolerance"] is True
    unsupported = VectorResult.objects.get(run=run, module__serial="g-1-m0", vector__name="test_quantizelinear")
    assert unsupported.baseline == {}



def test_a_combination_is_not_validated_by_hand(fleet: Any, admin_api: Any) -> None:
    """Only its regression vectors on the gray pool make a candidate validated; an admin's set-state may
    pin a validated one, or unpin, but not vouch for one."""
    for state in ("validating", "validated"):
        r = admin_api.post(f"/api/v1/version-combinations/{fleet.candidate.pk}/set-state/",
                           {"state": state, "reason": "trust me"}, format="json")
        assert r.status_code == 409 and "regression vectors" in r.json()["detail"], r.json()
    fleet.candidate.refresh_from_db()
    assert fleet.candidate.state == CombinationState.CANDIDATE
