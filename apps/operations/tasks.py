"""Periodic tasks (schedules in controlplane/schedules.py). Each takes no state
of its own, calls one controller or service and is safe to run twice or on many
workers: every step is a compare-and-set in its own transaction."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.operations import controllers, retention, scaling

_OPTS: dict[str, Any] = {"acks_late": True, "soft_time_limit": 50, "time_limit": 60, "expires": 30}


@shared_task(name="apps.operations.tasks.drains_advance", **_OPTS)
def drains_advance() -> dict[str, int]:
    """Finish drains whose node reports zero in flight, apply deadlines and resume-after,
    return scaled-down nodes to standby and complete scale requests."""
    return controllers.drains_advance()


@shared_task(name="apps.operations.tasks.nodes_heartbeat", **_OPTS)
def nodes_heartbeat() -> dict[str, list[int]]:
    """Mark silent nodes unreachable and bring back those that report again."""
    return controllers.nodes_heartbeat()


@shared_task(name="apps.operations.tasks.autoscaler_run", **_OPTS)
def autoscaler_run() -> list[int]:
    """Evaluate every enabled autoscaler policy once."""
    return [d.pk for d in scaling.autoscaler_run_all()]


@shared_task(name="apps.operations.tasks.operations_retention", acks_late=True, time_limit=300, expires=3000)
def operations_retention() -> dict[str, int]:
    """Forget Idempotency-Key replies older than a day and autoscaler decisions older than a week."""
    return retention.operations_retention()
