"""The health sweep as a periodic task on the ``health`` queue (schedule in
controlplane/schedules.py). A sweep that overruns its interval is skipped, not
stacked: one at a time fleet-wide, behind a lock in Redis."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from apps.health import notify, sweep

logger = logging.getLogger(__name__)

LOCK_KEY = "health:sweep:lock"
LOCK_TTL_S = 150  # beyond the task's hard time limit: a sweep killed mid-way frees the lock after this


@shared_task(name="apps.health.tasks.health_sweep", acks_late=True, soft_time_limit=120, time_limit=140,
             expires=10)
def health_sweep() -> dict[str, Any]:
    """Evaluate every check on the fleet once, unless a sweep is still running."""
    token = uuid.uuid4().hex
    if not cache.add(LOCK_KEY, token, LOCK_TTL_S):
        logger.info("health sweep skipped: the previous one is still running")
        return {"skipped": True}
    try:
        return sweep.sweep()
    finally:
        if cache.get(LOCK_KEY) == token:
            cache.delete(LOCK_KEY)


NOTIFY_RETRIES = 5
NOTIFY_BACKOFF_S = 5.0  # the first retry's wait, doubled at each retry (HEALTH_NOTIFY_BACKOFF_S)


@shared_task(name="apps.health.tasks.health_notify", bind=True, acks_late=True, soft_time_limit=30, time_limit=40,
             max_retries=NOTIFY_RETRIES)
def health_notify(self: Any, delivery_id: int) -> str:
    """Send one notification; on failure retry with exponential backoff, then mark it failed."""
    try:
        return str(notify.deliver(delivery_id=delivery_id).state)
    except Exception as exc:
        if self.request.retries >= NOTIFY_RETRIES:
            notify.delivery_give_up(delivery_id=delivery_id)
            return "failed"
        base = float(getattr(settings, "HEALTH_NOTIFY_BACKOFF_S", NOTIFY_BACKOFF_S))
        raise self.retry(exc=exc, countdown=base * 2 ** self.request.retries) from exc
