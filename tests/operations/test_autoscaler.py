"""The autoscaler: the HPA formula with tolerance, stabilisation, step and cooldown,
and the decisions it records."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.operations import retention, scaling
from apps.operations.autoscaler import Params, decide
from apps.operations.choices import DecisionAction, WindowActor
from apps.operations.models import AutoscalerPolicy, ChangeWindow, Freeze, ScaleRequest

from .conftest import state_of

P = Params(target_per_node=10, tolerance=0.1, up_window_s=0, down_window_s=300, max_step=4, cooldown_s=60,
           min_nodes=2, max_nodes=20)


def test_it_applies_the_hpa_formula() -> None:
    d = decide(P, current=4, queue_depth=60, now=0)
    assert (d.raw, d.desired) == (6, 6)  # ceil(4 x 15/10)
    assert "ceil(4 x 1.500) = 6" in d.explanation()


def test_it_holds_within_the_tolerance() -> None:
    assert decide(P, current=10, queue_depth=108, now=0).desired == 10
    assert decide(P, current=10, queue_depth=112, now=0).desired == 12


def test_it_scales_down_only_to_the_highest_recommendation_of_the_window() -> None:
    history = [(-200.0, 8), (-100.0, 7)]
    d = decide(P, current=8, queue_depth=20, now=0, history=history)
    assert d.recommendation == 5 and d.desired == 8
    assert "highest recommendation of the last 300s is 8" in d.explanation()
    d = decide(P, current=8, queue_depth=20, now=0, history=[(-400.0, 8), (-100.0, 7)])
    assert d.desired == 7


def test_it_leaves_headroom_when_scaling_down() -> None:
    # The bare formula says ceil(8 x 0.25) = 2; queueing is convex, so at 2 nodes the queue would be
    # far above the target and the next run would scale up again. Headroom keeps 5.
    d = decide(P, current=8, queue_depth=20, now=0)
    assert d.raw == 2 and d.recommendation == 5
    assert "scale-down headroom" in d.explanation()
    bare = Params(target_per_node=10, min_nodes=2, max_nodes=20, down_headroom=False, down_window_s=0,
                  scale_down_percent=100, max_step=100)
    assert decide(bare, current=8, queue_depth=20, now=0).desired == 2
    # Steps: at most 25% of the count down, at most max(4, 100%) up.
    assert decide(Params(target_per_node=10, down_window_s=0, down_headroom=False), current=20, queue_depth=10,
                  now=0).desired == 16


def test_it_limits_the_step_and_waits_out_the_cooldown() -> None:
    assert decide(P, current=4, queue_depth=400, now=0).desired == 8
    d = decide(P, current=8, queue_depth=20, now=0, last_scale_at=-30)
    assert d.desired == 8 and "cooldown: no scale-down for another 30s" in d.explanation()
    # cooldown never delays a scale-up
    assert decide(P, current=4, queue_depth=60, now=0, last_scale_at=-1).desired == 6


def test_it_keeps_within_bounds() -> None:
    assert decide(P, current=3, queue_depth=0, now=0).recommendation == 2
    assert decide(P, current=19, queue_depth=1000, now=0).desired == 20
    assert decide(P, current=0, queue_depth=35, now=0).desired == 4


@pytest.mark.django_db
def test_it_scales_a_tier_and_records_why(fleet, viewer_api):  # type: ignore[no-untyped-def]
    for i in range(2):
        fleet.node(f"n-{i}")
    for i in range(3):
        fleet.node(f"s-{i}", state=NodeState.STANDBY, rack=1)
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10, max_step=2)
    fleet.queue(45)
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None
    assert decision.action == DecisionAction.SCALE_UP and decision.raw_desired == 5 and decision.desired == 4
    assert decision.scale_request is not None and len(decision.scale_request.activated) == 2
    assert sum(state_of(n) == NodeState.ACTIVE for n in fleet.nodes.values()) == 4

    body = viewer_api.get("/api/v1/autoscaler-decisions/").json()
    assert body["results"][0]["explanation"].startswith("queue depth 45 over 2 nodes = 22.50 per node")
    assert body["results"][0]["inputs"]["queue_depth"] == 45


@pytest.mark.django_db
def test_it_only_records_in_dry_run(fleet):  # type: ignore[no-untyped-def]
    fleet.node("n-0")
    fleet.node("s-0", state=NodeState.STANDBY)
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10, dry_run=True)
    fleet.queue(20)
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None and decision.action == DecisionAction.DRY_RUN and decision.desired == 2
    assert not ScaleRequest.objects.exists()
    assert state_of(fleet.nodes["s-0"]) == NodeState.STANDBY


@pytest.mark.django_db
def test_it_does_nothing_without_a_fresh_queue_depth(fleet):  # type: ignore[no-untyped-def]
    fleet.node("n-0")
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10)
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None and decision.action == DecisionAction.SKIPPED
    assert "no queue depth from the gateway" in decision.explanation


@pytest.mark.django_db
def test_it_lets_operators_manage_policies(fleet, operator_api, viewer_api):  # type: ignore[no-untyped-def]
    body = {"tier": fleet.tier.pk, "target_queue_per_node": 8, "min_nodes": 2, "max_nodes": 6}
    assert viewer_api.post("/api/v1/autoscaler-policies/", body, format="json").status_code == 403
    r = operator_api.post("/api/v1/autoscaler-policies/", body, format="json")
    assert r.status_code == 201, r.json()
    assert r.json()["tolerance"] == 0.1 and r.json()["scale_down_window_s"] == 300
    pk = r.json()["id"]
    r = operator_api.patch(f"/api/v1/autoscaler-policies/{pk}/", {"max_nodes": 99}, format="json")
    assert r.status_code == 400 and "above the tier's maximum of 8" in r.json()["detail"]
    r = operator_api.patch(f"/api/v1/autoscaler-policies/{pk}/", {"enabled": False, "reason": "peak over"},
                           format="json")
    assert r.status_code == 200 and r.json()["enabled"] is False and "reason" not in r.json()
    event = AuditEvent.objects.filter(action="autoscaler_policy.update", target_id=str(pk)).latest("id")
    assert event.reason == "peak over" and event.changes["enabled"] == [True, False]


@pytest.mark.django_db
def test_it_forgets_decisions_after_a_week_unless_they_scaled(fleet):  # type: ignore[no-untyped-def]
    import datetime as dt

    from django.utils import timezone

    from apps.operations.models import AutoscalerDecision

    fleet.node("n-0")
    fleet.node("s-0", state=NodeState.STANDBY)
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10, cooldown_s=0)
    fleet.queue(20)
    scaled = scaling.autoscaler_run(tier=fleet.tier)
    kept = scaling.autoscaler_run(tier=fleet.tier)
    assert scaled is not None and scaled.scale_request is not None
    assert kept is not None and kept.action == DecisionAction.NONE
    later = timezone.now() + dt.timedelta(days=8)
    assert retention.operations_retention(now=later)["autoscaler_decisions"] == 1
    assert list(AutoscalerDecision.objects.values_list("pk", flat=True)) == [scaled.pk]


@pytest.mark.django_db
def test_a_quiet_tier_gets_a_row_when_its_decision_changes_not_every_evaluation(fleet):  # type: ignore[no-untyped-def]
    import datetime as dt

    from django.utils import timezone

    from apps.operations.models import AutoscalerDecision

    for i in range(4):
        fleet.node(f"n-{i}")
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10, dry_run=True)
    start = timezone.now()
    fleet.queue(40)  # 10 per node on 4 nodes: nothing to do
    first = scaling.autoscaler_run(tier=fleet.tier, now=start)
    rows = [scaling.autoscaler_run(tier=fleet.tier, now=start + dt.timedelta(seconds=10 * i)) for i in range(1, 6)]
    assert first is not None and first.action == DecisionAction.NONE
    assert {r.pk for r in rows if r} == {first.pk} and AutoscalerDecision.objects.count() == 1
    first.refresh_from_db()
    assert first.evaluations == 6 and first.until == start + dt.timedelta(seconds=50)
    assert first.time == start and first.inputs["queue_depth"] == 40

    fleet.queue(80)  # the decision changes: a row of its own
    changed = scaling.autoscaler_run(tier=fleet.tier, now=start + dt.timedelta(seconds=60))
    assert changed is not None and changed.pk != first.pk and changed.action == DecisionAction.DRY_RUN
    assert AutoscalerDecision.objects.count() == 2


@pytest.mark.django_db
def test_a_decision_extended_over_the_window_still_holds_a_scale_down_back(fleet):  # type: ignore[no-untyped-def]
    """The stabilisation window reads a run of evaluations by its latest one: a high recommendation
    repeated until a moment ago still keeps the tier from scaling down to a lower one."""
    import datetime as dt

    from django.utils import timezone

    for i in range(4):
        fleet.node(f"n-{i}")
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10, dry_run=True, cooldown_s=0,
                                    scale_down_window_s=300)
    start = timezone.now() - dt.timedelta(seconds=400)
    fleet.queue(40)
    for i in range(0, 350, 10):  # 4 recommended from 400 s ago until 50 s ago: one row
        scaling.autoscaler_run(tier=fleet.tier, now=start + dt.timedelta(seconds=i))
    fleet.queue(10)  # now 1 node would do
    decision = scaling.autoscaler_run(tier=fleet.tier, now=start + dt.timedelta(seconds=400))
    assert decision is not None and decision.recommendation is not None and decision.recommendation < 4
    assert decision.desired == 4, decision.explanation  # the window still holds 4


@pytest.mark.django_db
def test_a_scale_down_waits_for_its_window_and_the_decision_names_it(fleet):  # type: ignore[no-untyped-def]
    for i in range(4):
        fleet.node(f"n-{i}")
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10, scale_down_window_s=0,
                                    scale_down_headroom=False, cooldown_s=0)
    later = timezone.now() + dt.timedelta(hours=3)
    window = ChangeWindow.objects.create(name="quiet hours", cron=f"{later.minute} {later.hour} * * *",
                                         duration_minutes=60, time_zone="UTC", actors=[WindowActor.SCALE_DOWN])
    fleet.queue(10)  # 2.5 per node against 10: scale down
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None and decision.action == DecisionAction.SKIPPED and decision.desired == 4
    assert "not applied: scale-down outside change window 'quiet hours'" in decision.explanation
    assert decision.window.startswith("outside change window 'quiet hours'")
    assert not ScaleRequest.objects.exists()

    ChangeWindow.objects.filter(pk=window.pk).update(cron="* * * * *")
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None and decision.action == DecisionAction.SCALE_DOWN
    assert decision.window.startswith("inside change window 'quiet hours'")


@pytest.mark.django_db
def test_a_freeze_holds_scale_down_but_not_scale_up(fleet):  # type: ignore[no-untyped-def]
    fleet.node("n-0")
    fleet.node("n-1")
    fleet.node("s-0", state=NodeState.STANDBY)
    AutoscalerPolicy.objects.create(tier=fleet.tier, target_queue_per_node=10, scale_down_window_s=0, cooldown_s=0)
    now = timezone.now()
    Freeze.objects.create(reason="launch day", starts_at=now - dt.timedelta(minutes=1),
                          ends_at=now + dt.timedelta(hours=1))
    fleet.queue(30)
    up = scaling.autoscaler_run(tier=fleet.tier)
    assert up is not None and up.action == DecisionAction.SCALE_UP and "launch day" in up.window
