"""Writes of the telemetry app: agent tokens, ingest, rollups, retention and
the command channel. Keyword-only, typed, atomic; operator-visible actions
are audited in their transaction."""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Min, Q
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.common.errors import Conflict
from apps.inventory.models import Node
from apps.telemetry.authentication import hash_key
from apps.telemetry.choices import ACK_STATES, FINAL_COMMAND_STATES, AgentKind, CommandState
from apps.telemetry.models import AgentToken, IngestBatch, NodeCommand
from apps.telemetry.validation import ParsedBatch, check_batch_id, parse_batch, raw_retention_hours

logger = logging.getLogger(__name__)

# ---- agent tokens -----------------------------------------------------------------------------


@transaction.atomic
def agent_token_issue(*, kind: str, node: Node | None, actor: Any, note: str = "",
                      source: str = Source.API) -> tuple[AgentToken, str]:
    """Create a token; the plaintext key is returned once and never stored."""
    if kind not in AgentKind.values:
        raise ValueError(f"unknown agent kind {kind!r}")
    if (kind == AgentKind.NODE) != (node is not None):
        raise ValueError("a node token needs a node; a gateway token has none")
    key = secrets.token_urlsafe(32)
    token = AgentToken.objects.create(
        kind=kind, node=node, key_hash=hash_key(key), key_prefix=key[:8], note=note,
        created_by=str(getattr(actor, "username", None) or actor or "system")[:150],
    )
    audit_record(actor=actor, action="agent_token.issue", target=token, source=source,
                 changes={"kind": [None, kind], "node": [None, node.pk if node else None]})
    return token, key


@transaction.atomic
def agent_token_revoke(*, token: AgentToken, actor: Any, source: str = Source.API) -> AgentToken:
    updated = AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    if updated:
        audit_record(actor=actor, action="agent_token.revoke", target=token, source=source)
    return token


# ---- ingest -----------------------------------------------------------------------------------

# Columns and their PostgreSQL types, in the order of the rows ``validation.parse_batch`` builds.
NODE_COLS = ("time", "node_id", "cpu_util", "mem_util", "load1", "in_flight", "threads")
NODE_TYPES = ("timestamptz", "int8", "float8", "float8", "float8", "int4", "int4")
MODULE_COLS = ("time", "module_id", "node_id", "util", "temp_c", "power_w", "link_width", "link_width_expected",
               "ecc_corrected", "ecc_uncorrected", "errors")
MODULE_TYPES = ("timestamptz", "int8", "int8", "float8", "float8", "float8", "int2", "int2", "int8", "int8", "int8")
TIER_COLS = ("time", "tier_id", "window_s", "queue_depth", "arrivals", "completions", "input_tokens",
             "output_tokens")
TIER_TYPES = ("timestamptz", "int8", "float8", "int4", "int4", "int4", "int8", "int8")
STAGE_COLS = ("time", "tier_id", "stage", "window_s", "count", "p50_ms", "p95_ms", "p99_ms", "max_ms")
STAGE_TYPES = ("timestamptz", "int8", "text", "float8", "int4", "float8", "float8", "float8", "float8")


@dataclass
class IngestResult:
    batch: IngestBatch
    duplicate: bool

    def as_dict(self) -> dict[str, Any]:
        return {"batch_id": self.batch.batch_id, "duplicate": self.duplicate, "accepted": self.batch.accepted()}


def telemetry_ingest(*, token: AgentToken, payload: Any, now: dt.datetime | None = None) -> IngestResult:
    """Validate the whole batch, then write it in one transaction, or nothing.

    Raises ``BatchRejected`` (400/403/413). A batch id already stored for this
    token's scope (its node, or the gateway) is answered as a duplicate and
    writes nothing, also when two copies race: the batch row goes in first
    with ON CONFLICT DO NOTHING, and the loser waits for the winner's commit.
    """
    now = now or timezone.now()
    batch_id = check_batch_id(payload)
    stored = IngestBatch.objects.filter(scope=token.scope, batch_id=batch_id).first()
    if stored is not None:
        return IngestResult(batch=stored, duplicate=True)
    parsed = parse_batch(payload, token=token, now=now)
    with transaction.atomic():
        batch_pk = _insert_batch(token, parsed, now)
        if batch_pk is None:
            duplicate = True
        else:
            duplicate = False
            _write_samples(parsed, now)
    batch = IngestBatch.objects.get(scope=token.scope, batch_id=batch_id)
    return IngestResult(batch=batch, duplicate=duplicate)


