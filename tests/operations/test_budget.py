"""The remediation budget: health's holds, the autoscaler's scale-down drains and vector runs on serving
nodes count in one budget per tier and fleet-wide; the (N+1)th automated hold is held back, recorded,
and health's ``budget_held_back`` finding names it with the numbers until nothing is held back."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.health.choices import FindingState, Severity
from apps.health.evidence import evidence_rows
from apps.health.models import Finding
from apps.health.sweep import sweep
from apps.inventory.choices import NodeState, TierKind
from apps.inventory.models import Tier
from apps.operations import budget, lifecycle, scaling
from apps.operations.choices import DecisionAction, Owner, WindowActor
from apps.operations.models import AutoscalerPolicy, BudgetHeldBack, Drain
from tests.operations.conftest import Fleet, state_of

pytestmark = pytest.mark.django_db

HEALTH, SCALE_DOWN, VECTORS = (WindowActor.HEALTH_ACTIONS.value, WindowActor.SCALE_DOWN.value,
                               WindowActor.VECTOR_RUNS.value)


def _tier(fleet: Fleet, nodes: int) -> None:
    Tier.objects.filter(pk=fleet.tier.pk).update(max_active_nodes=20)
    fleet.tier.refresh_from_db()
    for i in range(nodes):
        fleet.node(f"n-{i:02d}", rack=i % 2)


def _policy(fleet: Fleet, **over: Any) -> AutoscalerPolicy:
    fields = {"target_queue_per_node": 10, "scale_down_window_s": 0, "scale_down_headroom": False, "cooldown_s": 0,
              "max_step": 1, **over}
    return AutoscalerPolicy.objects.create(tier=fleet.tier, **fields)


def _health_cordon(fleet: Fleet, host: str) -> Drain:
    lifecycle.node_cordon(node=fleet.nodes[host], owner=Owner.HEALTH, reason="health finding #0 (test)",
                          actor="health")
    return Drain.objects.get(node=fleet.nodes[host], released_at__isnull=True)


def _usage(serving: dict[int, tuple[int, int]], held: dict[str, dict[int, dict[str, int]]] | None = None,
           started: dict[int, dict[str, int]] | None = None) -> budget.Usage:
    u = budget.Usage(serving={t: {"nodes": n, "modules": m} for t, (n, m) in serving.items()})
    for kind, tiers in (held or {}).items():
        for tier_id, counts in tiers.items():
            u.held[kind][tier_id] = Counter(counts)
    u.started = defaultdict(Counter, {t: Counter(c) for t, c in (started or {}).items()})
    return u


# ---- the verdict, pure --------------------------------------------------------------------------


def test_the_verdict_counts_every_automated_actor_against_the_tier_share() -> None:
    lim = budget.Limits()
    u = _usage({1: (20, 80)}, held={"nodes": {1: {HEALTH: 1, SCALE_DOWN: 1}}})
    v = budget.judge(u, actor=VECTORS, tier_id=1, tier_name="T", kind="nodes", asked=1, lim=lim)
    assert not v.allowed and v.granted == 0 and v.limit == "max_unavailable"
    assert v.why == ("max_unavailable: automation already holds 2 of 20 serving nodes of T "
                     "(health actions 1, autoscaler scale-down 1; at most 2)")
    assert v.numbers["held_by"] == {HEALTH: 1, SCALE_DOWN: 1} and v.numbers["max_unavailable"] == 2
    # modules are their own count: 8 of 80 may be held
    v = budget.judge(u, actor=VECTORS, tier_id=1, tier_name="T", kind="modules", asked=3, lim=lim)
    assert v.allowed and v.granted == 3 and v.why.startswith("within the budget")


def test_the_rate_limit_counts_what_every_actor_started_in_the_hour_and_grants_part() -> None:
    lim = budget.Limits()
    u = _usage({1: (40, 160)}, started={1: {HEALTH: 1, VECTORS: 1}})
    v = budget.judge(u, actor=SCALE_DOWN, tier_id=1, tier_name="T", kind="nodes", asked=3, lim=lim)
    # max(3, 10 % of 40) = 4 per hour, 2 started: 2 of the 3 asked
    assert v.granted == 2 and v.held_back == 1 and v.limit == "rate"
    assert v.why == ("rate limit: 2 automated holds started on T in the last hour (health actions 1, "
                     "vector runs on serving nodes 1; at most 4): 2 of 3 granted")


def test_the_fleet_wide_cap_applies_across_tiers() -> None:
    lim = budget.Limits(fleet_max_unavailable=0.10)
    # two tiers of 10 nodes: each may hold 1, the fleet of 20 only 2
    u = _usage({1: (10, 0), 2: (10, 0), 3: (0, 0)}, held={"nodes": {1: {HEALTH: 1}, 3: {SCALE_DOWN: 1}}})
    v = budget.judge(u, actor=SCALE_DOWN, tier_id=2, tier_name="B", kind="nodes", asked=1, lim=lim)
    assert not v.allowed and v.limit == "fleet"
    assert v.why == ("fleet-wide cap: automation already holds 2 of the fleet's 20 serving nodes "
                     "(health actions 1, autoscaler scale-down 1; at most 2)")
    loose = budget.judge(u, actor=SCALE_DOWN, tier_id=2, tier_name="B", kind="nodes", asked=1,
                         lim=budget.Limits(fleet_max_unavailable=0.5))
    assert loose.allowed


def test_the_limits_are_set_with_healths(settings: Any) -> None:
    settings.HEALTH_FLEET_MAX_UNAVAILABLE = 0.25
    settings.HEALTH_MAX_UNAVAILABLE = 0.2
    assert budget.limits() == budget.Limits(max_unavailable=0.2, actions_per_hour=0.1, fleet_max_unavailable=0.25)


# ---- the autoscaler after health: held back, recorded, a finding, resolved -----------------------------


def test_the_autoscalers_scale_down_after_health_holds_n_is_held_back_with_a_finding(fleet: Fleet) -> None:
    _tier(fleet, 10)
    _health_cordon(fleet, "n-00")  # health holds 1: 10 % of 10 serving nodes, all the tier allows
    _policy(fleet)
    fleet.queue(10)
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None and decision.action == DecisionAction.SKIPPED and decision.desired == 9
    assert decision.explanation.endswith(
        "not applied: remediation budget: max_unavailable: automation already holds 1 of 10 serving nodes of "
        "Hybrid inference (health actions 1; at most 1)")
    assert decision.inputs["budget"]["held_back"] == 1 and not Drain.objects.filter(owner=Owner.AUTOSCALER).exists()
    row = BudgetHeldBack.objects.get()
    assert (row.actor, row.limit, row.asked, row.granted, row.wanted) == (SCALE_DOWN, "max_unavailable", 1, 0,
                                                                          "scale down 9 -> 8")
    assert AuditEvent.objects.filter(action="budget.held_back", target_id=str(fleet.tier.pk)).count() == 1

    sweep()
    [f] = Finding.objects.filter(check_name="budget_held_back")
    assert f.state == FindingState.OPEN and f.severity == Severity.WARNING and f.tier_id == fleet.tier.pk
    assert f.summary.startswith("Autoscaler scale-down held back on Hybrid inference: scale down 9 -> 8: "
                                "max_unavailable: automation already holds 1 of 10")
    ev = f.evidence
    assert (ev["actor"], ev["limit"], ev["held"], ev["serving"], ev["max_unavailable"], ev["asked"],
            ev["granted"]) == ("Autoscaler scale-down", "max_unavailable", 1, 10, 1, 1, 0)
    assert ev["held_by"] == {HEALTH: 1} and ev["fleet_max_unavailable"] == 1
    rows = {r["key"]: r for r in evidence_rows(f.check_name, ev)}
    assert rows["held"]["label"] == "Held by automation on the tier" and rows["held"]["text"] == "1"
    assert rows["max_unavailable"]["label"] == "At most at once (tier)"

    # the autoscaler asks again on its next evaluation: still held back, the same record renewed
    scaling.autoscaler_run(tier=fleet.tier)
    assert BudgetHeldBack.objects.get().times == 2
    assert AuditEvent.objects.filter(action="budget.held_back").count() == 1

    # health releases its node: the next scale-down is granted, the record cleared, the finding resolved
    lifecycle.node_uncordon(node=fleet.nodes["n-00"], owner=Owner.HEALTH, reason="resolved", actor="health")
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None and decision.action == DecisionAction.SCALE_DOWN and decision.desired == 9
    assert not BudgetHeldBack.objects.exists()
    assert AuditEvent.objects.filter(action="budget.resumed", target_id=str(fleet.tier.pk)).count() == 1
    sweep()
    f.refresh_from_db()
    assert f.state == FindingState.RESOLVED


def test_a_scale_down_takes_only_what_the_budget_grants(fleet: Fleet) -> None:
    _tier(fleet, 10)
    _policy(fleet, max_step=4)
    fleet.queue(10)  # 1 per node: scale 10 -> 8 (25 % of 10 per step)
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None and decision.action == DecisionAction.SCALE_DOWN and decision.desired == 9
    assert "remediation budget: max_unavailable: automation already holds 0 of 10 serving nodes" in \
           decision.explanation and decision.explanation.endswith("1 of 2 granted: scale down 10 -> 9 only")
    assert Drain.objects.filter(owner=Owner.AUTOSCALER).count() == 1
    row = BudgetHeldBack.objects.get(actor=SCALE_DOWN)
    assert (row.asked, row.granted, row.wanted) == (2, 1, "scale down 10 -> 8")


def test_health_is_held_back_by_the_autoscalers_drains_in_the_same_budget(fleet: Fleet) -> None:
    """The reverse mix, through the verdict health asks: its (N+1)th hold after the autoscaler's N."""
    _tier(fleet, 10)
    lifecycle.node_drain(node=fleet.nodes["n-03"], owner=Owner.AUTOSCALER, reason="scale-down", actor="autoscaler")
    with transaction.atomic():
        v = budget.ask(actor=HEALTH, tier=fleet.tier, kind="nodes", asked=1, now=timezone.now())
    assert not v.allowed and "(autoscaler scale-down 1; at most 1)" in v.why


