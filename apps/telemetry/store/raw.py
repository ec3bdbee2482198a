"""Storing buffered batches into the raw tables (the writer's pass), or a batch at once for in-process
callers: COPY of the raw rows into their time partitions, the latest-state upserts, the per-endpoint
minutes and the notes of the minutes the rollups must recompute, in one transaction per pass."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.agents.identity import AgentIdentity
from apps.telemetry import metrics
from apps.telemetry.batch import ParsedBatch, raw_retention_hours
from apps.telemetry.store import partitions
from apps.telemetry.store.buffer import STORED, IngestResult, counts, decode_payload, stored_result
from apps.telemetry.store.endpoints import endpoint_minutes_merge

# Columns and their PostgreSQL types, in the order of the rows the decoders build.
# Node and module metrics: as declared (apps.telemetry.metrics), after the keys.
NODE_COLS = ("time", "node_id", *metrics.names(metrics.NODE_METRICS))


NODE_TYPES = ("timestamptz", "int8", *(m.pg for m in metrics.NODE_METRICS))


MODULE_COLS = ("time", "module_id", "node_id", *metrics.names(metrics.MODULE_METRICS))


MODULE_TYPES = ("timestamptz", "int8", "int8", *(m.pg for m in metrics.MODULE_METRICS))


TIER_COLS = ("time", "tier_id", "window_s", "queue_depth", "arrivals", "completions", "input_tokens",
             "output_tokens")


TIER_TYPES = ("timestamptz", "int8", "float8", "int4", "int4", "int4", "int8", "int8")


STAGE_COLS = ("time", "tier_id", "stage", "window_s", "count", "p50_ms", "p95_ms", "p99_ms", "max_ms", "node_id",
              "errors")


STAGE_TYPES = ("timestamptz", "int8", "text", "float8", "int4", "float8", "float8", "float8", "float8", "int8",
               "int4")


LATENCY_COLS = ("time", "node_id", "stage", "hist_offset", "counts", "count")


LATENCY_TYPES = ("timestamptz", "int8", "text", "int4", "int4[]", "int4")


# kind -> (raw table, columns, types); the kind names the rollup (RollupDue.kind).
KINDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "node": ("telemetry_nodesample", NODE_COLS, NODE_TYPES),
    "module": ("telemetry_modulesample", MODULE_COLS, MODULE_TYPES),
    "tier": ("telemetry_tiersample", TIER_COLS, TIER_TYPES),
    "stage": ("telemetry_stagesample", STAGE_COLS, STAGE_TYPES),
    "latency": ("telemetry_latencysample", LATENCY_COLS, LATENCY_TYPES),
}


_TAKE = ("SELECT id, payload, received_at FROM telemetry_ingestbatch WHERE stored_at IS NULL ORDER BY id"
         " LIMIT %s FOR UPDATE SKIP LOCKED")


@dataclass
class StoreResult:
    batches: int = 0
    rows: int = 0
    expired_rows: int = 0
    partitions_made: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"batches": self.batches, "rows": self.rows, "expired_rows": self.expired_rows,
                "partitions_made": self.partitions_made}


def pending_count() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM telemetry_ingestbatch WHERE stored_at IS NULL")
        return int(cur.fetchone()[0])


def telemetry_store_pending(*, limit: int = 1000, now: dt.datetime | None = None) -> StoreResult:
    """One pass of the writer: store up to ``limit`` buffered batches in one transaction."""
    try:
        return _store_pending(limit, now)
    except BaseException:
        forget_partitions()  # partitions made in the rolled-back transaction are gone
        raise


def _store_pending(limit: int, now: dt.datetime | None) -> StoreResult:
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(_TAKE, [limit])
        taken = cur.fetchall()
        if not taken:
            return StoreResult()
        now = now or timezone.now()
        rows: dict[str, list[Any]] = {kind: [] for kind in KINDS}
        seen: dict[str, dict[int, dt.datetime]] = {"node": {}, "module": {}, "tier": {}}
        endpoint_rows: list[Any] = []
        holder_rows: list[Any] = []
        for _id, payload, received_at in taken:
            data = decode_payload(bytes(payload))
            endpoint_rows.extend(data.get("endpoint") or ())
            holder_rows.extend(data.get("holders") or ())
            for kind in KINDS:
                items = data.get(kind) or ()
                rows[kind].extend(items)
                if kind in seen:
                    _note_seen(seen[kind], items, received_at)
        result = _store_rows(cur, rows, seen, now)
        endpoint_minutes_merge(cur, endpoint_rows, now)
        _upsert_holders(cur, holder_rows)
        ids = [t[0] for t in taken]
        cur.execute("UPDATE telemetry_ingestbatch SET stored_at = %s, payload = NULL WHERE id = ANY(%s)", [now, ids])
        result.batches = len(ids)
    return result


def _note_seen(last: dict[int, dt.datetime], items: Any, received_at: dt.datetime) -> None:
    """When each node, module or tier was last heard from: the receipt of its newest batch."""
    for r in items:
        if r[1] not in last or last[r[1]] < received_at:
            last[r[1]] = received_at


def _store_rows(cur: Any, rows: dict[str, list[Any]], seen: dict[str, dict[int, dt.datetime]],
                now: dt.datetime) -> StoreResult:
    """COPY the rows, upsert the latest state, note the minutes due for rollup (the caller's transaction)."""
    result = StoreResult()
    cutoff = now - dt.timedelta(hours=raw_retention_hours())
    # Stage rows buffered before the per-node breakdown existed have no node and no errors.
    rows["stage"] = [r if len(r) == len(STAGE_COLS) else (*r, None, 0) for r in rows["stage"]]
    # Each kind's distinct sample times: a node's modules share its samples' times, so the partitions
    # and the minutes due are worked out from a fifth of the rows or fewer.
    times: dict[str, set[dt.datetime]] = {}
    for kind, (table, cols, types) in KINDS.items():
        kept = [r for r in rows[kind] if r[0] >= cutoff]
        result.expired_rows += len(rows[kind]) - len(kept)
        rows[kind] = kept
        if kept:
            times[kind] = {r[0] for r in kept}
            result.partitions_made += _ensure_partitions(cur, table, times[kind])
            _copy(cur, table, cols, types, kept)
            result.rows += len(kept)
    _upsert_status(cur, "telemetry_nodestatus", "node_id", NODE_COLS, NODE_TYPES, _latest(rows["node"], 1),
                   seen["node"], "inventory_node")
    _upsert_status(cur, "telemetry_modulestatus", "module_id", MODULE_COLS, MODULE_TYPES,
                   _latest(rows["module"], 1), seen["module"], "inventory_module")
    _upsert_status(cur, "telemetry_tierstatus", "tier_id", TIER_COLS, TIER_TYPES, _latest(rows["tier"], 1),
                   seen["tier"], "inventory_tier")
    _mark_due(cur, times)
    return result


_INSERT_STORED = (
    "INSERT INTO telemetry_ingestbatch (scope, batch_id, token_id, received_at, min_time, max_time,"
    " node_samples, module_samples, tier_samples, stage_samples, stored_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (scope, batch_id) DO NOTHING RETURNING id"
)


def telemetry_store_now(*, identity: AgentIdentity, parsed: ParsedBatch, now: dt.datetime | None = None
                        ) -> IngestResult:
    """Accept and store a validated batch at once, in one transaction, bypassing the buffer
    (in-process callers: the demo seed, tests, benchmarks). A batch id already taken writes nothing."""
    now = now or timezone.now()
    try:
        with transaction.atomic(), connection.cursor() as cur:
            n = counts(parsed)
            cur.execute(_INSERT_STORED, [identity.scope, parsed.batch_id, identity.token_id, now, parsed.min_time,
                                         parsed.max_time, n["node_samples"], n["module_samples"],
                                         n["tier_samples"], n["stage_samples"], now])
            if cur.fetchone() is None:
                cur.execute(STORED, [[identity.scope], [parsed.batch_id]])
                row = cur.fetchone()
                assert row is not None
                return stored_result(row)
            rows = {"node": parsed.node_rows, "module": parsed.module_rows, "tier": parsed.tier_rows,
                    "stage": parsed.stage_rows, "latency": parsed.latency_rows}
            seen: dict[str, dict[int, dt.datetime]] = {"node": {}, "module": {}, "tier": {}}
            for kind, last in seen.items():
                _note_seen(last, rows[kind], now)
            _store_rows(cur, {k: list(v) for k, v in rows.items()}, seen, now)
            endpoint_minutes_merge(cur, parsed.endpoint_rows, now)
            _upsert_holders(cur, parsed.holder_rows)
    except BaseException:
        forget_partitions()
        raise
    return IngestResult(batch_id=parsed.batch_id, duplicate=False, accepted=n)


# Partition starts known to exist, per table (a cache: a miss costs one catalog query).
_known_partitions: dict[str, set[dt.datetime]] = {}


def _ensure_partitions(cur: Any, table: str, times: set[dt.datetime]) -> int:
    hours = partitions.partition_hours()
    known = _known_partitions.setdefault(table, set())
    if known.issuperset(partitions.starts_between(min(times), max(times), hours)):
        return 0  # every partition from the first sample's to the last's exists (the usual case)
    needed = {partitions.partition_start(t, hours) for t in times}
    missing = needed - known
    if not missing:
        return 0
    made = partitions.create(cur, table, missing, hours)
    known.update(missing)
    return len(made)


def forget_partitions() -> None:
    """After partitions were dropped (retention, tests)."""
    _known_partitions.clear()


def _copy(cur: Any, table: str, cols: tuple[str, ...], types: tuple[str, ...], rows: list[Any]) -> None:
    """COPY rows into ``table`` (psycopg 3, binary format), inside the caller's transaction."""
    with cur.cursor.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)


