"""A Celery worker killed with SIGKILL in the middle of advancing a scale-down
leaves consistent state in the database; a new worker resumes and finishes it."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connection, transaction

from apps.inventory.choices import NodeState
from apps.operations import scaling
from apps.operations.choices import DrainState, ScaleState
from apps.operations.models import Drain, ScaleRequest
from controlplane.celery import app
from tests.live.stack import LiveStack, Proc, wait_for

from .conftest import Fleet, state_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def _waiting_on_lock() -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ops-crash-worker' "
                    "AND wait_event_type = 'Lock'")
        row = cur.fetchone()
    return bool(row and row[0])


def _worker(stack: LiveStack, queue: str) -> Proc:
    return stack.worker([queue], pool="solo", concurrency=1, env={"DB_APPLICATION_NAME": "ops-crash-worker"})


def test_it_resumes_a_scale_down_after_a_worker_is_killed(live_stack: LiveStack) -> None:
    fleet = Fleet()
    a, b = fleet.node("n-1"), fleet.node("n-2", rack=1)
    fleet.report(a, in_flight=0)
    fleet.report(b, in_flight=4)
    sr = scaling.tier_scale(tier=fleet.tier, desired=1, actor="alice", reason="night").obj
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
    first = _worker(live_stack, queue)
    try:
        app.send_task("apps.operations.tasks.drains_advance", queue=queue)
        wait_for(_waiting_on_lock, timeout=90, what="the worker to reach the held drain")
        first.kill()
        release.set()
        holder.join(10)

        # Killed mid-operation: nothing half-done, the node still draining, nothing lost.
        drain.refresh_from_db()
        assert drain.state == DrainState.DRAINING and state_of(a) == NodeState.DRAINING
        assert ScaleRequest.objects.get(pk=sr.pk).state == ScaleState.RUNNING

        _worker(live_stack, queue)
        result: Any = app.send_task("apps.operations.tasks.drains_advance", queue=queue)
        assert result.get(timeout=90) == {"drained": 1}
        drain.refresh_from_db()
        assert drain.state == DrainState.RELEASED
        assert state_of(a) == NodeState.STANDBY and state_of(b) == NodeState.ACTIVE
        assert ScaleRequest.objects.get(pk=sr.pk).state == ScaleState.COMPLETED
    finally:
        release.set()
