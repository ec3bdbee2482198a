"""Housekeeping of fleet operations: stored Idempotency-Key replies and old autoscaler decisions."""

from __future__ import annotations

import datetime as dt

from django.db.models import Q
from django.utils import timezone

from apps.operations.models import AutoscalerDecision, IdempotencyRecord


def idempotency_purge(*, older_than_s: int = 86400, now: dt.datetime | None = None) -> int:
    """Forget stored Idempotency-Key replies older than a day (clients retry within minutes)."""
    now = now or timezone.now()
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=now - dt.timedelta(seconds=older_than_s)).delete()
    return deleted


def operations_retention(*, now: dt.datetime | None = None, decisions_days: float = 7.0) -> dict[str, int]:
    """Hourly: forget old Idempotency-Key replies, and autoscaler decisions older than a week
    (by their latest evaluation) except those that started a scale request."""
    now = now or timezone.now()
    cutoff = now - dt.timedelta(days=decisions_days)
    decisions, _ = AutoscalerDecision.objects.filter(
        Q(until__lt=cutoff) | Q(until__isnull=True, time__lt=cutoff), scale_request__isnull=True).delete()
    return {"idempotency_keys": idempotency_purge(now=now), "autoscaler_decisions": decisions}