def test_the_fleet_wide_cap_holds_a_scale_down_back_on_another_tier(fleet: Fleet) -> None:
    _tier(fleet, 5)
    other, _ = Tier.objects.get_or_create(kind=TierKind.ACCESS_LOGIC, defaults={"name": "Access & logic",
                                                                                "level": 1})
    for i in range(5):
        fleet.node(f"a-{i:02d}", tier=other, rack=1)
    _health_cordon(fleet, "a-00")  # 1 of the fleet's 10 serving nodes: all the fleet allows (10 %)
    _policy(fleet)
    fleet.queue(5)
    decision = scaling.autoscaler_run(tier=fleet.tier)
    assert decision is not None
    assert decision.action == DecisionAction.SKIPPED, decision.explanation
    assert decision.explanation.endswith(
        "not applied: remediation budget: fleet-wide cap: automation already holds 1 of the fleet's 10 serving "
        "nodes (health actions 1; at most 1)")
    assert BudgetHeldBack.objects.get().limit == "fleet"
    assert all(state_of(fleet.nodes[f"n-{i:02d}"]) == NodeState.ACTIVE for i in range(5))
    sweep()
    [f] = Finding.objects.filter(check_name="budget_held_back", state=FindingState.OPEN)
    assert f.tier_id == fleet.tier.pk and f.evidence["fleet_held"] == 1 and f.evidence["fleet_serving"] == 10
    assert f.evidence["fleet_held_by"] == {HEALTH: 1}


