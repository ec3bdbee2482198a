"""A Celery worker killed with SIGKILL in the middle of advancing a scale-down
leaves consistent state in the database; a new worker resumes and finishes it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.inventory.choices import NodeState
from apps.operations import scaling
from apps.operations.choices import DrainState, ScaleState
from apps.operations.models import Drain, ScaleRequest
from controlplane.celery import app
from tests.live.stack import LiveStack, Proc, RowHold, wait_for, waiting_on_lock

from .conftest import Fleet, state_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


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
    queue = f"ops-crash-{uuid.uuid4().hex[:8]}"
    with RowHold(Drain.objects.filter(pk=drain.pk)) as hold:
        first = _worker(live_stack, queue)
        app.send_task("apps.operations.tasks.drains_advance", queue=queue)
        wait_for(lambda: waiting_on_lock("ops-crash-worker"), timeout=90, what="the worker to reach the held drain")
        first.kill()
        hold.release()

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
