"""A freeze on a running simulated fleet (web, writer, a Celery worker on every queue, beat on its real
schedule, the simulator's agents reporting through the real endpoints): the link-width check's ``act``
policy only observes (its finding opens and says it would quarantine, until the freeze ends) while a
module with uncorrected ECC errors, a critical finding, is still quarantined by health, saying it acted
despite the freeze."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.health.choices import ACTIVE_FINDING_STATES
from apps.health.models import Finding
from apps.health.services import check_update
from apps.inventory.choices import TierKind
from apps.operations.models import Freeze, Quarantine
from apps.simulator import services as simulator
from tests.agent.fleet import make_node
from tests.live.stack import LiveStack, wait_for

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1500)]


def _acted_on(check: str, hostname: str, result: str) -> Finding:
    """The active finding of ``check`` on ``hostname`` whose action came to ``result`` (fails until there is)."""
    found = Finding.objects.filter(check_name=check, node__hostname=hostname, state__in=ACTIVE_FINDING_STATES,
                                   action__result=result).first()
    assert found is not None, f"no {check} finding on {hostname} with the action {result!r} yet"
    return found


def test_a_freeze_holds_an_act_policy_to_observe_only_and_a_critical_finding_still_acts(
        live_stack: LiveStack) -> None:
    for i in range(2):
        make_node(f"n-a-{i}", tier=TierKind.ACCESS_LOGIC, modules=0, slot=i + 1)
    hybrid = [make_node(f"n-h-{i}", modules=2, slot=10 + i) for i in range(6)]
    check_update(name="link_width", policy="act", actor="admin")
    check_update(name="ecc", policy="act", actor="admin")
    now = timezone.now()
    freeze = Freeze.objects.create(reason="peak season", starts_at=now - dt.timedelta(minutes=1),
                                   ends_at=now + dt.timedelta(hours=2))
    live_stack.web()
    live_stack.simulator()
    live_stack.worker()
    live_stack.beat()
    narrow, broken = hybrid[0], hybrid[1]
    simulator.fault_set(kind="pcie_degraded", node=narrow, actor="test")
    simulator.fault_set(kind="ecc_rising", node=broken, params={"corrected_per_min": 0, "uncorrected_after_s": 0},
                        actor="test")

    held = wait_for(lambda: _acted_on("link_width", narrow.hostname, "held_back"), timeout=600,
                    what="the link-width finding held to observe-only by the freeze", interval=2.0)
    assert "observe only" in held.action["text"] and "peak season" in held.action["text"], held.action
    assert held.action["until"] == freeze.ends_at.isoformat()
    acted = wait_for(lambda: _acted_on("ecc", broken.hostname, "acted"), timeout=600,
                     what="the critical ECC finding acted on despite the freeze", interval=2.0)
    assert acted.severity == "critical" and "despite the freeze" in acted.action["text"], acted.action
    assert Quarantine.objects.filter(module__node=broken, owner="health", released_at__isnull=True).exists()
    held.refresh_from_db()
    assert held.action["result"] == "held_back"  # still only observing
    assert not Quarantine.objects.filter(module__node=narrow).exists()
