"""Periodic telemetry work. Each task calls one service and is safe to run twice."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from apps.telemetry.rollups import retention, rollup


@shared_task(acks_late=True, soft_time_limit=50, time_limit=60, expires=55)
def telemetry_rollup() -> dict[str, Any]:
    """Recompute the per-minute rollups of the minutes that received rows since the last run."""
    return rollup.telemetry_rollup()


@shared_task(acks_late=True, soft_time_limit=600, time_limit=660, expires=3000)
def telemetry_retention() -> dict[str, Any]:
    """Drop raw partitions and delete rollups past their retention."""
    return retention.telemetry_retention()


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150, expires=540)
def telemetry_partitions() -> dict[str, list[str]]:
    """Make the raw tables' partitions for the hours ahead."""
    return retention.telemetry_partitions_ahead()
