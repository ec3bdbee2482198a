"""Writes of the telemetry app: agent tokens, ingest, rollups, retention and
the command channel. Keyword-only, typed, atomic; operator-visible actions
are audited in their transaction."""

from __future__ import annotations

import datetime as dt
import logging
import math
import secrets
import time
import uuid
from typing import Any

import msgspec
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.models import AuditEvent
from apps.audit.services import audit_record
from apps.common.errors import Conflict
from apps.common.throttling import LocalWindow
from apps.inventory.models import Module, Node
from apps.telemetry import metrics, partitions, selectors
from apps.telemetry.choices import ACK_STATES, FINAL_COMMAND_STATES, AgentKind, CommandState
from apps.telemetry.decoder import decode, load_json
from apps.telemetry.identity import AgentIdentity, hash_key, identities
from apps.telemetry.ingest import (
    KINDS,
    IngestResult,
    forget_partitions,
    stored_duplicate_of,
    telemetry_accept,
    telemetry_store_now,
)
from apps.telemetry.models import AgentToken, IngestBatch, NodeCommand, WindowSummary
from apps.telemetry.validation import BatchRejected, ParsedBatch, raw_retention_hours

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
        key_hash = token.key_hash
        transaction.on_commit(lambda: identities.forget(key_hash))  # other processes: at their next refresh
    return token


MAX_ROTATION_OVERLAP_S = 30 * 24 * 3600


@transaction.atomic
def agent_token_rotate(*, token: AgentToken, overlap_s: int, actor: Any, note: str = "",
                       source: str = Source.API) -> tuple[AgentToken, str]:
    """Issue the replacement of ``token`` (same kind and node) and let the old key work for ``overlap_s``
    more seconds, so the agent can be given the new key without a gap; after that the old key is refused.
    The plaintext of the new key is returned once. A concurrent second rotation of the same key waits for
    the first (row lock) and is refused (409): one key has one replacement."""
    if not 0 <= overlap_s <= MAX_ROTATION_OVERLAP_S:
        raise ValueError(f"overlap_s must be between 0 and {MAX_ROTATION_OVERLAP_S}")
    old = AgentToken.objects.select_for_update(of=("self",)).select_related("node").get(pk=token.pk)
    now = timezone.now()
    if old.revoked_at is not None:
        raise Conflict(f"{old} is revoked: issue a new key instead")
    if old.rotated_to_id is not None:
        raise Conflict(f"{old} was rotated already (its replacement is {old.rotated_to}); "
                              "rotate the replacement instead")
    if old.expires_at is not None and old.expires_at <= now:
        raise Conflict(f"{old} has expired: issue a new key instead")
    new, key = agent_token_issue(kind=old.kind, node=old.node, actor=actor, source=source,
                                 note=note or f"rotated from {old.key_prefix}…")
    expires = now + dt.timedelta(seconds=overlap_s)
    if old.expires_at is not None:
        expires = min(expires, old.expires_at)
    old.expires_at, old.rotated_to = expires, new
    old.save(update_fields=["expires_at", "rotated_to"])
    audit_record(actor=actor, action="agent_token.rotate", target=old, source=source,
                 changes={"expires_at": [None, expires.isoformat()], "rotated_to": [None, new.pk]})
    key_hash = old.key_hash
    transaction.on_commit(lambda: identities.forget(key_hash))  # other processes: at their next refresh
    return new, key


# ---- ingest -----------------------------------------------------------------------------------


