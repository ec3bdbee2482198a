"""Accepting a validated batch into the durable buffer; ``store/raw.py`` stores buffered batches.

Accepting is one statement: the ``IngestBatch`` row, with the batch's rows
encoded in ``payload``, goes in with ON CONFLICT (scope, batch_id) DO NOTHING.
When it commits the batch is durable (PostgreSQL's own WAL), and the answer is
202; a batch id already there is answered 200 duplicate with the counts it was
accepted with. The web process pays no COPY, no upsert and no lock.

In-process callers (the demo seed, tests) may store a batch at once instead
(``telemetry_store_now``): the same rows, the same transaction rules.

Storing (``telemetry_store_pending``, run in a loop by ``manage.py
telemetry_writer``) takes up to ``limit`` buffered batches with FOR UPDATE SKIP
LOCKED, COPYs all their rows (many nodes' rows in one COPY per table), upserts
the latest state, notes the minutes due for rollup and marks the batches stored,
in one transaction: a writer killed at any point leaves every batch either
stored once or still buffered. Several writers may run; each takes other rows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import msgspec
from django.db import connection
from django.utils import timezone

from apps.agents.identity import AgentIdentity
from apps.telemetry.batch import BatchRejected, ParsedBatch, check_batch_id


@dataclass
class IngestResult:
    batch_id: str
    duplicate: bool
    accepted: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"batch_id": self.batch_id, "duplicate": self.duplicate, "accepted": self.accepted}


def counts(parsed: ParsedBatch) -> dict[str, int]:
    return {"node_samples": len(parsed.node_rows), "module_samples": len(parsed.module_rows),
            "tier_samples": len(parsed.tier_rows), "stage_samples": len(parsed.stage_rows)}


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def encode_payload(parsed: ParsedBatch) -> bytes:
    return _encoder.encode({"node": parsed.node_rows, "module": parsed.module_rows, "tier": parsed.tier_rows,
                            "stage": parsed.stage_rows, "endpoint": parsed.endpoint_rows,
                            "latency": parsed.latency_rows, "holders": parsed.holder_rows})


def decode_payload(payload: bytes) -> Any:
    """The rows of a buffered batch, as ``encode_payload`` wrote them."""
    return _decoder.decode(payload)


APPEND = (
    "INSERT INTO telemetry_ingestbatch (scope, batch_id, token_id, received_at, min_time, max_time,"
    " node_samples, module_samples, tier_samples, stage_samples, payload)"
    " SELECT * FROM unnest(%s::text[], %s::text[], %s::int8[], %s::timestamptz[], %s::timestamptz[],"
    " %s::timestamptz[], %s::int4[], %s::int4[], %s::int4[], %s::int4[], %s::bytea[])"
    " ON CONFLICT (scope, batch_id) DO NOTHING RETURNING scope, batch_id"
)


STORED = (
    "SELECT b.scope, b.batch_id, b.node_samples, b.module_samples, b.tier_samples, b.stage_samples"
    " FROM telemetry_ingestbatch b JOIN unnest(%s::text[], %s::text[]) AS k(scope, batch_id)"
    " ON b.scope = k.scope AND b.batch_id = k.batch_id"
)


def append_params(items: list[tuple[AgentIdentity, ParsedBatch]], now: dt.datetime) -> list[Any]:
    """Parameters of ``APPEND`` for several accepted batches (distinct scope+batch_id)."""
    cols: list[list[Any]] = [[] for _ in range(11)]
    for identity, parsed in items:
        row = (identity.scope, parsed.batch_id, identity.token_id, now, parsed.min_time, parsed.max_time,
               len(parsed.node_rows), len(parsed.module_rows), len(parsed.tier_rows), len(parsed.stage_rows),
               encode_payload(parsed))
        for col, value in zip(cols, row, strict=True):
            col.append(value)
    return cols


def stored_result(row: tuple[Any, ...]) -> IngestResult:
    _scope, batch_id, n, m, t, s = row
    return IngestResult(batch_id=batch_id, duplicate=True,
                        accepted={"node_samples": n, "module_samples": m, "tier_samples": t, "stage_samples": s})


def stored_duplicate_of(payload: Any, identity: AgentIdentity) -> IngestResult | None:
    """For a batch refused by validation: the stored batch of the same id, if any (a resend
    of a batch taken earlier is a duplicate, whatever has changed since)."""
    try:
        batch_id = check_batch_id(payload)
    except BatchRejected:
        return None
    with connection.cursor() as cur:
        cur.execute(STORED, [[identity.scope], [batch_id]])
        row = cur.fetchone()
    return stored_result(row) if row else None


def telemetry_accept(*, identity: AgentIdentity, parsed: ParsedBatch, now: dt.datetime | None = None
                     ) -> IngestResult:
    """Put a validated batch into the durable buffer (one statement), or find it there."""
    now = now or timezone.now()
    with connection.cursor() as cur:
        cur.execute(APPEND, append_params([(identity, parsed)], now))
        if cur.fetchone() is not None:
            return IngestResult(batch_id=parsed.batch_id, duplicate=False, accepted=counts(parsed))
        cur.execute(STORED, [[identity.scope], [parsed.batch_id]])
        row = cur.fetchone()
    assert row is not None  # the conflicting row is committed (ON CONFLICT waits for it)
    return stored_result(row)
