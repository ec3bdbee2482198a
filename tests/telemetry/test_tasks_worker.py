"""The rollup task through a real Celery worker (same Redis, the test database)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection
from django_celery_beat.models import PeriodicTask

from apps.telemetry.models import NodeRollup
from controlplane.celery import app
from controlplane.schedules import SCHEDULES
from tests.telemetry.conftest import Fleet
from tests.telemetry.test_rollups import ingest_minute, minute_ago

BASE_DIR = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    s = connection.settings_dict
    auth = quote(s["USER"] or "") + (":" + quote(s["PASSWORD"]) if s["PASSWORD"] else "")
    host = s["HOST"] or ""
    if host.startswith("/"):
        return f"postgresql://{auth}@/{quote(s['NAME'])}?host={quote(host)}" + (
            f"&port={s['PORT']}" if s["PORT"] else "")
    return f"postgresql://{auth}@{host}:{s['PORT'] or 5432}/{quote(s['NAME'])}"


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_it_rolls_up_through_a_real_worker(transactional_db: Any, tmp_path: Path) -> None:
    fleet = Fleet()
    minute = minute_ago(1)
    ingest_minute(fleet, minute)
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL,
           "DB_CONN_MAX_AGE": "0"}
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "-Q", "telemetry", "--pool", "solo",
         "-n", f"telemetry-test-{os.getpid()}@%h", "-l", "INFO"],
        cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        result = app.send_task("apps.telemetry.tasks.telemetry_rollup", queue="telemetry")
        outcome = result.get(timeout=60)
    finally:
        worker.terminate()
        worker.wait(20)
        log.close()
    assert outcome["rows"]["noderollup"] >= 1
    rollup = NodeRollup.objects.get(node_id=fleet.node_a.pk, minute=minute)
    assert rollup.cpu_util_mean == pytest.approx(0.5)


def test_it_stores_the_telemetry_schedules(db: Any) -> None:
    from django.core.management import call_command

    call_command("sync_schedules")
    tasks = {t.task: t for t in PeriodicTask.objects.filter(task__startswith="apps.telemetry.")}
    assert set(tasks) == {"apps.telemetry.tasks.telemetry_rollup", "apps.telemetry.tasks.telemetry_retention"}
    assert tasks["apps.telemetry.tasks.telemetry_rollup"].interval.every == 60
    assert tasks["apps.telemetry.tasks.telemetry_rollup"].queue == "telemetry"
    assert all(s.task in tasks for s in SCHEDULES if s.task.startswith("apps.telemetry."))
