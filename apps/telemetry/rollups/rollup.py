"""The per-minute rollups, recomputed incrementally for the minutes that received rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.telemetry import metrics
from apps.telemetry.batch import raw_retention_hours
from apps.telemetry.models import WindowSummary
from apps.telemetry.selectors.snapshot import SUMMARY_MINUTES, window_summary_figures


def _metric_rollup(kind: str, declared: tuple[metrics.Metric, ...]) -> str:
    """The upsert of a node's or module's per-minute rollups, each declared aggregate of each metric.
    A module's rollup keeps the node it was in at the end of the minute."""
    cols = [(col, f"{agg}({m.name})") for m in declared for col, agg in m.rollup_columns()]
    if kind == "node":
        keys, pick, group = "node_id, minute", "node_id, date_trunc('minute', time)", "GROUP BY 1, 2"
    else:
        keys = "module_id, node_id, minute"
        pick = "module_id, (array_agg(node_id ORDER BY time DESC))[1], date_trunc('minute', time)"
        group = "GROUP BY module_id, 3"
    updates = ["node_id = EXCLUDED.node_id"] if kind == "module" else []
    updates += [f"{c} = EXCLUDED.{c}" for c in ("samples", *(c for c, _ in cols))]
    return (f"INSERT INTO telemetry_{kind}rollup ({keys}, samples, {', '.join(c for c, _ in cols)})"
            f" SELECT {pick}, count(*), {', '.join(e for _, e in cols)}"
            f" FROM telemetry_{kind}sample WHERE time >= %s AND time < %s {group}"
            f" ON CONFLICT ({kind}_id, minute) DO UPDATE SET {', '.join(updates)}")


# kind -> the upsert recomputing the per-minute rollups of [start, end) from the raw rows.
_ROLLUPS: dict[str, tuple[str, ...]] = {
    "node": (_metric_rollup("node", metrics.NODE_METRICS),),
    "module": (_metric_rollup("module", metrics.MODULE_METRICS),),
    "tier": (
        """INSERT INTO telemetry_tierrollup (tier_id, minute, samples, window_s, queue_depth_mean, queue_depth_max,
               queue_depth_last, arrivals, completions, input_tokens, output_tokens)
           SELECT tier_id, date_trunc('minute', time), count(*), sum(window_s), avg(queue_depth), max(queue_depth),
               (array_agg(queue_depth ORDER BY time DESC))[1], sum(arrivals), sum(completions), sum(input_tokens),
               sum(output_tokens)
           FROM telemetry_tiersample WHERE time >= %s AND time < %s GROUP BY 1, 2
           ON CONFLICT (tier_id, minute) DO UPDATE SET samples = EXCLUDED.samples, window_s = EXCLUDED.window_s,
               queue_depth_mean = EXCLUDED.queue_depth_mean, queue_depth_max = EXCLUDED.queue_depth_max,
               queue_depth_last = EXCLUDED.queue_depth_last, arrivals = EXCLUDED.arrivals,
               completions = EXCLUDED.completions, input_tokens = EXCLUDED.input_tokens,
               output_tokens = EXCLUDED.output_tokens""",),
    "stage": (
        """INSERT INTO telemetry_stagerollup (tier_id, stage, minute, count, p50_ms, p95_ms, p99_ms, max_ms)
           SELECT tier_id, stage, date_trunc('minute', time), sum(count),
               CASE WHEN sum(count) > 0 THEN sum(p50_ms * count) / sum(count) ELSE avg(p50_ms) END,
               max(p95_ms), max(p99_ms), max(max_ms)
           FROM telemetry_stagesample WHERE time >= %s AND time < %s AND node_id IS NULL GROUP BY 1, 2, 3
           ON CONFLICT (tier_id, stage, minute) DO UPDATE SET count = EXCLUDED.count, p50_ms = EXCLUDED.p50_ms,
               p95_ms = EXCLUDED.p95_ms, p99_ms = EXCLUDED.p99_ms, max_ms = EXCLUDED.max_ms""",),
    # The gateway's per-node breakdown (stage samples naming a node), due with the stage minutes.
    "stagenode": (
        """INSERT INTO telemetry_stagenoderollup (node_id, tier_id, stage, minute, count, errors, p50_ms, p95_ms,
               p99_ms, max_ms)
           SELECT node_id, max(tier_id), stage, date_trunc('minute', time), sum(count), sum(errors),
               CASE WHEN sum(count) > 0 THEN sum(p50_ms * count) / sum(count) ELSE avg(p50_ms) END,
               max(p95_ms), max(p99_ms), max(max_ms)
           FROM telemetry_stagesample WHERE time >= %s AND time < %s AND node_id IS NOT NULL GROUP BY 1, 3, 4
           ON CONFLICT (node_id, stage, minute) DO UPDATE SET tier_id = EXCLUDED.tier_id, count = EXCLUDED.count,
               errors = EXCLUDED.errors, p50_ms = EXCLUDED.p50_ms, p95_ms = EXCLUDED.p95_ms,
               p99_ms = EXCLUDED.p99_ms, max_ms = EXCLUDED.max_ms""",),
    # Latency histograms: bucket counts added in SQL, per node (with the node's tier), then per tier
    # from the node minutes just written. Sparse arrays: buckets ascending, their counts beside them.
    "latency": (
        """INSERT INTO telemetry_nodelatencyrollup (node_id, tier_id, stage, minute, count, buckets, counts)
           SELECT node_id, tier_id, stage, minute, sum(c), array_agg(bucket ORDER BY bucket),
               array_agg(c ORDER BY bucket)
           FROM (SELECT s.node_id, n.tier_id, s.stage, date_trunc('minute', s.time) AS minute,
                     s.hist_offset + u.k - 1 AS bucket, sum(u.c)::bigint AS c
                 FROM telemetry_latencysample s JOIN inventory_node n ON n.id = s.node_id
                 CROSS JOIN LATERAL unnest(s.counts) WITH ORDINALITY AS u(c, k)
                 WHERE s.time >= %s AND s.time < %s AND u.c > 0 GROUP BY 1, 2, 3, 4, 5) b
           GROUP BY 1, 2, 3, 4
           ON CONFLICT (node_id, stage, minute) DO UPDATE SET tier_id = EXCLUDED.tier_id, count = EXCLUDED.count,
               buckets = EXCLUDED.buckets, counts = EXCLUDED.counts""",
        # A tier's minute is rewritten whole (a node that changed tiers leaves its old one).
        "DELETE FROM telemetry_tierlatencyrollup WHERE minute >= %s AND minute < %s",
        """INSERT INTO telemetry_tierlatencyrollup (tier_id, stage, minute, count, buckets, counts)
           SELECT tier_id, stage, minute, sum(c), array_agg(bucket ORDER BY bucket), array_agg(c ORDER BY bucket)
           FROM (SELECT r.tier_id, r.stage, r.minute, u.bucket, sum(u.c)::bigint AS c
                 FROM telemetry_nodelatencyrollup r CROSS JOIN LATERAL unnest(r.buckets, r.counts) AS u(bucket, c)
                 WHERE r.minute >= %s AND r.minute < %s GROUP BY 1, 2, 3, 4) b
           GROUP BY 1, 2, 3""",
    ),
}


