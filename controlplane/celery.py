"""The one Celery app. Queues are named by the kind of work; every periodic
schedule is declared in ``controlplane/schedules.py`` and stored in the
database (django-celery-beat) by ``manage.py sync_schedules``."""

import os
import time
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_process_init
from django.db import connections

from apps.common.metrics import task_finished

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

# Every queue a worker takes. `make up` (controlplane/devstack.py), deploy/Procfile and the
# systemd worker unit name the same list (tests/test_processes.py checks they agree).
WORKER_QUEUES: tuple[str, ...] = ("default", "telemetry", "operations", "vectors", "health")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_default_queue = "default"
app.conf.task_routes = {
    "apps.telemetry.tasks.*": {"queue": "telemetry"},
    "apps.vectors.tasks.*": {"queue": "vectors"},
    "apps.health.tasks.*": {"queue": "health"},
}
app.autodiscover_tasks()


@worker_process_init.connect
def _fresh_pools_after_fork(**kwargs: object) -> None:
    """A prefork child must not use a database pool its parent may have opened (its
    connections' sockets are the parent's, its worker threads did not survive the fork):
    forget it, so the child's first query opens a pool of its own."""
    for conn in connections.all(initialized_only=True):
        conn.connection = None
    pools = getattr(type(connections["default"]), "_connection_pools", None)
    if isinstance(pools, dict):
        pools.clear()


# Each task's run, failure and duration, counted for /metrics (apps/common/metrics.py).
_started: dict[str, float] = {}


@task_prerun.connect
def _task_started(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id:
        _started[task_id] = time.monotonic()


@task_postrun.connect
def _task_finished(task_id: str | None = None, task: Any = None, state: str | None = None, **kwargs: Any) -> None:
    started = _started.pop(task_id or "", None)
    if started is not None and task is not None:
        task_finished(name=task.name, seconds=time.monotonic() - started, failed=state == "FAILURE")
