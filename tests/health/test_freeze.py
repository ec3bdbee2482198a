"""A freeze holds health's actions to observe-only: the finding opens and says what health would
do and until when; a critical finding keeps its exception, acts and says so (in its note and the
hold's audit record). Outside a change window that governs health actions, the same."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.health.choices import ACTIVE_FINDING_STATES
from apps.health.models import Finding
from apps.health.services import check_update
from apps.operations.choices import WindowActor
from apps.operations.models import ChangeWindow, Freeze, Quarantine
from tests.health.conftest import HealthFleet, sweeps


def _fleet(hfleet: HealthFleet) -> None:
    for i in range(10):
        hfleet.node(f"n-{i:02d}")
    hfleet.all_report(at=timezone.now() - dt.timedelta(minutes=2))
    hfleet.rollup()


def test_a_freeze_makes_an_act_policy_observe_only_and_a_critical_finding_still_acts(hfleet: HealthFleet) -> None:
    _fleet(hfleet)
    check_update(name="link_width", policy="act", actor="admin")
    check_update(name="ecc", policy="act", actor="admin")
    now = timezone.now()
    freeze = Freeze.objects.create(reason="peak season", starts_at=now - dt.timedelta(minutes=1),
                                   ends_at=now + dt.timedelta(hours=4))
    narrow, broken = "n-02-m0", "n-05-m1"
    hfleet.all_report(modules={narrow: {"link_width": 1}, broken: {"ecc_uncorrected": 2}})
    sweeps(3)

    warned = Finding.objects.get(check_name="link_width", module__serial=narrow)
    assert warned.state in ACTIVE_FINDING_STATES  # the finding still opens
    assert warned.action["result"] == "held_back"
    assert "observe only" in warned.action["text"] and "peak season" in warned.action["text"]
    assert warned.action["until"] == freeze.ends_at.isoformat()
    assert not Quarantine.objects.filter(module__serial=narrow).exists()

    critical = Finding.objects.get(check_name="ecc", module__serial=broken)
    assert critical.action["result"] == "acted" and "critical: acts despite the freeze" in critical.action["text"]
    q = Quarantine.objects.get(module__serial=broken, released_at__isnull=True)
    assert q.owner == "health"
    record = AuditEvent.objects.get(action="module.quarantine", actor_name="health", target_id=str(q.module_id))
    assert "despite the freeze" in record.reason


def test_outside_its_window_health_only_observes(hfleet: HealthFleet) -> None:
    _fleet(hfleet)
    check_update(name="link_width", policy="act", actor="admin")
    later = timezone.now() + dt.timedelta(hours=3)
    ChangeWindow.objects.create(name="day shift", cron=f"{later.minute} {later.hour} * * *", duration_minutes=30,
                                time_zone="UTC", actors=[WindowActor.HEALTH_ACTIONS])
    hfleet.all_report(modules={"n-03-m0": {"link_width": 1}})
    sweeps(3)
    f = Finding.objects.get(check_name="link_width", module__serial="n-03-m0")
    assert f.action["result"] == "held_back" and "outside change window 'day shift'" in f.action["text"]
    assert not Quarantine.objects.filter(module__serial="n-03-m0").exists()
