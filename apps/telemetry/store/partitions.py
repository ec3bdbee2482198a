"""Range partitions of the raw sample tables, by time.

Each raw table (``RAW_TABLES``) is a partitioned parent; its partitions cover
``TELEMETRY_PARTITION_HOURS`` (default 1) each, aligned on the epoch in UTC and
named ``<table>_pYYYYMMDDHH`` after their start. A scheduled task makes them
``TELEMETRY_PARTITIONS_AHEAD_HOURS`` (default 6) ahead; the writer makes any
that a batch needs and that is missing (a late batch, a gap in the schedule);
retention drops a partition once all of it is older than the raw retention,
instead of deleting rows. Queries with a time range (the rollups) read only the
partitions that overlap it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from django.conf import settings

RAW_TABLES = ("telemetry_nodesample", "telemetry_modulesample", "telemetry_tiersample", "telemetry_stagesample",
              "telemetry_latencysample")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_BOUND = re.compile(r"FROM \('([^']+)'\) TO \('([^']+)'\)")


def partition_hours() -> int:
    return max(1, int(getattr(settings, "TELEMETRY_PARTITION_HOURS", 1)))


def ahead_hours() -> int:
    return max(1, int(getattr(settings, "TELEMETRY_PARTITIONS_AHEAD_HOURS", 6)))


def partition_start(t: dt.datetime, hours: int | None = None) -> dt.datetime:
    size = dt.timedelta(hours=hours or partition_hours())
    return EPOCH + ((t - EPOCH) // size) * size


def partition_name(table: str, start: dt.datetime) -> str:
    return f"{table}_p{start.astimezone(dt.UTC):%Y%m%d%H}"


def starts_between(lo: dt.datetime, hi: dt.datetime, hours: int | None = None) -> list[dt.datetime]:
    """Starts of the partitions covering [lo, hi]."""
    size = dt.timedelta(hours=hours or partition_hours())
    start, out = partition_start(lo, hours), []
    while start <= hi:
        out.append(start)
        start += size
    return out


def create(cursor: Any, table: str, starts: Iterable[dt.datetime], hours: int | None = None) -> list[str]:
    """Create the partitions of ``table`` starting at ``starts`` (those missing); returns their names.

    In the caller's transaction, one creator per table at a time: ``CREATE TABLE IF NOT EXISTS`` is
    not safe against a concurrent twin (the second waits for the first's commit, then fails "already
    exists"), so a transaction-scoped advisory lock on the table is taken first and held to the
    caller's commit; the next creator then lists the partitions made and skips them. Every caller
    (the writers, the partitions-ahead task) goes through the raw tables in the same order."""
    size = dt.timedelta(hours=hours or partition_hours())
    made = []
    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"partitions:{table}"])
    existing = {name for name, _lo, _hi in list_partitions(cursor, table)}
    for start in sorted(set(starts)):
        name = partition_name(table, start)
        if name in existing:
            continue
        cursor.execute(
            f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF "{table}" FOR VALUES FROM (%s) TO (%s)',
            [start, start + size],
        )
        made.append(name)
    return made


def list_partitions(cursor: Any, table: str) -> list[tuple[str, dt.datetime, dt.datetime]]:
    """(name, start, end) of ``table``'s partitions, oldest first."""
    cursor.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
        " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
        [table],
    )
    out = []
    for name, bound in cursor.fetchall():
        m = _BOUND.search(bound or "")
        if m is None:
            continue  # a DEFAULT partition: never dropped by time
        out.append((str(name), _ts(m.group(1)), _ts(m.group(2))))
    return sorted(out, key=lambda p: p[1])


def drop_before(cursor: Any, table: str, cutoff: dt.datetime) -> list[str]:
    """Drop every partition of ``table`` whose whole range is older than ``cutoff``."""
    dropped = []
    for name, _lo, hi in list_partitions(cursor, table):
        if hi <= cutoff:
            cursor.execute(f'DROP TABLE "{name}"')
            dropped.append(name)
    return dropped


def _ts(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
