"""The capacity guard, one rule for every actor, on the demo fleet at its busy hour:
the simulator's engine plays the demo fleet at 15:00 (tests/fleet_play.py) and its samples
go through the real ingest; draining the hybrid tier is refused, with the numbers, once it would
fall below what its traffic needs; an operator may override with a reason (audited);
the autoscaler's scale-down gets the same refusal."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.inventory.choices import TierKind
from apps.inventory.models import Node, Tier
from apps.operations import capacity, scaling, selectors
from apps.operations.choices import DecisionAction
from apps.operations.models import AutoscalerPolicy
from apps.simulator.demo import seed_demo
from tests.fleet_play import play_demo_hour

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy(db: Any) -> Tier:
    seed_demo()
    play_demo_hour(15.0)
    return Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)


def test_it_refuses_a_drain_below_the_hybrid_tiers_need_and_takes_an_operators_override(
        busy: Tier, operator_api: Any) -> None:
    load, need = selectors.tier_need(tier=busy)
    floor = need.floor(busy.min_active_nodes)
    assert load.active_nodes == 33 and need.binding == "utilisation"
    assert busy.min_active_nodes < floor < load.active_nodes, (floor, need.explanation)
    print(f"busy hour: {need.explanation}; floor {floor}")

    hosts = list(Node.objects.filter(tier=busy, state="active").order_by("hostname"))
    for node in hosts:
        r = operator_api.post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": "firmware"}, format="json")
        if r.status_code == 409:
            break
        assert r.status_code == 202, r.json()
        # Each accepted drain left the tier at or above its floor (the numbers are in its audit record).
        numbers = AuditEvent.objects.get(action="node.drain", target_id=str(node.pk)).changes["capacity"]
        assert numbers["active"] - 1 >= numbers["floor"] > busy.min_active_nodes
    else:
        pytest.fail("every drain was accepted")
    # Refused exactly when the next drain would go below the floor, with the numbers.
    load, need = selectors.tier_need(tier=busy)
    floor = need.floor(busy.min_active_nodes)
    # (The floor counts nodes at the serving nodes' mean modules per node, so each drain may move it by
    # one: the last accepted drain may leave the tier one under the floor the next one is judged by.)
    assert load.active_nodes - 1 < floor <= load.active_nodes + 1 and load.active_nodes < len(hosts)
    body = r.json()
    assert body["capacity"] == {
        "tier": "Hybrid inference", "unit": "node", "have": load.active_nodes, "after": load.active_nodes - 1,
        "floor": floor, "need": need.nodes, "need_modules": need.modules, "binding": "utilisation",
        "min_active_nodes": busy.min_active_nodes}
    assert (f"would fall to {load.active_nodes - 1} serving nodes (from {load.active_nodes}), below its floor "
            f"of {floor}") in body["detail"]
    assert "utilisation: work of" in body["detail"] and "override=true and a reason" in body["detail"]
    node.refresh_from_db()
    assert node.state == "active"

    r = operator_api.post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": " ", "override": True}, format="json")
    assert r.status_code == 400 and "reason" in r.json()["errors"]
    r = operator_api.post(f"/api/v1/nodes/{node.pk}/drain/",
                          {"reason": "PSU smells of smoke: pull it now", "override": True}, format="json")
    assert r.status_code in (200, 202), r.json()
    event = AuditEvent.objects.filter(action="node.drain", target_id=str(node.pk)).get()
    assert event.reason == "PSU smells of smoke: pull it now" and event.actor_name == "test-operator"
    assert event.changes["capacity"]["below_floor"] == "operator override"
    assert event.changes["capacity"]["after"] == load.active_nodes - 1


def test_it_refuses_the_autoscalers_scale_down_below_the_need(busy: Tier, settings: Any) -> None:
    # The remediation budget's limits raised out of the way (it would grant a tenth of the tier): the
    # scale-down asks for all it wants and the guard decides.
    settings.HEALTH_MAX_UNAVAILABLE = settings.HEALTH_FLEET_MAX_UNAVAILABLE = 1.0
    settings.HEALTH_ACTIONS_PER_HOUR = 10.0
    load, need = selectors.tier_need(tier=busy)
    floor = need.floor(busy.min_active_nodes)
    # A policy that wants the tier small: a high queue target per node.
    AutoscalerPolicy.objects.update_or_create(tier=busy, defaults={
        "enabled": True, "dry_run": False, "target_queue_per_node": 50.0, "scale_down_window_s": 0,
        "scale_down_percent": 100, "max_step": 40, "cooldown_s": 0})
    decision = scaling.autoscaler_run(tier=busy)
    assert decision is not None and decision.action == DecisionAction.SKIPPED
    assert decision.recommendation is not None and decision.recommendation < floor
    assert "not applied: refused: Hybrid inference would fall to" in decision.explanation
    assert f"below its floor of {floor}" in decision.explanation
    assert Node.objects.filter(tier=busy, state="active").count() == load.active_nodes


def test_it_lets_the_tier_go_down_at_the_quiet_hour(db: Any) -> None:
    load = capacity.TierLoad(kind="hybrid_inference", name="Hybrid inference", min_active_nodes=10,
                             active_nodes=33, serving_modules=80, module_tops=37.0, requests_per_s=12.0,
                             completions_per_s=12.0, output_tokens_per_s=1200.0, busy_modules=1.6)
    need = capacity.tier_need(load)
    assert need.nodes == 2 and need.floor(10) == 10
    assert capacity.removal_check(load, need, nodes=23) is None
    refusal = capacity.removal_check(load, need, nodes=24)
    assert refusal is not None and refusal.floor == 10 and refusal.after == 9
