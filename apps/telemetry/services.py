"""Writes of the telemetry app: ingest, rollups and retention. Keyword-only, typed, atomic."""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Any

import msgspec
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.agents.identity import AgentIdentity, identities, sync_query
from apps.agents.models import AgentToken
from apps.agents.services import identity_of, node_commands_retention
from apps.common.throttling import LocalWindow
from apps.telemetry import metrics, partitions, selectors
from apps.telemetry.decoder import decode, load_json
from apps.telemetry.ingest import (
    KINDS,
    IngestResult,
    forget_partitions,
    stored_duplicate_of,
    telemetry_accept,
    telemetry_store_now,
)
from apps.telemetry.models import IngestBatch, WindowSummary
from apps.telemetry.validation import BatchRejected, ParsedBatch, raw_retention_hours

logger = logging.getLogger(__name__)

# ---- ingest -----------------------------------------------------------------------------------


_rates = LocalWindow()


def telemetry_rate_refusal(identity: AgentIdentity, now: float | None = None) -> tuple[dict[str, Any], int] | None:
    """None while ``identity``'s key is within ``settings.TELEMETRY_RATE`` (counted in this web
    process), else the 429 body and the seconds to its Retry-After."""
    rate = getattr(settings, "TELEMETRY_RATE", "")
    wait = _rates.hit(f"agent:{identity.token_id}", rate, now)
    if wait is None:
        return None
    seconds = max(1, math.ceil(wait))
    return {"detail": f"telemetry limit of {rate} reached for this agent key; retry in {seconds} s"}, seconds


def telemetry_receive(*, identity: AgentIdentity, body: bytes, now: dt.datetime | None = None) -> IngestResult:
    """Validate a batch (the JSON body) whole and put it into the durable buffer; the
    writer stores it. Raises ``BatchRejected`` (400/403/413), except for a resend of a
    batch id already accepted, which is answered as a duplicate whatever it holds now."""
    now = now or timezone.now()
    parsed = _validated(identity, body, now)
    if isinstance(parsed, IngestResult):
        return parsed
    identities.note_use(identity, now)
    return telemetry_accept(identity=identity, parsed=parsed, now=now)


def _validated(identity: AgentIdentity, body: bytes, now: dt.datetime) -> ParsedBatch | IngestResult:
    if identities.due():
        identities.refresh(sync_query)
    try:
        return decode(body, identity=identity, tiers=identities.tiers() or _tiers(), now=now)
    except BatchRejected as exc:
        if exc.versions is not None:
            raise  # a contract version this server does not speak is refused first, resend or not
        try:
            stored = stored_duplicate_of(load_json(body), identity)
        except BatchRejected:
            stored = None
        if stored is not None:
            return stored
        raise


def _tiers() -> dict[str, int]:
    return dict(sync_query("SELECT kind, id FROM inventory_tier", []))


def telemetry_ingest(*, token: AgentToken | AgentIdentity, payload: Any, now: dt.datetime | None = None
                     ) -> IngestResult:
    """In-process ingest (the demo seed, tests, benchmarks): validated like
    ``POST /api/v1/telemetry/``, then stored at once in one transaction instead of
    through the buffer and the writer. Raises ``BatchRejected``."""
    now = now or timezone.now()
    identity = token if isinstance(token, AgentIdentity) else identity_of(token)
    parsed = _validated(identity, msgspec.json.encode(payload), now)
    if isinstance(parsed, IngestResult):
        return parsed
    return telemetry_store_now(identity=identity, parsed=parsed, now=now)


# ---- rollups (incremental) and retention (partitions) --------------------------------------------

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
    window_since, figures = selectors.window_summary_figures(now=now)
    WindowSummary.objects.update_or_create(minutes=selectors.SUMMARY_MINUTES, defaults={
        "since": window_since, "computed_at": now, "tiers": {str(tid): f for tid, f in figures.items()}})
    minutes = sorted({m for ms in due.values() for m in ms})
    return {"minutes": len(minutes), "start": minutes[0].isoformat() if minutes else None,
            "end": (minutes[-1] + dt.timedelta(minutes=1)).isoformat() if minutes else None,
            "ranges": ranges, "rows": rows}


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