def _insert_batch(token: AgentToken, parsed: ParsedBatch, now: dt.datetime) -> int | None:
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO telemetry_ingestbatch (scope, batch_id, token_id, received_at, min_time, max_time,"
            " node_samples, module_samples, tier_samples, stage_samples)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (scope, batch_id) DO NOTHING RETURNING id",
            [token.scope, parsed.batch_id, token.pk, now, parsed.min_time, parsed.max_time,
             len(parsed.node_rows), len(parsed.module_rows), len(parsed.tier_rows), len(parsed.stage_rows)],
        )
        row = cur.fetchone()
    return row[0] if row else None


def _copy(cur: Any, table: str, cols: tuple[str, ...], types: tuple[str, ...],
          rows: list[tuple[Any, ...]]) -> None:
    """COPY rows into ``table`` (psycopg 3, binary format), inside the caller's transaction."""
    if not rows:
        return
    with cur.cursor.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)


def _latest(rows: list[tuple[Any, ...]], key: int) -> list[tuple[Any, ...]]:
    """The newest row per entity, in entity order (a fixed lock order: concurrent upserts cannot deadlock)."""
    best: dict[Any, tuple[Any, ...]] = {}
    for row in rows:
        cur = best.get(row[key])
        if cur is None or row[0] >= cur[0]:
            best[row[key]] = row
    return [best[k] for k in sorted(best)]


def _upsert_status(cur: Any, table: str, pk: str, cols: tuple[str, ...], types: tuple[str, ...],
                   rows: list[tuple[Any, ...]], now: dt.datetime) -> None:
    """Latest state, only ever moving forward in time; last_seen always advances."""
    if not rows:
        return
    columns = list(zip(*rows, strict=True))
    values = [list(c) for c in columns]
    value_cols = [c for c in cols if c not in ("time", pk)]
    sets = ", ".join(
        [f"{c} = CASE WHEN EXCLUDED.time >= s.time THEN EXCLUDED.{c} ELSE s.{c} END" for c in value_cols]
        + ["time = GREATEST(s.time, EXCLUDED.time)", "last_seen = GREATEST(s.last_seen, EXCLUDED.last_seen)"]
    )
    unnest = ", ".join(f"%s::{t}[]" for t in types)
    cur.execute(
        f"INSERT INTO {table} AS s ({', '.join(cols)}, last_seen)"
        f" SELECT *, %s::timestamptz FROM unnest({unnest})"
        f" ON CONFLICT ({pk}) DO UPDATE SET {sets}",
        [now, *values],
    )


def _write_samples(parsed: ParsedBatch, now: dt.datetime) -> None:
    with connection.cursor() as cur:
        _copy(cur, "telemetry_nodesample", NODE_COLS, NODE_TYPES, parsed.node_rows)
        _copy(cur, "telemetry_modulesample", MODULE_COLS, MODULE_TYPES, parsed.module_rows)
        _copy(cur, "telemetry_tiersample", TIER_COLS, TIER_TYPES, parsed.tier_rows)
        _copy(cur, "telemetry_stagesample", STAGE_COLS, STAGE_TYPES, parsed.stage_rows)
        _upsert_status(cur, "telemetry_nodestatus", "node_id", NODE_COLS, NODE_TYPES,
                       _latest(parsed.node_rows, 1), now)
        _upsert_status(cur, "telemetry_modulestatus", "module_id", MODULE_COLS, MODULE_TYPES,
                       _latest(parsed.module_rows, 1), now)
        _upsert_status(cur, "telemetry_tierstatus", "tier_id", TIER_COLS, TIER_TYPES,
                       _latest(parsed.tier_rows, 1), now)


# ---- rollups and retention ----------------------------------------------------------------------