# Rollups recomputed for the minutes noted under another kind (the writer notes raw tables' kinds).
_DUE_WITH = {"stagenode": "stage"}


def floor_minute(t: dt.datetime) -> dt.datetime:
    return t.replace(second=0, microsecond=0)


def _ranges(minutes: list[dt.datetime]) -> list[tuple[dt.datetime, dt.datetime]]:
    """Contiguous [start, end) ranges covering the given minutes."""
    out: list[tuple[dt.datetime, dt.datetime]] = []
    step = dt.timedelta(minutes=1)
    for m in sorted(set(minutes)):
        if out and out[-1][1] == m:
            out[-1] = (out[-1][0], m + step)
        else:
            out.append((m, m + step))
    return out


@transaction.atomic
def telemetry_rollup(*, now: dt.datetime | None = None, since: dt.datetime | None = None) -> dict[str, Any]:
    """Recompute the per-minute rollups of the minutes that received rows since the last run.

    The writer notes each (kind, minute) it stored rows for (``RollupDue``); this
    takes those notes and recomputes exactly those minutes, reading only the
    partitions that hold them; late batches (an agent resending its spool)
    are covered the same way. With ``since`` every minute from then to now is
    recomputed as well. Idempotent (upserts). The notes are read without a lock
    and deleted at the end only if the writer has not bumped them meanwhile, so
    the writer never waits for a rollup and no stored row is missed.
    """
    now = now or timezone.now()
    oldest = floor_minute(now - dt.timedelta(hours=raw_retention_hours()))
    due: dict[str, list[dt.datetime]] = {kind: [] for kind in _ROLLUPS}
    with connection.cursor() as cur:
        # Read without locking: the writer goes on noting minutes while this runs.
        cur.execute("SELECT id, version, kind, minute FROM telemetry_rollupdue")
        seen = cur.fetchall()
        for _id, _version, kind, minute in seen:
            if kind in due and minute >= oldest:
                due[kind].append(minute)
        if since is not None:
            start, end = floor_minute(max(since, oldest)), floor_minute(now) + dt.timedelta(minutes=1)
            every = [start + dt.timedelta(minutes=i) for i in range(int((end - start).total_seconds() // 60))]
            for minutes in due.values():
                minutes.extend(every)
        for kind, source in _DUE_WITH.items():
            due[kind] = list(due[source])
        rows: dict[str, int] = {}
        ranges: dict[str, int] = {}
        for kind, statements in _ROLLUPS.items():
            rows[f"{kind}rollup"] = 0
            spans = _ranges(due[kind])
            ranges[kind] = len(spans)
            for start, end in spans:
                for statement in statements:
                    cur.execute(statement, [start, end])
                    if not statement.startswith("DELETE"):
                        rows[f"{kind}rollup"] += cur.rowcount
        # Done with what was seen; a note bumped meanwhile (rows stored after the recompute read) stays.
        cur.execute("DELETE FROM telemetry_rollupdue d USING unnest(%s::int8[], %s::int8[]) AS s(id, version)"
                    " WHERE d.id = s.id AND d.version = s.version", [[r[0] for r in seen], [r[1] for r in seen]])
    # The snapshot's default window over the rollups just written: once here, not on every request.
    window_since, figures = window_summary_figures(now=now)
    WindowSummary.objects.update_or_create(minutes=SUMMARY_MINUTES, defaults={
        "since": window_since, "computed_at": now, "tiers": {str(tid): f for tid, f in figures.items()}})
    minutes = sorted({m for ms in due.values() for m in ms})
    return {"minutes": len(minutes), "start": minutes[0].isoformat() if minutes else None,
            "end": (minutes[-1] + dt.timedelta(minutes=1)).isoformat() if minutes else None,
            "ranges": ranges, "rows": rows}
