"""The rollup task through a real Celery worker (same Redis, the test database)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from apps.telemetry.models import NodeRollup
from controlplane.celery import app
from controlplane.schedules import SCHEDULES
from tests.live.stack import LiveStack
from tests.telemetry.conftest import Fleet
from tests.telemetry.test_rollups import ingest_minute, minute_ago


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_it_rolls_up_through_a_real_worker(live_stack: LiveStack) -> None:
    fleet = Fleet()
    minute = minute_ago(1)
    ingest_minute(fleet, minute)
    live_stack.worker(["telemetry"], pool="solo", concurrency=1)
    outcome = app.send_task("apps.telemetry.tasks.telemetry_rollup", queue="telemetry").get(timeout=60)
    assert outcome["rows"]["noderollup"] >= 1
    rollup = NodeRollup.objects.get(node_id=fleet.node_a.pk, minute=minute)
    assert rollup.cpu_util_mean == pytest.approx(0.5)


def test_it_stores_the_telemetry_schedules(db: Any) -> None:
    call_command("sync_schedules")
    tasks = {t.task: t for t in PeriodicTask.objects.filter(task__startswith="apps.telemetry.")}
    assert set(tasks) == {"apps.telemetry.tasks.telemetry_rollup", "apps.telemetry.tasks.telemetry_retention",
                          "apps.telemetry.tasks.telemetry_partitions"}
    assert tasks["apps.telemetry.tasks.telemetry_partitions"].queue == "telemetry"
    assert tasks["apps.telemetry.tasks.telemetry_rollup"].interval.every == 60
    assert tasks["apps.telemetry.tasks.telemetry_rollup"].queue == "telemetry"
    assert all(s.task in tasks for s in SCHEDULES if s.task.startswith("apps.telemetry."))