def test_a_record_no_longer_renewed_stops_standing(fleet: Fleet) -> None:
    _tier(fleet, 10)
    _health_cordon(fleet, "n-00")
    now = timezone.now()
    with transaction.atomic():
        v = budget.ask(actor=VECTORS, tier=fleet.tier, kind="nodes", asked=1, now=now)
        budget.held_back_record(verdict=v, tier=fleet.tier, wanted="a test hold", now=now)
    assert [r.actor for r in budget.held_back_standing(now=now)] == [VECTORS]
    later = now + dt.timedelta(seconds=budget.held_back_stale_s() + 1)
    assert budget.held_back_standing(now=later) == []


@pytest.mark.django_db(transaction=True)
def test_two_actors_asking_at_once_are_judged_one_after_the_other() -> None:
    """Health and the autoscaler ask for the tier's last node at the same moment: the second ask waits for
    the first's hold to be taken (the budget's lock) and is refused with it counted."""
    fleet = Fleet()
    _tier(fleet, 10)
    first_asked, first_go = threading.Event(), threading.Event()
    verdicts: dict[str, budget.Verdict] = {}
    errors: list[BaseException] = []

    def health() -> None:
        try:
            with transaction.atomic():
                verdicts["health"] = budget.ask(actor=HEALTH, tier=fleet.tier, kind="nodes", asked=1,
                                                now=timezone.now())
                first_asked.set()
                assert first_go.wait(30)
                if verdicts["health"].allowed:
                    lifecycle.node_cordon(node=fleet.nodes["n-01"], owner=Owner.HEALTH, reason="finding",
                                          actor="health")
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
            first_asked.set()
        finally:
            connection.close()

    def autoscaler() -> None:
        try:
            with transaction.atomic():
                verdicts["autoscaler"] = budget.ask(actor=SCALE_DOWN, tier=fleet.tier, kind="nodes", asked=1,
                                                    now=timezone.now())
                if verdicts["autoscaler"].allowed:
                    lifecycle.node_drain(node=fleet.nodes["n-02"], owner=Owner.AUTOSCALER, reason="scale-down",
                                         actor="autoscaler")
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
        finally:
            connection.close()

    a = threading.Thread(target=health)
    a.start()
    assert first_asked.wait(30)
    b = threading.Thread(target=autoscaler)
    b.start()
    # wait until the autoscaler's ask is blocked on the budget's lock, then let health take its hold
    deadline = time.monotonic() + 30
    while True:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            if cur.fetchone()[0] == 1:
                break
        assert time.monotonic() < deadline, "the second ask never waited for the lock"
        time.sleep(0.05)
    first_go.set()
    a.join(30)
    b.join(30)
    assert not errors, errors
    assert verdicts["health"].allowed and not verdicts["autoscaler"].allowed
    assert verdicts["autoscaler"].why == ("max_unavailable: automation already holds 1 of 10 serving nodes of "
                                          "Hybrid inference (health actions 1; at most 1)")
    assert Drain.objects.filter(released_at__isnull=True).count() == 1
