"""Retention: raw partitions made ahead and dropped once past the raw retention; rollups, stored batch
ids and finished commands deleted past theirs."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.agents.services import node_commands_retention
from apps.telemetry.batch import raw_retention_hours
from apps.telemetry.models import IngestBatch
from apps.telemetry.store import partitions
from apps.telemetry.store.raw import KINDS, forget_partitions


def rollup_retention_days() -> float:
    return float(getattr(settings, "TELEMETRY_ROLLUP_RETENTION_DAYS", 30))


_ROLLUP_TABLES = ("telemetry_noderollup", "telemetry_modulerollup", "telemetry_tierrollup", "telemetry_stagerollup",
                  "telemetry_stagenoderollup", "telemetry_endpointrollup", "telemetry_nodelatencyrollup",
                  "telemetry_tierlatencyrollup")


def telemetry_partitions_ahead(*, now: dt.datetime | None = None) -> dict[str, list[str]]:
    """Create the raw tables' partitions from the current one to TELEMETRY_PARTITIONS_AHEAD_HOURS ahead."""
    now = now or timezone.now()
    starts = partitions.starts_between(now, now + dt.timedelta(hours=partitions.ahead_hours()))
    made: dict[str, list[str]] = {}
    with transaction.atomic(), connection.cursor() as cur:
        for table, _cols, _types in KINDS.values():
            made[table.removeprefix("telemetry_")] = partitions.create(cur, table, starts)
    return made


@transaction.atomic
def telemetry_retention(*, now: dt.datetime | None = None) -> dict[str, Any]:
    """Drop the raw tables' partitions wholly past the raw retention (no row deletes);
    delete stored batch ids past it, rollups and finished commands past the rollup
    retention; expire overdue commands. Buffered batches are never deleted."""
    now = now or timezone.now()
    raw_cutoff = now - dt.timedelta(hours=raw_retention_hours())
    rollup_cutoff = now - dt.timedelta(days=rollup_retention_days())
    deleted: dict[str, Any] = {}
    with connection.cursor() as cur:
        for table, _cols, _types in KINDS.values():
            deleted[table.removeprefix("telemetry_")] = partitions.drop_before(cur, table, raw_cutoff)
        for table in _ROLLUP_TABLES:
            cur.execute(f"DELETE FROM {table} WHERE minute < %s", [rollup_cutoff])
            deleted[table.removeprefix("telemetry_")] = cur.rowcount
    transaction.on_commit(forget_partitions)
    deleted["ingestbatch"] = IngestBatch.objects.filter(received_at__lt=raw_cutoff, stored_at__isnull=False).delete()[0]
    deleted.update(node_commands_retention(now=now, finished_before=rollup_cutoff))
    return deleted
