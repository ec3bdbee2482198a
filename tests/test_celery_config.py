"""A task whose worker dies runs again on another worker, and a task still running is never
handed to a second one: every task is acknowledged when it ends, and the broker's visibility
timeout outlasts the longest a live worker keeps a message (its hard time limit, or its ETA).
The redelivery itself, two real workers and one SIGKILLed: tests/deploy/test_worker_redelivery_live.py."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from apps.health.tasks import NOTIFY_BACKOFF_S, NOTIFY_RETRIES, health_notify
from controlplane.celery import app


def _product_tasks() -> dict[str, Any]:
    app.loader.import_default_modules()
    tasks = {name: task for name, task in app.tasks.items() if name.startswith("apps.")}
    assert len(tasks) >= 15, sorted(tasks)
    return tasks


def test_every_task_is_acknowledged_when_it_ends_and_put_back_when_its_worker_child_dies() -> None:
    assert {name for name, task in _product_tasks().items() if not task.acks_late} == set()
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1


def test_the_visibility_timeout_outlasts_every_task_a_live_worker_holds() -> None:
    tasks = _product_tasks()
    assert {name for name, task in tasks.items() if not task.time_limit} == set(), "a task without a hard limit"
    longest_run = max(task.time_limit for task in tasks.values())
    longest_eta = NOTIFY_BACKOFF_S * 2 ** (NOTIFY_RETRIES - 1) + health_notify.time_limit
    options = app.conf.broker_transport_options
    assert options == settings.CELERY_BROKER_TRANSPORT_OPTIONS
    assert options["visibility_timeout"] > max(longest_run, longest_eta), (options, longest_run, longest_eta)
    # Looked for every restore interval, not on every tenth (kombu's default): a dead worker's
    # task comes back within the timeout and one interval.
    assert options["unacked_restore_throttle"] == 1
    assert options["unacked_restore_interval"] <= 10
