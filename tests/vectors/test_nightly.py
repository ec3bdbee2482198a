"""The nightly version-regression check: a sample of serving modules per pinned
combination, one per node, spread over racks; a failure flags the combination suspect."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.audit.models import AuditEvent
from apps.health.advisor import advice
from apps.health.models import Finding
from apps.inventory.choices import CombinationState
from apps.inventory.models import Rack
from apps.operations.choices import WindowActor
from apps.operations.models import ChangeWindow, Freeze
from apps.vectors.advance import run_advance
from apps.vectors.choices import RunPurpose, RunState
from apps.vectors.models import RunTarget, VectorResult, VectorRun
from apps.vectors.nightly import nightly_check
from apps.vectors.runs import run_cancel

pytestmark = pytest.mark.django_db


def _fleet(fleet: Any) -> None:
    for i in range(10):
        fleet.node(f"n-{i:02d}", modules=2, rack=f"rack-{i % 2 + 1}")


def test_it_samples_one_module_per_node_over_racks_once_a_night(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    _fleet(fleet)
    now = timezone.now()
    done = nightly_check(now=now)
    run = VectorRun.objects.get(purpose=RunPurpose.NIGHTLY)
    assert done == {"started": {str(fleet.pinned): run.pk}, "skipped": {}}
    targets = list(RunTarget.objects.filter(run=run).select_related("node__rack"))
    assert len(targets) == 2  # 5 % of 20 modules is 1: at least 2
    assert len({t.node_id for t in targets}) == 2 and {t.node.rack.name for t in targets} == {"rack-1", "rack-2"}
    assert nightly_check(now=now + dt.timedelta(hours=1))["skipped"] == {
        str(fleet.pinned): "already checked in the last 20 hours"}
    # tonight's run is long over by tomorrow (a run that is not holds its modules in the remediation budget)
    run_cancel(run=run, actor="test", reason="over")
    tomorrow = nightly_check(now=now + dt.timedelta(days=1))
    assert set(tomorrow["started"]) == {str(fleet.pinned)}


def test_a_failing_night_flags_the_combination_suspect_and_keeps_its_state(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    _fleet(fleet)
    nightly_check()
    run = VectorRun.objects.get(purpose=RunPurpose.NIGHTLY)
    run_advance(run.pk)

    def drift(vector: dict[str, Any]) -> Any:
        if vector["operator"] != "MatMulInteger":
            return None
        return lambda outs: [o + np.ones_like(o) for o in outs]

    for t in RunTarget.objects.filter(run=run).select_related("node"):
        fleet.agent_poll(t.node.hostname, perturb_for=drift)
    assert run_advance(run.pk) == RunState.FAILED
    fleet.pinned.refresh_from_db()
    assert fleet.pinned.state == CombinationState.PINNED and fleet.pinned.suspect
    assert fleet.pinned.suspect_reason.startswith(f"nightly vector run #{run.pk} failed: 1 case(s) outside "
                                                  "tolerance: test_matmulinteger")
    assert AuditEvent.objects.filter(action="versioncombination.suspect").count() == 1
    # Each module that failed has a vector_regression finding, with the cases, and its advice.
    failed_modules = set(VectorResult.objects.filter(run=run, outcome="fail").values_list("module_id", flat=True))
    findings = Finding.objects.filter(check_name="vector_regression", state="open")
    assert failed_modules and set(findings.values_list("module_id", flat=True)) == failed_modules
    f = findings.first()
    assert f is not None and f"nightly vector run #{run.pk}" in f.summary and "test_matmulinteger" in f.summary
    assert f.evidence["cases"][0]["operator"] == "MatMulInteger"
    assert "one version off" in advice("vector_regression")[0]["cause"]


def test_the_nightly_schedule_is_declared_and_stored(db) -> None:  # type: ignore[no-untyped-def]
    call_command("sync_schedules", verbosity=0)
    task = PeriodicTask.objects.get(task="apps.vectors.tasks.vectors_nightly")
    assert task.enabled and task.interval is not None and task.interval.every == 86400
    assert task.queue == "vectors"
    assert nightly_check() == {"skipped": "no published nightly suite (VECTORS_NIGHTLY_SUITE, default onnx-int8): "
                                          "import one with manage.py vectors_import onnx-node"}


def test_a_module_whose_versions_changed_is_checked_once(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    from apps.inventory.models import Module
    from apps.inventory.services import inventory_update
    from apps.vectors.nightly import versions_changed_check

    _fleet(fleet)
    assert versions_changed_check() == {"recorded": 20, "started": []}  # first seen: recorded, not checked
    moved = Module.objects.get(serial="n-03-m1")
    inventory_update(instance=moved, data={"driver_version": "2.4.0"}, actor="test", reason="hand upgrade")
    done = versions_changed_check()
    run = VectorRun.objects.get(purpose=RunPurpose.VERSIONS_CHANGED)
    assert done == {"recorded": 0, "started": [run.pk]}
    assert [t.module.serial for t in RunTarget.objects.filter(run=run)] == ["n-03-m1"]
    assert run.combination == fleet.candidate  # the combination the module is on now
    assert run.reason == "versions changed to driver 2.4.0 + 1.18.0 on n-03-m1"
    assert versions_changed_check() == {"recorded": 0, "started": []}


def test_the_nightly_sample_leaves_out_nodes_a_freeze_or_closed_window_holds(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    _fleet(fleet)
    now = timezone.now()
    rack1, rack2 = Rack.objects.get(name="rack-1"), Rack.objects.get(name="rack-2")
    later = now + dt.timedelta(hours=3)
    ChangeWindow.objects.create(name="rack-1 nights", cron=f"{later.minute} {later.hour} * * *", duration_minutes=30,
                                time_zone="UTC", actors=[WindowActor.VECTOR_RUNS]).racks.set([rack1])
    done = nightly_check(now=now)
    run = VectorRun.objects.get(purpose=RunPurpose.NIGHTLY)
    assert done["started"] == {str(fleet.pinned): run.pk}
    assert {t.node.rack.name for t in RunTarget.objects.filter(run=run).select_related("node__rack")} == {"rack-2"}

    freeze = Freeze.objects.create(reason="audit week", starts_at=now, ends_at=now + dt.timedelta(days=3))
    freeze.racks.set([rack2])
    skipped = nightly_check(now=now + dt.timedelta(days=1))["skipped"][str(fleet.pinned)]
    assert "no serving module on it that is free" in skipped
    assert "outside change window 'rack-1 nights'" in skipped or "audit week" in skipped