def _latest(rows: list[Any], key: int) -> list[Any]:
    """The newest row per entity (column ``key``), sorted by entity (upserts cannot deadlock)."""
    best: dict[Any, Any] = {}
    for row in rows:
        cur = best.get(row[key])
        if cur is None or row[0] >= cur[0]:
            best[row[key]] = row
    return [best[k] for k in sorted(best)]


def _upsert_status(cur: Any, table: str, pk: str, cols: tuple[str, ...], types: tuple[str, ...],
                   rows: list[Any], seen: dict[int, dt.datetime], parent: str) -> None:
    """Latest state, only ever moving forward in time; last_seen (receipt) always advances.
    Rows of a node, module or tier deleted since its batch was accepted are left out (its
    raw rows stay, as orphans do), so a deletion never blocks the writer."""
    if not rows:
        return
    values = [list(c) for c in zip(*rows, strict=True)]
    last_seen = [seen[r[1]] for r in rows]
    value_cols = [c for c in cols if c not in ("time", pk)]
    sets = ", ".join(
        [f"{c} = CASE WHEN EXCLUDED.time >= s.time THEN EXCLUDED.{c} ELSE s.{c} END" for c in value_cols]
        + ["time = GREATEST(s.time, EXCLUDED.time)", "last_seen = GREATEST(s.last_seen, EXCLUDED.last_seen)"]
    )
    unnest = ", ".join(f"%s::{t}[]" for t in (*types, "timestamptz"))
    names = ", ".join((*cols, "last_seen"))
    cur.execute(
        f"INSERT INTO {table} AS s ({names})"
        f" SELECT u.* FROM unnest({unnest}) AS u({names}) JOIN {parent} p ON p.id = u.{pk}"
        f" ORDER BY u.{pk} ON CONFLICT ({pk}) DO UPDATE SET {sets}",
        [*values, last_seen],
    )


