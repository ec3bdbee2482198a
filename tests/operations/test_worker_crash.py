"""A Celery worker killed with SIGKILL in the middle of advancing a scale-down
leaves consistent state in the database; a new worker resumes and finishes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection, transaction

from apps.inventory.choices import NodeState
from apps.operations import services
from apps.operations.choices import DrainState, ScaleState
from apps.operations.models import Drain, ScaleRequest
from controlplane.celery import app

from .conftest import Fleet, state_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    d = connection.settings_dict
    return (f"postgresql://{quote(d['USER'] or '')}:{quote(d['PASSWORD'] or '')}@:{d['PORT'] or 5432}/"
            f"{quote(d['NAME'])}?host={quote(d['HOST'] or '')}")


def _worker(queue: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL,
           "DB_APPLICATION_NAME": "ops-crash-worker"}
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "-Q", queue, "--pool", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "warning"],
        cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _waiting_on_lock() -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ops-crash-worker' "
                    "AND wait_event_type = 'Lock'")
        row = cur.fetchone()
    return bool(row and row[0])


def test_it_resumes_a_scale_down_after_a_worker_is_killed() -> None:
    fleet = Fleet()
    a, b = fleet.node("n-1"), fleet.node("n-2", rack=1)
    fleet.report(a, in_flight=0)
    fleet.report(b, in_flight=4)
    sr = services.tier_scale(tier=fleet.tier, desired=1, actor="alice", reason="night").obj
    drain = Drain.objects.get(scale_request=sr)
    assert drain.node == a
    fleet.report(a, in_flight=0)

    # Hold the drain row, so the worker stops half-way through advancing it.
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Drain.objects.select_for_update().get(pk=drain.pk)
                held.set()
                release.wait(120)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    queue = f"ops-crash-{uuid.uuid4().hex[:8]}"
    first = _worker(queue)
    second: subprocess.Popen[bytes] | None = None
    try:
        app.send_task("apps.operations.tasks.drains_advance", queue=queue)
        deadline = time.monotonic() + 90
        while not _waiting_on_lock():
            assert first.poll() is None, first.stderr.read().decode() if first.stderr else "worker exited"
            assert time.monotonic() < deadline, "the worker never reached the drain"
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        release.set()
        holder.join(10)

        # Killed mid-operation: nothing half-done, the node still draining, nothing lost.
        drain.refresh_from_db()
        assert drain.state == DrainState.DRAINING and state_of(a) == NodeState.DRAINING
        assert ScaleRequest.objects.get(pk=sr.pk).state == ScaleState.RUNNING

        second = _worker(queue)
        result: Any = app.send_task("apps.operations.tasks.drains_advance", queue=queue)
        assert result.get(timeout=90) == {"drained": 1}
        drain.refresh_from_db()
        assert drain.state == DrainState.RELEASED
        assert state_of(a) == NodeState.STANDBY and state_of(b) == NodeState.ACTIVE
        assert ScaleRequest.objects.get(pk=sr.pk).state == ScaleState.COMPLETED
    finally:
        release.set()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
