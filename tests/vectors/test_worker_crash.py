"""A worker SIGKILLed while judging a fleet run's answers: a second worker finishes the
run, and no (run, module, case) result is stored twice."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.vectors.advance import run_advance
from apps.vectors.choices import RunState
from apps.vectors.models import RunTarget, VectorResult, VectorRun
from apps.vectors.runs import run_create
from apps.vectors.services import suite_import
from controlplane.celery import app
from tests.live.stack import LiveStack, RowHold, wait_for, waiting_on_lock
from tests.vectors.conftest import Fleet, int8_specs
from tests.vectors.test_import import EXPECTED

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live, pytest.mark.heavy]


def test_a_second_worker_finishes_a_run_a_killed_worker_left(live_stack: LiveStack) -> None:
    fleet = Fleet()
    nodes = [fleet.node(f"n-{c}") for c in "abc"]
    suite, _ = suite_import(name="onnx-int8", specs=int8_specs(), actor="test")
    run = run_create(suite=suite, modules=[m for n in nodes for m in n.modules.all()], actor="test")
    run_advance(run.pk)  # the commands go out
    for node in nodes:
        assert fleet.agent_poll(node.hostname) == [("run_vectors", "succeeded")]
    last = RunTarget.objects.filter(run=run).order_by("node__hostname").last()
    assert last is not None

    # Hold the last module's row: the worker judges and stores the first modules' answers, then waits.
    queue = f"vectors-crash-{uuid.uuid4().hex[:8]}"
    env = {"DB_APPLICATION_NAME": "vectors-crash-worker"}
    with RowHold(RunTarget.objects.filter(pk=last.pk)) as hold:
        first = live_stack.worker([queue], pool="solo", concurrency=1, env=env)
        app.send_task("apps.vectors.tasks.vector_run_advance", args=(run.pk,), queue=queue)
        wait_for(lambda: waiting_on_lock("vectors-crash-worker"), timeout=120,
                 what="the worker to reach the held module")
        first.kill()
        hold.release()

        run.refresh_from_db()
        assert run.state == RunState.RUNNING  # nothing half-done is visible

        live_stack.worker([queue], pool="solo", concurrency=1, env=env)
        result: Any = app.send_task("apps.vectors.tasks.vector_run_advance", args=(run.pk,), queue=queue)
        assert result.get(timeout=120) == RunState.PASSED
        assert VectorResult.objects.filter(run=run).count() == 3 * len(EXPECTED)
        assert VectorRun.objects.get(pk=run.pk).summary["outcomes"] == {"pass": 51, "fail": 0,
                                                                         "unsupported": 81, "error": 3}
