"""Rollouts end to end on the live stack with the demo fleet: the real server, a Celery worker,
the beat (the rollout controller, the vector sweep, the drain controller) and the fleet
simulator playing every node (drains finish when its work is done, it installs versions and
runs the vectors; its bad_combination fault breaks QLinearMatMul on the combination).

1. The target combination goes bad in the field after it was validated: the canary fails its
   vectors, the rollout rolls it back on its own, no node beyond the canary was touched.
2. With the fault off: a clean rollout completes (canary, then waves; the worker is SIGKILLed
   during wave 1 and a second one finishes), every module in scope ends on the target, the
   combination is pinned, no tier fell below its floor at any recorded transition, no node is
   left held by the rollout, and the node an operator had cordoned is still cordoned."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apps.audit.models import AuditEvent
from apps.inventory import services as inventory_services
from apps.inventory.choices import CombinationState, NodeState, TierKind
from apps.inventory.models import Module, ModuleType, Node, Rack, Tier, VersionCombination
from apps.operations import lifecycle
from apps.operations.choices import ACTIVE_DRAIN_STATES, Owner
from apps.operations.models import Drain
from apps.rollouts.models import RolloutNode
from apps.simulator.demo import seed_demo
from apps.simulator.services import fault_set
from apps.vectors.services import suite_import
from tests.conftest import restore_migration_rows
from tests.live.stack import LiveStack, api_client, wait_for
from tests.rollouts.conftest import serving_over_time, small_specs

pytestmark = [pytest.mark.heavy, pytest.mark.live, pytest.mark.timeout(1800)]

TASKS: dict[str, float] = {"apps.rollouts.tasks.rollouts_advance": 1, "apps.vectors.tasks.vector_runs_advance": 1,
         "apps.operations.tasks.drains_advance": 1, "apps.telemetry.tasks.telemetry_rollup": 5}



def _final(api: httpx.Client, rollout_id: int, states: tuple[str, ...], *, timeout: float) -> dict[str, Any]:
    def ended() -> dict[str, Any]:
        body = dict(api.get(f"/api/v1/rollouts/{rollout_id}/").json())
        return body if body["state"] in states else {}
    return wait_for(ended, timeout=timeout, what=f"rollout #{rollout_id} to reach {states}", interval=2.0)


def test_a_bad_canary_rolls_back_alone_then_a_clean_rollout_completes_within_the_floor(
        live_stack: LiveStack) -> None:
    restore_migration_rows()
    seed_demo()
    ax = ModuleType.objects.get(model="AX-40")
    target = VersionCombination.objects.select_related("driver", "framework").get(
        module_type=ax, driver__version="2.4.0")
    inventory_services.combination_set_state(combination=target, state=CombinationState.VALIDATED, actor="live-test",
                                             reason="validated on the gray pool", by_validation=True)
    suite, _ = suite_import(name="onnx-int8-small", specs=small_specs(), actor="live-test")
    rack = Rack.objects.get(name="rack-1")
    hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    in_scope = list(Node.objects.filter(rack=rack, modules__module_type=ax).distinct().order_by("slot"))
    held = next(n for n in in_scope if n.state == NodeState.ACTIVE and n.slot > 12)
    lifecycle.node_cordon(node=held, owner=Owner.OPERATOR, reason="fan noise, look tomorrow", actor="ops")
    held_versions = set(Module.objects.filter(node=held).values_list("driver_version", flat=True))
    fault_set(kind="bad_combination", combination=target, actor="live-test")
    before = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0

    live_stack.web()
    worker = live_stack.worker()
    live_stack.beat(every=TASKS, only=list(TASKS))
    live_stack.simulator(speed=60, interval=1.0, command_interval=1.0)
    api = api_client(live_stack, timeout=60)
    body = {"combination": target.pk, "module_type": ax.pk, "racks": [rack.pk], "suite": suite.pk, "canary": 1,
            "wave_size": 3, "max_unavailable": "25%", "bake_s": 2, "drain_deadline_s": 120,
            "install_timeout_s": 120, "vectors_timeout_s": 180, "reason": "driver 2.4.0"}

    preview = api.post("/api/v1/rollouts/preview/", json=body)
    assert preview.status_code == 200, preview.text
    assert any(s["hostname"] == held.hostname and "held by operator" in s["reason"]
               for s in preview.json()["skipped"])

    # 1. Bad in the field: the canary fails and is rolled back; nothing else is touched.
    created = api.post("/api/v1/rollouts/", json=body, headers={"Idempotency-Key": "live-bad"})
    assert created.status_code == 201, created.text
    bad = _final(api, created.json()["id"], ("rolled_back", "completed", "failed", "paused"), timeout=600)
    assert bad["state"] == "rolled_back", bad
    assert "canary" in bad["message"] and "test_qlinearmatmul" in bad["message"], bad["message"]
    canary = RolloutNode.objects.get(rollout_id=bad["id"], wave=0)
    touched = set(AuditEvent.objects.filter(related_type="rollout", related_id=str(bad["id"]),
                                            action="rollout.node.cordoning").values_list("target_id", flat=True))
    assert touched == {str(canary.node_id)}
    wait_for(lambda: Node.objects.get(pk=canary.node_id).state == NodeState.ACTIVE, timeout=60,
             what="the canary back in service")
    assert set(Module.objects.filter(node_id=canary.node_id).values_list("driver_version", flat=True)) == {"2.3.1"}

    # 2. Fixed: a clean rollout completes, canary then waves.
    fault_set(kind="bad_combination", combination=target, enabled=False, actor="live-test")
    # A bake long enough for the upgraded nodes to serve and their minutes to be rolled up: the
    # cohort gate then compares them with the rest.
    created = api.post("/api/v1/rollouts/", json={**body, "bake_s": 12}, headers={"Idempotency-Key": "live-clean"})
    assert created.status_code == 201, created.text
    # A worker SIGKILLed during a wave: a second worker finishes the rollout from the stored steps.
    wait_for(lambda: RolloutNode.objects.filter(rollout_id=created.json()["id"], wave=1).exclude(
        step="pending").exists(), timeout=600, what="wave 1 under way", interval=1.0)
    worker.kill()
    live_stack.worker()
    clean = _final(api, created.json()["id"], ("completed", "rolled_back", "failed", "paused"), timeout=1500)
    assert clean["state"] == "completed", (clean["message"], clean["gates"])
    # One wave gate per wave (vectors, health, breaker); the cohort gate, after each wave's bake, passed
    # wherever it had figures to compare.
    wave_gates = [g for g in clean["gates"] if g.get("kind") != "cohort"]
    cohort_gates = [g for g in clean["gates"] if g.get("kind") == "cohort"]
    assert clean["wave_count"] >= 3 and len(wave_gates) == clean["wave_count"], clean["gates"]
    assert all(g["vectors"]["ok"] and g["health"]["ok"] for g in wave_gates), wave_gates
    assert all(g["ok"] for g in cohort_gates), cohort_gates
    # The simulator's gateway sends the per-node breakdown: the gate compared the cohorts' model stages.
    assert any(c["stage"] in ("intent", "generation") for g in cohort_gates for c in g["compared"]), [
        (g["wave"], g["detail"], g["window"], g["upgraded"], g["control"]) for g in cohort_gates]
    # Each cohort against its own figures before the rollout: the demo's nodes differ (modules past
    # their board's lanes train at half width), and a wave holding a slower one once failed a clean
    # rollout against a faster control.
    assert any(c["baseline"] for g in cohort_gates for c in g["compared"]), [
        (g["wave"], g["baseline"], g["compared"]) for g in cohort_gates]
    rows = list(RolloutNode.objects.filter(rollout_id=clean["id"]).select_related("node"))
    upgraded = [rn.node_id for rn in rows if rn.step == "done"]
    assert held.pk not in upgraded and len(upgraded) == len(in_scope) - 1 - sum(
        1 for rn in rows if rn.step == "skipped" and rn.node_id != held.pk)
    versions = set(Module.objects.filter(node_id__in=upgraded, module_type=ax)
                   .values_list("driver_version", "framework_version"))
    assert versions == {("2.4.0", "1.19.0")}
    target.refresh_from_db()
    assert target.state == CombinationState.PINNED
    # The floor, from the recorded transitions: each of the rollout's drains recorded the tier's
    # active nodes and floor when it was let through, and the tier never went below its minimum.
    for changes in AuditEvent.objects.filter(action="node.drain", changes__owner="rollout").values_list(
            "changes", flat=True):
        assert changes["capacity"]["active"] - 1 >= changes["capacity"]["floor"], changes
    counts = serving_over_time(hybrid, since_event=before)
    assert len(counts) > 2 * len(upgraded) and min(counts) >= hybrid.min_active_nodes, counts
    # The operator's node: still cordoned by the operator, on its old versions.
    held.refresh_from_db()
    assert held.state == NodeState.CORDONED
    assert Drain.objects.get(node=held, state__in=ACTIVE_DRAIN_STATES).owner == Owner.OPERATOR
    assert set(Module.objects.filter(node=held).values_list("driver_version", flat=True)) == held_versions
    assert not Drain.objects.filter(owner=Owner.ROLLOUT, state__in=ACTIVE_DRAIN_STATES).exists()
