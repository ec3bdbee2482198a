"""Vector runs on serving nodes are automated holds in the remediation budget: a nightly sample after
health holds N modules of the tier is held back (or cut to what is granted), with the tier's
``budget_held_back`` finding, which resolves once the vector runs are granted again."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.health.choices import FindingState
from apps.health.models import Finding
from apps.health.sweep import sweep
from apps.inventory.models import Module
from apps.inventory.services import inventory_update
from apps.operations import lifecycle
from apps.operations.choices import Owner
from apps.operations.models import BudgetHeldBack
from apps.vectors.choices import RunPurpose
from apps.vectors.models import RunTarget, VectorRun
from apps.vectors.nightly import nightly_check, versions_changed_check
from apps.vectors.runs import run_cancel

pytestmark = pytest.mark.django_db


def test_a_nightly_run_after_health_holds_n_modules_is_held_back_with_a_finding(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    for i in range(10):
        fleet.node(f"n-{i:02d}", modules=2, rack=f"rack-{i % 2 + 1}")
    assert versions_changed_check()["recorded"] == 20
    # health quarantines 2 of the tier's 20 modules: 10 %, all the tier allows
    for serial in ("n-00-m0", "n-01-m0"):
        lifecycle.module_quarantine(module=Module.objects.get(serial=serial), owner=Owner.HEALTH,
                                    reason="health finding", actor="health")
    now = timezone.now()
    done = nightly_check(now=now)
    assert done["skipped"] == {str(fleet.pinned): (
        "held back by the remediation budget: max_unavailable: automation already holds 2 of 20 serving modules "
        "of Hybrid inference (health actions 2; at most 2)")}
    assert not VectorRun.objects.exists()
    row = BudgetHeldBack.objects.get()
    assert (row.actor, row.asked, row.granted) == ("vector_runs", 2, 0)
    sweep()
    [f] = Finding.objects.filter(check_name="budget_held_back", state=FindingState.OPEN)
    assert f.evidence["actor"] == "Vector runs on serving nodes" and f.evidence["held_by"] == {"health_actions": 2}
    assert f.evidence["wanted"] == f"nightly check of {fleet.pinned} on 2 of 2 module(s)"

    # one quarantine released: the sample is cut to the one module granted
    lifecycle.module_release(module=Module.objects.get(serial="n-00-m0"), owner=Owner.HEALTH, reason="fixed",
                             actor="health")
    done = nightly_check(now=now)
    run = VectorRun.objects.get(purpose=RunPurpose.NIGHTLY)
    assert done["started"] == {str(fleet.pinned): run.pk} and RunTarget.objects.filter(run=run).count() == 1
    assert BudgetHeldBack.objects.get().granted == 1

    # the run holds its module until it is over; then a versions-changed run is granted: nothing held back
    run_cancel(run=run, actor="test", reason="over")
    lifecycle.module_release(module=Module.objects.get(serial="n-01-m0"), owner=Owner.HEALTH, reason="fixed",
                             actor="health")
    inventory_update(instance=Module.objects.get(serial="n-05-m1"), data={"driver_version": "2.4.0"}, actor="test",
                     reason="hand upgrade")
    changed = versions_changed_check(now=now)  # 3 holds started on the tier this hour: the rate limit
    assert changed["started"] == [] and changed["held_back"]["2.4.0 + 1.18.0"] == (
        "rate limit: 3 automated holds started on Hybrid inference in the last hour (health actions 2, "
        "vector runs on serving nodes 1; at most 3)")
    later = now + dt.timedelta(hours=1, minutes=1)
    changed = versions_changed_check(now=later)
    assert len(changed["started"]) == 1 and "held_back" not in changed
    assert not BudgetHeldBack.objects.exists()
    sweep(now=later)
    f.refresh_from_db()
    assert f.state == FindingState.RESOLVED


def test_a_running_vector_run_holds_back_the_next_one_on_the_tier(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    for i in range(10):
        fleet.node(f"n-{i:02d}", modules=1, rack=f"rack-{i % 2 + 1}")
    versions_changed_check()
    for serial in ("n-02-m0", "n-07-m0"):  # 10 % of 10 modules is 1: the second is held back, taken later
        inventory_update(instance=Module.objects.get(serial=serial), data={"driver_version": "2.4.0"}, actor="test",
                         reason="hand upgrade")
    first = versions_changed_check()
    assert len(first["started"]) == 1 and "automation already holds 0 of 10 serving modules" in \
        first["held_back"]["2.4.0 + 1.18.0"]
    [run] = VectorRun.objects.all()
    held = versions_changed_check()  # the first run is not over: it holds its module
    assert held["started"] == []
    assert "(vector runs on serving nodes 1; at most 1)" in held["held_back"]["2.4.0 + 1.18.0"]
    run_cancel(run=run, actor="test", reason="over")
    later = versions_changed_check()
    assert len(later["started"]) == 1 and "held_back" not in later and not BudgetHeldBack.objects.exists()