def _query(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


def agent_identity(*, key: str) -> AgentIdentity | None:
    """The identity behind an agent key (cached per process, see ``identity.py``); None if unknown or revoked."""
    return identities.lookup(key, _query)


def identity_of(token: AgentToken) -> AgentIdentity:
    """An identity built from a token row (in-process callers that hold the token, not its key)."""
    modules = dict(Module.objects.filter(node_id=token.node_id).values_list("serial", "id")) if token.node_id else {}
    return AgentIdentity(token_id=token.pk, kind=token.kind, node_id=token.node_id,
                         hostname=token.node.hostname if token.node_id and token.node else None,
                         modules=modules, last_used_at=token.last_used_at)


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
        identities.refresh(_query)
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
    return dict(_query("SELECT kind, id FROM inventory_tier", []))


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
                      expires_at: dt.datetime | None = None, source: str = Source.API,
                      audit_event: AuditEvent | None = None) -> NodeCommand:
    """Queue a command for ``node``'s agent; any kind is accepted (an agent answers "unknown").
    Sent on its own, it writes its audit record; sent by an action that wrote one (``audit_event``),
    it is linked to that record instead, so one action stays one record."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    command = NodeCommand.objects.create(
        node=node, kind=kind, args=args or {}, reason=reason, expires_at=expires_at, created_by=user,
        created_by_name=(user.get_username() if user else str(actor or "system"))[:150], audit_event=audit_event,
    )
    if audit_event is None:
        command.audit_event = audit_record(
            actor=actor, action="node_command.send", target=node, reason=reason, source=source,
            changes={"command": [None, command.pk], "kind": [None, kind], "args": [None, args or {}]},
            related=command)
        NodeCommand.objects.filter(pk=command.pk).update(audit_event=command.audit_event)
    node_id = node.pk
    transaction.on_commit(lambda: _wake(node_id))
    return command


def command_redeliver_after_s() -> float:
    return float(getattr(settings, "TELEMETRY_COMMAND_REDELIVER_AFTER_S", 60))


def node_command_claim(*, node: Node, limit: int = 50) -> list[NodeCommand]:
    """Pending commands of ``node``, oldest first, marked delivered (safe with concurrent polls).

    Delivery is at-least-once: a command delivered but not acknowledged within
    TELEMETRY_COMMAND_REDELIVER_AFTER_S (an agent that died between fetch and
    ack), or in progress without a new ``in_progress`` ack for that long (an
    agent that died running it), is delivered again. Agents act on commands
    idempotently by id.
    """
    now = timezone.now()
    stale = now - dt.timedelta(seconds=command_redeliver_after_s())
    with transaction.atomic():
        commands = list(
            NodeCommand.objects.select_for_update(skip_locked=True)
            .filter(Q(state=CommandState.PENDING) | Q(state=CommandState.DELIVERED, delivered_at__lt=stale)
                    | Q(state=CommandState.IN_PROGRESS, progress_at__lt=stale), node=node)
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
    """Record the agent's answer. ``in_progress`` (sent again while the agent works) keeps the
    command from being redelivered and shows its progress; it is not audited. The same final
    answer twice is accepted; a different answer to a finished command is a conflict; a late
    ``in_progress`` after the final answer changes nothing. Another node's command does not exist."""
    if status not in ACK_STATES:
        raise ValueError(f"status must be one of {', '.join(ACK_STATES)}")
    command = NodeCommand.objects.select_for_update().filter(node=node, pk=command_id).first()
    if command is None:
        raise NodeCommand.DoesNotExist(f"no command {command_id} for {node.hostname}")
    now = timezone.now()
    if command.state in FINAL_COMMAND_STATES:
        if command.state == status or status == CommandState.IN_PROGRESS:
            return command
        raise Conflict(f"command {command_id} already finished as {command.state}")
    before = command.state
    command.state = status
    command.result = result or {}
    command.delivered_at = command.delivered_at or now
    if status == CommandState.IN_PROGRESS:
        command.progress_at = now
        command.save(update_fields=["state", "result", "delivered_at", "progress_at"])
        return command
    command.finished_at = now
    command.save(update_fields=["state", "result", "finished_at", "delivered_at"])
    audit_record(actor=f"agent:{node.hostname}", action="node_command.finish", target=node, source=Source.SYSTEM,
                 changes={"command": [command.pk, command.pk], "state": [before, status]}, related=command)
    return command
