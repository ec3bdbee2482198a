"""Periodic telemetry work. Each task calls one service and is safe to run twice."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.telemetry import services


@shared_task(acks_late=True, soft_time_limit=50, time_limit=60, expires=55)
def telemetry_rollup() -> dict[str, Any]:
    """Recompute the per-minute rollups of the last few minutes (and of late batches)."""
    return services.telemetry_rollup()


@shared_task(acks_late=True, soft_time_limit=600, time_limit=660, expires=3000)
def telemetry_retention() -> dict[str, int]:
    """Delete raw samples and rollups past their retention."""
    return services.telemetry_retention()
