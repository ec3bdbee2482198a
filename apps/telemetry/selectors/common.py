"""What the telemetry readers share: the freshness bound, the window start, raw SQL rows and rounding.

Dashboard reads use the per-minute rollups and the latest-state rows only, never the raw samples
(rollups include the current, partial minute as of the last rollup run, at most about a minute old;
the latest-state rows are as fresh as the last batch)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection

# A node whose latest sample is older than this does not count towards "now" figures.
FRESH_S = 120


def window_start(now: dt.datetime, minutes: int) -> dt.datetime:
    """Start of a window of ``minutes`` whole minutes ending with the current minute."""
    return now.replace(second=0, microsecond=0) - dt.timedelta(minutes=minutes - 1)


def sql_rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()