_ROLLUPS = [
    (
        "telemetry_noderollup",
        """INSERT INTO telemetry_noderollup (node_id, minute, samples, cpu_util_mean, cpu_util_max, mem_util_mean,
               mem_util_max, load1_mean, in_flight_mean, in_flight_max, threads_max)
           SELECT node_id, date_trunc('minute', time), count(*), avg(cpu_util), max(cpu_util), avg(mem_util),
               max(mem_util), avg(load1), avg(in_flight), max(in_flight), max(threads)
           FROM telemetry_nodesample WHERE time >= %s AND time < %s GROUP BY 1, 2
           ON CONFLICT (node_id, minute) DO UPDATE SET samples = EXCLUDED.samples,
               cpu_util_mean = EXCLUDED.cpu_util_mean, cpu_util_max = EXCLUDED.cpu_util_max,
               mem_util_mean = EXCLUDED.mem_util_mean, mem_util_max = EXCLUDED.mem_util_max,
               load1_mean = EXCLUDED.load1_mean, in_flight_mean = EXCLUDED.in_flight_mean,
               in_flight_max = EXCLUDED.in_flight_max, threads_max = EXCLUDED.threads_max""",
    ),
    (
        "telemetry_modulerollup",
        """INSERT INTO telemetry_modulerollup (module_id, node_id, minute, samples, util_mean, util_max, temp_c_mean,
               temp_c_max, power_w_mean, power_w_max, link_width_min, link_width_expected, ecc_corrected_max,
               ecc_uncorrected_max, errors_max)
           SELECT module_id, (array_agg(node_id ORDER BY time DESC))[1], date_trunc('minute', time), count(*),
               avg(util), max(util), avg(temp_c), max(temp_c), avg(power_w), max(power_w), min(link_width),
               max(link_width_expected), max(ecc_corrected), max(ecc_uncorrected), max(errors)
           FROM telemetry_modulesample WHERE time >= %s AND time < %s GROUP BY module_id, 3
           ON CONFLICT (module_id, minute) DO UPDATE SET node_id = EXCLUDED.node_id, samples = EXCLUDED.samples,
               util_mean = EXCLUDED.util_mean, util_max = EXCLUDED.util_max, temp_c_mean = EXCLUDED.temp_c_mean,
               temp_c_max = EXCLUDED.temp_c_max, power_w_mean = EXCLUDED.power_w_mean,
               power_w_max = EXCLUDED.power_w_max, link_width_min = EXCLUDED.link_width_min,
               link_width_expected = EXCLUDED.link_width_expected,
               ecc_corrected_max = EXCLUDED.ecc_corrected_max, ecc_uncorrected_max = EXCLUDED.ecc_uncorrected_max,
               errors_max = EXCLUDED.errors_max""",
    ),
    (
        "telemetry_tierrollup",
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
               output_tokens = EXCLUDED.output_tokens""",
    ),
    (
        "telemetry_stagerollup",
        """INSERT INTO telemetry_stagerollup (tier_id, stage, minute, count, p50_ms, p95_ms, p99_ms, max_ms)
           SELECT tier_id, stage, date_trunc('minute', time), sum(count),
               CASE WHEN sum(count) > 0 THEN sum(p50_ms * count) / sum(count) ELSE avg(p50_ms) END,
               max(p95_ms), max(p99_ms), max(max_ms)
           FROM telemetry_stagesample WHERE time >= %s AND time < %s GROUP BY 1, 2, 3
           ON CONFLICT (tier_id, stage, minute) DO UPDATE SET count = EXCLUDED.count, p50_ms = EXCLUDED.p50_ms,
               p95_ms = EXCLUDED.p95_ms, p99_ms = EXCLUDED.p99_ms, max_ms = EXCLUDED.max_ms""",
    ),
]


def floor_minute(t: dt.datetime) -> dt.datetime:
    return t.replace(second=0, microsecond=0)


def rollup_lookback_minutes() -> int:
    return int(getattr(settings, "TELEMETRY_ROLLUP_LOOKBACK_MINUTES", 5))


@transaction.atomic
def telemetry_rollup(*, now: dt.datetime | None = None, since: dt.datetime | None = None) -> dict[str, Any]:
    """Recompute the per-minute rollups of every minute that may have changed.

    Idempotent (upserts): the last ``TELEMETRY_ROLLUP_LOOKBACK_MINUTES`` minutes
    (the current, partial minute included, so the dashboard lags by at most one
    run), plus every minute a batch received in that time reached back to (an
    agent resending buffered samples after an outage).
    """
    now = now or timezone.now()
    recent = now - dt.timedelta(minutes=rollup_lookback_minutes())
    start = since or recent
    late = IngestBatch.objects.filter(received_at__gte=recent).aggregate(t=Min("min_time"))["t"]
    if late is not None and late < start:
        start = late
    start = floor_minute(max(start, now - dt.timedelta(hours=raw_retention_hours())))
    end = floor_minute(now) + dt.timedelta(minutes=1)
    rows: dict[str, int] = {}
    with connection.cursor() as cur:
        for table, sql in _ROLLUPS:
            cur.execute(sql, [start, end])
            rows[table.removeprefix("telemetry_")] = cur.rowcount
    return {"start": start.isoformat(), "end": end.isoformat(), "rows": rows}


def rollup_retention_days() -> float:
    return float(getattr(settings, "TELEMETRY_ROLLUP_RETENTION_DAYS", 30))


_RAW_TABLES = ("telemetry_nodesample", "telemetry_modulesample", "telemetry_tiersample", "telemetry_stagesample")
_ROLLUP_TABLES = ("telemetry_noderollup", "telemetry_modulerollup", "telemetry_tierrollup", "telemetry_stagerollup")


@transaction.atomic
def telemetry_retention(*, now: dt.datetime | None = None) -> dict[str, int]:
    """Delete raw samples and batch ids past the raw retention, rollups and
    finished commands past the rollup retention; expire overdue commands."""
    now = now or timezone.now()
    raw_cutoff = now - dt.timedelta(hours=raw_retention_hours())
    rollup_cutoff = now - dt.timedelta(days=rollup_retention_days())
    deleted: dict[str, int] = {}
    with connection.cursor() as cur:
        for table in _RAW_TABLES:
            cur.execute(f"DELETE FROM {table} WHERE time < %s", [raw_cutoff])
            deleted[table.removeprefix("telemetry_")] = cur.rowcount
        for table in _ROLLUP_TABLES:
            cur.execute(f"DELETE FROM {table} WHERE minute < %s", [rollup_cutoff])
            deleted[table.removeprefix("telemetry_")] = cur.rowcount
    deleted["ingestbatch"] = IngestBatch.objects.filter(received_at__lt=raw_cutoff).delete()[0]
    deleted["nodecommand"] = NodeCommand.objects.filter(
        state__in=FINAL_COMMAND_STATES, finished_at__lt=rollup_cutoff
    ).delete()[0]
    deleted["expired_commands"] = NodeCommand.objects.filter(
        state__in=[CommandState.PENDING, CommandState.DELIVERED], expires_at__lt=now
    ).update(state=CommandState.EXPIRED, finished_at=now)
    return deleted


# ---- command channel ----------------------------------------------------------------------------

_WAKE_KEY = "telemetry:commands:{node_id}"
_DB_RECHECK_S = 5.0


def _wake(node_id: int) -> None:
    """Tell long-polls of ``node_id`` to look again (a best-effort hint in Redis)."""
    try:
        cache.set(_WAKE_KEY.format(node_id=node_id), uuid.uuid4().hex, timeout=600)
    except Exception as exc:  # the hint is optional; polls still recheck the DB every few seconds
        logger.warning("could not signal commands for node %s: %s", node_id, exc)


def _wake_marker(node_id: int) -> Any:
    try:
        return cache.get(_WAKE_KEY.format(node_id=node_id))
    except Exception as exc:
        logger.warning("could not read the command signal of node %s: %s", node_id, exc)
        return None


@transaction.atomic
def node_command_send(*, node: Node, kind: str, args: dict[str, Any] | None, actor: Any, reason: str = "",
                      expires_at: dt.datetime | None = None, source: str = Source.API) -> NodeCommand:
    """Queue a command for ``node``'s agent; any kind is accepted (an agent answers "unknown")."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    command = NodeCommand.objects.create(
        node=node, kind=kind, args=args or {}, reason=reason, expires_at=expires_at, created_by=user,
        created_by_name=(user.get_username() if user else str(actor or "system"))[:150],
    )
    event = audit_record(actor=actor, action="node_command.send", target=node, reason=reason, source=source,
                         changes={"command": [None, command.pk], "kind": [None, kind], "args": [None, args or {}]},
                         related=command)
    NodeCommand.objects.filter(pk=command.pk).update(audit_event=event)
    command.audit_event = event
    node_id = node.pk
    transaction.on_commit(lambda: _wake(node_id))
    return command


def command_redeliver_after_s() -> float:
    return float(getattr(settings, "TELEMETRY_COMMAND_REDELIVER_AFTER_S", 60))


def node_command_claim(*, node: Node, limit: int = 50) -> list[NodeCommand]:
    """Pending commands of ``node``, oldest first, marked delivered (safe with concurrent polls).

    Delivery is at-least-once: a command delivered but not acknowledged within
    TELEMETRY_COMMAND_REDELIVER_AFTER_S (an agent that died between fetch and
    ack) is delivered again. Agents act on commands idempotently by id.
    """
    now = timezone.now()
    stale = now - dt.timedelta(seconds=command_redeliver_after_s())
    with transaction.atomic():
        commands = list(
            NodeCommand.objects.select_for_update(skip_locked=True)
            .filter(Q(state=CommandState.PENDING) | Q(state=CommandState.DELIVERED, delivered_at__lt=stale), node=node)
            .exclude(expires_at__lte=now)
            .order_by("created_at", "id")[:limit]
        )
        if commands:
            NodeCommand.objects.filter(pk__in=[c.pk for c in commands]).update(
                state=CommandState.DELIVERED, delivered_at=now
            )
            for c in commands:
                c.state, c.delivered_at = CommandState.DELIVERED, now
    return commands


def node_commands_wait(*, node: Node, wait_s: float, poll_s: float = 0.25) -> list[NodeCommand]:
    """Long-poll: claim pending commands, waiting up to ``wait_s`` for one to arrive.

    While waiting it watches a Redis hint set on commit of ``node_command_send``
    and rechecks the database every few seconds; between checks it gives its
    database connection back, so idle polls of a whole fleet hold none.
    """
    deadline = time.monotonic() + wait_s
    marker = _wake_marker(node.pk)
    commands = node_command_claim(node=node)
    last_db = time.monotonic()
    while not commands and time.monotonic() < deadline:
        if not connection.in_atomic_block:
            connection.close()
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
        current = _wake_marker(node.pk)
        now = time.monotonic()
        if current != marker or now - last_db >= _DB_RECHECK_S or now >= deadline:
            marker, last_db = current, now
            commands = node_command_claim(node=node)
    return commands


@transaction.atomic
def node_command_ack(*, node: Node, command_id: int, status: str, result: dict[str, Any] | None) -> NodeCommand:
    """Record the agent's answer. The same answer twice is accepted; a different
    answer to a finished command is a conflict. Another node's command does not exist."""
    if status not in ACK_STATES:
        raise ValueError(f"status must be one of {', '.join(ACK_STATES)}")
    command = NodeCommand.objects.select_for_update().filter(node=node, pk=command_id).first()
    if command is None:
        raise NodeCommand.DoesNotExist(f"no command {command_id} for {node.hostname}")
    if command.state in FINAL_COMMAND_STATES:
        if command.state == status:
            return command
        raise Conflict(f"command {command_id} already finished as {command.state}")
    before = command.state
    now = timezone.now()
    command.state = status
    command.result = result or {}
    command.finished_at = now
    command.delivered_at = command.delivered_at or now
    command.save(update_fields=["state", "result", "finished_at", "delivered_at"])
    audit_record(actor=f"agent:{node.hostname}", action="node_command.finish", target=node, source=Source.SYSTEM,
                 changes={"command": [command.pk, command.pk], "state": [before, status]}, related=command)
    return command
