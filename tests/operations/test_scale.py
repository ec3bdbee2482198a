"""Tier scaling: healthy, pinned standby nodes spread over racks within power budgets;
scale-down drains first and never releases a node with work in flight."""

from __future__ import annotations

import pytest

from apps.common.errors import Conflict
from apps.inventory.choices import NodeState
from apps.inventory.models import Module, Tier
from apps.operations import controllers, lifecycle, scaling
from apps.operations.choices import DrainState, ScaleState
from apps.operations.models import Drain, ScaleRequest

from .conftest import state_of

pytestmark = pytest.mark.django_db


def test_it_activates_healthy_pinned_standby_nodes_across_racks(fleet, operator_api):  # type: ignore[no-untyped-def]
    fleet.node("a-1", rack=0)
    fleet.node("a-2", rack=0)
    fleet.node("s-1", rack=0, state=NodeState.STANDBY)
    fleet.node("s-2", rack=0, state=NodeState.STANDBY)
    fleet.node("s-3", rack=1, state=NodeState.STANDBY)
    fleet.node("s-4", rack=1, state=NodeState.STANDBY, ecc_memory=False)
    drifted = fleet.node("s-5", rack=1, state=NodeState.STANDBY)
    Module.objects.filter(node=drifted).update(driver_version="2.2.9")

    r = operator_api.post(f"/api/v1/tiers/{fleet.tier.pk}/scale/", {"desired": 6, "reason": "campaign"},
                          format="json")
    assert r.status_code == 202, r.json()
    sr = r.json()["scale_request"]
    # rack-2 has no active node: it gets the first pick; then rack-1.
    assert sr["activated"] == ["s-3", "s-1", "s-2"]
    assert "only 3 of 4 standby nodes could be activated" in sr["note"]
    assert "s-4: no ECC memory" in sr["note"] and "s-5: a module is off its pinned" in sr["note"]
    assert state_of(fleet.nodes["s-3"]) == NodeState.ACTIVE


def test_it_respects_the_rack_power_budget(fleet):  # type: ignore[no-untyped-def]
    # Each node draws 65 W + 2 x 10 W = 85 W; rack-1 budget 1000 W allows 11 serving nodes.
    fleet.racks[0].power_budget_w = 200
    fleet.racks[0].save()
    fleet.racks[1].power_budget_w = 90
    fleet.racks[1].save()
    fleet.node("a-1", rack=0)
    fleet.node("s-1", rack=0, state=NodeState.STANDBY)
    fleet.node("s-2", rack=0, state=NodeState.STANDBY)
    fleet.node("s-3", rack=1, state=NodeState.STANDBY)
    sr = scaling.tier_scale(tier=fleet.tier, desired=4, actor="alice").obj
    assert sorted(sr.activated) == ["s-1", "s-3"]
    assert "s-2: rack rack-1 would draw 255 W of its 200 W budget" in sr.note


def test_it_never_releases_a_node_with_work_in_flight(fleet):  # type: ignore[no-untyped-def]
    busy, idle, other = fleet.node("n-1"), fleet.node("n-2"), fleet.node("n-3")
    fleet.report(busy, in_flight=9)
    fleet.report(idle, in_flight=1)
    fleet.report(other, in_flight=5)
    sr = scaling.tier_scale(tier=fleet.tier, desired=2, actor="alice", reason="night").obj
    drain = Drain.objects.get(scale_request=sr)
    assert drain.node == idle  # the least busy node is picked
    assert state_of(idle) == NodeState.DRAINING

    fleet.report(idle, in_flight=1)
    controllers.drains_advance()
    assert state_of(idle) == NodeState.DRAINING
    sr.refresh_from_db()
    assert sr.state == ScaleState.RUNNING

    fleet.report(idle, in_flight=0)
    controllers.drains_advance()
    assert state_of(idle) == NodeState.STANDBY
    drain.refresh_from_db()
    assert drain.state == DrainState.RELEASED
    controllers.drains_advance()
    sr.refresh_from_db()
    assert sr.state == ScaleState.COMPLETED
    assert [state_of(n) for n in (busy, other)] == [NodeState.ACTIVE, NodeState.ACTIVE]


def test_it_keeps_within_the_tiers_bounds_and_refuses_a_conflicting_scale(fleet, operator_api):  # type: ignore[no-untyped-def]
    Tier.objects.filter(pk=fleet.tier.pk).update(min_active_nodes=1)
    for i in range(3):
        fleet.node(f"n-{i}")
    url = f"/api/v1/tiers/{fleet.tier.pk}/scale/"
    r = operator_api.post(url, {"desired": 9}, format="json")
    assert r.status_code == 400 and "maximum 8" in r.json()["detail"]
    assert operator_api.post(url, {"desired": 0}, format="json").status_code == 400
    assert operator_api.post(url, {"desired": 2}, format="json").status_code == 202
    again = operator_api.post(url, {"desired": 2}, format="json")
    assert again.status_code == 200 and again.json()["changed"] is False
    r = operator_api.post(url, {"desired": 1}, format="json")
    assert r.status_code == 409 and "already scaling to 2" in r.json()["detail"]
    assert ScaleRequest.objects.count() == 1


def test_it_takes_back_a_draining_node_when_scaling_up_again(fleet):  # type: ignore[no-untyped-def]
    for i in range(3):
        fleet.node(f"n-{i}")
    fleet.node("s-1", state=NodeState.STANDBY)
    scaling.tier_scale(tier=fleet.tier, desired=2, actor="autoscaler")
    draining = Drain.objects.get(state=DrainState.DRAINING).node
    sr = scaling.tier_scale(tier=fleet.tier, desired=3, actor="autoscaler", supersede=True).obj
    assert sr.reclaimed == [draining.hostname] and sr.activated == []
    assert state_of(draining) == NodeState.ACTIVE
    assert state_of(fleet.nodes["s-1"]) == NodeState.STANDBY


def test_it_will_not_uncordon_a_node_the_autoscaler_is_releasing(fleet):  # type: ignore[no-untyped-def]
    for i in range(2):
        fleet.node(f"n-{i}")
    scaling.tier_scale(tier=fleet.tier, desired=1, actor="autoscaler", owner="autoscaler")
    node = Drain.objects.get().node
    with pytest.raises(Conflict):
        lifecycle.node_uncordon(node=node, owner="health", reason="x", actor="health")