def _upsert_holders(cur: Any, rows: list[Any]) -> None:
    """Each node's newest list of the processes holding its modules, only ever moving forward in time
    (rows of a node deleted since are left out, as for its status)."""
    latest = _latest(rows, 1)
    if not latest:
        return
    times, nodes, holders = (list(c) for c in zip(*latest, strict=True))
    cur.execute(
        "INSERT INTO telemetry_nodeholders AS s (node_id, time, holders)"
        " SELECT u.node_id, u.time, u.holders::jsonb FROM unnest(%s::timestamptz[], %s::int8[], %s::text[])"
        " AS u(time, node_id, holders) JOIN inventory_node p ON p.id = u.node_id ORDER BY u.node_id"
        " ON CONFLICT (node_id) DO UPDATE SET holders = EXCLUDED.holders, time = EXCLUDED.time"
        " WHERE EXCLUDED.time >= s.time", [times, nodes, holders])


def _mark_due(cur: Any, times: dict[str, set[dt.datetime]]) -> None:
    """Note the minutes of each kind's samples as due for its rollup."""
    kinds: list[str] = []
    minutes: list[dt.datetime] = []
    for kind, distinct in times.items():
        for minute in sorted({t.replace(second=0, microsecond=0) for t in distinct}):
            kinds.append(kind)
            minutes.append(minute)
    if kinds:
        cur.execute("INSERT INTO telemetry_rollupdue (kind, minute) SELECT * FROM unnest(%s::text[],"
                    " %s::timestamptz[]) ORDER BY 1, 2 ON CONFLICT (kind, minute) DO UPDATE"
                    " SET version = telemetry_rollupdue.version + 1", [kinds, minutes])
