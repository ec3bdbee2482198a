"""Per-endpoint figures of the gateway's tier samples (contract 3): each tier sample may say,
for each external endpoint of its tier, how many requests it sent there in the window, how many
failed, the tokens counted against the endpoint's quota and the latency p95.

They are few (one row per endpoint and window) and read only per minute, so they have no raw
table: the writer merges them into ``EndpointRollup`` (one row per endpoint and minute) in the
transaction that stores their batch, so each batch counts once, and the minute is as fresh as
the latest batch (no wait for the rollup task). Counts and seconds are summed; p95 is the largest
of the windows' (an upper bound, as stage rollups merge theirs)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from apps.telemetry.batch import raw_retention_hours

# A parsed endpoint row: (time, endpoint id, window_s, requests, errors, tokens, p95_ms or None).
_MERGE = (
    "INSERT INTO telemetry_endpointrollup AS r (endpoint_id, minute, samples, window_s, requests, errors, tokens,"
    " p95_ms)"
    " SELECT * FROM unnest(%s::int8[], %s::timestamptz[], %s::int4[], %s::float8[], %s::int8[], %s::int8[],"
    " %s::int8[], %s::float8[]) ORDER BY 1, 2"
    " ON CONFLICT (endpoint_id, minute) DO UPDATE SET samples = r.samples + EXCLUDED.samples,"
    " window_s = r.window_s + EXCLUDED.window_s, requests = r.requests + EXCLUDED.requests,"
    " errors = r.errors + EXCLUDED.errors, tokens = r.tokens + EXCLUDED.tokens,"
    " p95_ms = GREATEST(r.p95_ms, EXCLUDED.p95_ms)"
)


def endpoint_minutes_merge(cur: Any, rows: list[Any], now: dt.datetime) -> int:
    """Merge endpoint rows into their minutes (the caller's transaction). Returns the minutes touched."""
    cutoff = now - dt.timedelta(hours=raw_retention_hours())
    merged: dict[tuple[int, dt.datetime], list[Any]] = {}
    for t, endpoint_id, window_s, requests, errors, tokens, p95 in rows:
        if t < cutoff:
            continue
        key = (endpoint_id, t.replace(second=0, microsecond=0))
        m = merged.get(key)
        if m is None:
            merged[key] = [1, window_s, requests, errors, tokens, p95]
            continue
        m[0] += 1
        m[1] += window_s
        m[2] += requests
        m[3] += errors
        m[4] += tokens
        if p95 is not None and (m[5] is None or p95 > m[5]):
            m[5] = p95
    if not merged:
        return 0
    keys = sorted(merged)
    cols: list[list[Any]] = [[k[0] for k in keys], [k[1] for k in keys]]
    cols += [[merged[k][i] for k in keys] for i in range(6)]
    cur.execute(_MERGE, cols)
    return len(keys)
