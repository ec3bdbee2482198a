"""Acting on findings within the safety limits: through the lifecycle with owner health,
never over an operator's hold, max_unavailable, the circuit breaker naming the latest change,
release after the cool-down."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.health.choices import FindingState
from apps.health.models import Finding
from apps.health.services import check_update
from apps.inventory.choices import ModuleState, NodeState
from apps.operations import lifecycle
from apps.operations.models import Drain, Quarantine
from tests.health.conftest import HealthFleet, findings, sweeps


def _fleet(hfleet: HealthFleet, nodes: int) -> None:
    for i in range(nodes):
        hfleet.node(f"n-{i:02d}")
    hfleet.all_report(at=timezone.now() - dt.timedelta(minutes=2))
    hfleet.rollup()


def test_it_quarantines_an_ecc_uncorrected_module_and_leaves_an_operators_drain_alone(hfleet: HealthFleet) -> None:
    _fleet(hfleet, 10)
    check_update(name="ecc", policy="act", actor="admin")
    held = hfleet.nodes["n-03"]
    lifecycle.node_drain(node=held, reason="replacing a fan", actor="alice")
    bad = {"n-01-m0": {"ecc_uncorrected": 2}, "n-03-m1": {"ecc_uncorrected": 1}}
    hfleet.all_report(modules=bad)
    sweeps(3)
    q = Quarantine.objects.get(module__serial="n-01-m0", released_at__isnull=True)
    assert q.owner == "health" and "ecc" in q.reason
    f = Finding.objects.get(check_name="ecc", module__serial="n-01-m0")
    assert f.action["result"] == "acted" and f.holds
    assert AuditEvent.objects.filter(action="module.quarantine", actor_name="health",
                                     target_id=str(q.module_id)).exists()
    # n-03 is drained by an operator: health quarantined its module (the drain is untouched)...
    drain = Drain.objects.get(node=held, released_at__isnull=True)
    assert drain.owner == "operator" and drain.reason == "replacing a fan"


def test_it_never_acts_over_another_owners_hold_and_records_that_it_would_have(hfleet: HealthFleet) -> None:
    _fleet(hfleet, 10)
    check_update(name="link_width", policy="act", actor="admin")
    module = hfleet.nodes["n-02"].modules.get(slot=0)
    lifecycle.module_quarantine(module=module, reason="reseating it", actor="alice")
    hfleet.all_report(modules={module.serial: {"link_width": 1}})
    sweeps(3)
    f = Finding.objects.get(check_name="link_width", module=module)
    assert f.action["result"] == "would_have_acted" and f.action["holder"]["owner"] == "operator"
    assert "held by operator" in f.action["text"]
    assert Quarantine.objects.get(module=module, released_at__isnull=True).owner == "operator"
    event = AuditEvent.objects.get(action="health.would_have_acted")
    assert event.actor_name == "health" and event.changes["finding"] == f.pk


def test_it_holds_at_most_max_unavailable_of_a_tier(hfleet: HealthFleet) -> None:
    _fleet(hfleet, 10)
    check_update(name="cpu_bound", policy="act", actor="admin")
    for host in ("n-01", "n-02"):
        hfleet.sample(hfleet.nodes[host], cpu=0.98, modules={f"{host}-m0": {"util": 0.01}, f"{host}-m1": {"util": 0.0}})
    sweeps(3)
    cordoned = Drain.objects.filter(owner="health", released_at__isnull=True)
    assert cordoned.count() == 1  # 10 % of 10 serving nodes
    [acted, held_back] = sorted(findings("cpu_bound"), key=lambda f: f.action["result"])
    assert acted.action["result"] == "acted" and held_back.action["result"] == "held_back"
    assert "max_unavailable" in held_back.action["text"]


def test_the_breaker_trips_when_30_percent_of_a_tier_fail_the_same_check(hfleet: HealthFleet) -> None:
    _fleet(hfleet, 10)
    check_update(name="ecc", policy="act", actor="admin")
    bad: dict[str, dict[str, Any]] = {f"n-0{i}-m0": {"ecc_uncorrected": 1} for i in (1, 4, 7)}
    hfleet.all_report(modules=bad)
    sweeps(3)
    assert not Quarantine.objects.filter(owner="health").exists()
    [breaker] = findings("breaker")
    assert breaker.severity == "critical" and breaker.state == FindingState.OPEN
    assert breaker.evidence["failing_nodes"] == 3 and breaker.evidence["serving_nodes"] == 10
    change = breaker.evidence["recent_change"]
    assert change["action"] == "health.check_update" and "Most recent change: health.check_update" in breaker.summary
    assert {f.action["result"] for f in findings("ecc")} == {"held_back"}
    assert AuditEvent.objects.filter(action="health.breaker_tripped").count() == 1


def test_it_releases_its_own_hold_after_the_finding_resolves_and_the_cool_down(hfleet: HealthFleet,
                                                                               settings: Any) -> None:
    settings.HEALTH_COOLDOWN_S = 0
    _fleet(hfleet, 10)
    check_update(name="link_width", policy="act", actor="admin", clear_k=2)
    serial = "n-05-m1"
    hfleet.all_report(modules={serial: {"link_width": 2}})
    sweeps(3)
    assert Quarantine.objects.get(module__serial=serial, released_at__isnull=True).owner == "health"
    hfleet.all_report()
    sweeps(3)
    f = Finding.objects.get(check_name="link_width", module__serial=serial)
    assert f.state == FindingState.RESOLVED and not f.holds and "released_at" in f.action
    assert not Quarantine.objects.filter(module__serial=serial, released_at__isnull=True).exists()
    assert hfleet.nodes["n-05"].modules.get(serial=serial).state == ModuleState.HEALTHY
    assert hfleet.nodes["n-05"].state == NodeState.ACTIVE


def test_a_tripped_breaker_stays_tripped_over_quiet_sweeps_until_an_admin_resets_it(
        hfleet: HealthFleet, admin_api: Any, operator_api: Any) -> None:
    _fleet(hfleet, 10)
    check_update(name="ecc", policy="act", actor="admin")
    hfleet.all_report(modules={f"n-0{i}-m0": {"ecc_uncorrected": 1} for i in (1, 4, 7)})
    sweeps(3)
    [breaker] = findings("breaker")
    # the tier goes quiet: sweep after sweep, the breaker stays (and says since when it is quiet)
    hfleet.all_report()
    sweeps(8)
    breaker.refresh_from_db()
    assert breaker.state == FindingState.OPEN and "quiet_since" in breaker.evidence
    assert not Quarantine.objects.filter(owner="health").exists()

    url = f"/api/v1/health/findings/{breaker.pk}/reset-breaker/"
    assert operator_api.post(url, {"reason": "fixed"}, format="json").status_code == 403
    assert admin_api.post(url, {"reason": " "}, format="json").status_code == 400
    other = findings("ecc")[0]
    refused = admin_api.post(f"/api/v1/health/findings/{other.pk}/reset-breaker/", {"reason": "x"}, format="json")
    assert refused.status_code == 409 and "not a tripped circuit breaker" in refused.json()["detail"]
    done = admin_api.post(url, {"reason": "a bad ECC firmware batch, rolled back"}, format="json")
    assert done.status_code == 200 and done.json()["state"] == FindingState.RESOLVED
    again = admin_api.post(url, {"reason": "twice"}, format="json")  # a twin: nothing more happens
    assert again.status_code == 200
    [event] = AuditEvent.objects.filter(action="health.breaker_reset")
    assert event.reason == "a bad ECC firmware batch, rolled back" and event.changes["finding"] == breaker.pk
    sweeps(2)  # quiet now: nothing trips it again
    assert findings("breaker")[0].state == FindingState.RESOLVED
