"""The fast path of batch validation: parse and check in one pass in compiled code.

``msgspec`` decodes the JSON body straight into typed Structs whose constraints
(types, ranges, lengths, the batch id pattern, time zones) are checked while
parsing; the remaining checks (whose node, which modules, known tiers and
stages, time window, percentile order) are a short loop over the decoded
samples against the cached ``AgentIdentity``, with no database access.

Anything this path does not accept goes to ``validation.parse_batch``, the
complete check, which reports every problem by path (``decode``). So a
rejected batch gets exactly the errors it always got, and the fast path can
never accept what the complete check would refuse.

Duplicated keys in a JSON object: the last one wins, on both paths (msgspec
parses the body for the complete check too), and for every object of the
batch. RFC 8259 leaves this open; we document it instead of rejecting. The
complete check reads the body with ``apps.common.jsonbody.load_json``, as every
other JSON endpoint does: one rule for the whole API (docs/security.md).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from apps.agents.choices import AgentKind
from apps.agents.contract import HOLDERS_SINCE, LATENCY_SINCE, MAX_HOLDERS, VERSIONS
from apps.agents.identity import AgentIdentity
from apps.common import jsonbody
from apps.inventory.choices import MAX_MODULES_PER_NODE
from apps.telemetry import metrics, sketch
from apps.telemetry.batch import (
    BATCH_ID,
    INT32,
    INT64,
    MAX_SAMPLES,
    STAGES,
    BatchRejected,
    ParsedBatch,
    holders_json,
    max_future_skew_s,
    raw_retention_hours,
)
from apps.telemetry.ingest.validation import parse_batch

NonNegative = Annotated[float, Meta(ge=0.0)]
Window = Annotated[float, Meta(gt=0.0, le=3600.0)]
Count32 = Annotated[int, Meta(ge=0, le=INT32)]
Counter64 = Annotated[int, Meta(ge=0, le=INT64)]
Time = Annotated[dt.datetime, Meta(tz=True)]
Name = Annotated[str, Meta(min_length=1)]


def _metric_type(m: metrics.Metric) -> Any:
    """The declared metric as a constrained msgspec type (null allowed where some contract allows it:
    a contract that does not goes to the complete check, which refuses it)."""
    lo, hi = m.bounds
    bounds: dict[str, Any] = {k: (int(v) if m.is_int else v) for k, v in (("ge", lo), ("le", hi)) if v is not None}
    t: Any = Annotated[int if m.is_int else float, Meta(**bounds)]
    return t | None if m.nullable else t


NODE_METRICS = metrics.names(metrics.NODE_METRICS)
MODULE_METRICS = metrics.names(metrics.MODULE_METRICS)
ModuleIn = msgspec.defstruct("ModuleIn", [("serial", Name),
                                          *((m.name, _metric_type(m)) for m in metrics.MODULE_METRICS)])


class HolderIn(msgspec.Struct, forbid_unknown_fields=True):
    pid: Annotated[int, Meta(ge=1, le=INT32)]
    name: Annotated[str, Meta(min_length=1, max_length=128)]
    module: Name


class HistogramIn(msgspec.Struct):
    offset: Annotated[int, Meta(ge=sketch.MIN_INDEX, le=sketch.MAX_INDEX)]
    counts: Annotated[list[Count32], Meta(min_length=1, max_length=sketch.MAX_BUCKETS)]


NodeSampleIn = msgspec.defstruct("NodeSampleIn", [
    ("time", Time), ("node", Name), *((m.name, _metric_type(m)) for m in metrics.NODE_METRICS),
    ("modules", Annotated[list[ModuleIn], Meta(max_length=MAX_MODULES_PER_NODE)], []),  # type: ignore[valid-type]
    ("latency", dict[str, HistogramIn] | None, None),
    ("holders", Annotated[list[HolderIn], Meta(max_length=MAX_HOLDERS)] | None, None),  # type: ignore[valid-type]
])


def _row_builder(keys: str, metric_names: tuple[str, ...], obj: str) -> Any:
    """``lambda <keys>, <obj>: (<keys>, <obj>.<metric>, ...)``, built once from the declarations (as
    dataclasses builds its methods): the hot loop reads each attribute directly, as hand-written code would."""
    body = ", ".join([keys, *(f"{obj}.{name}" for name in metric_names)])
    return eval(f"lambda {keys}, {obj}: ({body})")  # noqa: S307 - names from metrics.py, checked identifiers


assert all(n.isidentifier() for n in (*NODE_METRICS, *MODULE_METRICS))
_node_row = _row_builder("t, node_id", NODE_METRICS, "s")
_module_row = _row_builder("t, module_id, node_id", MODULE_METRICS, "m")


class TierSampleIn(msgspec.Struct):
    time: Time
    tier: str
    window_s: Window
    queue_depth: Count32
    arrivals: Count32
    completions: Count32
    input_tokens: Counter64 = 0
    output_tokens: Counter64 = 0
    # Per-endpoint figures (contract 3) name endpoints: the complete check, which reads them, takes those.
    endpoints: Any = None


class StageSampleIn(msgspec.Struct):
    time: Time
    tier: str
    stage: str
    window_s: Window
    count: Count32
    p50_ms: NonNegative
    p95_ms: NonNegative
    p99_ms: NonNegative
    max_ms: NonNegative
    node: str | None = None
    errors: Count32 = 0


class BatchIn(msgspec.Struct):
    batch_id: Annotated[str, Meta(pattern=BATCH_ID.pattern)]
    contract: int = 1
    node_samples: Annotated[list[NodeSampleIn], Meta(max_length=MAX_SAMPLES)] = []  # type: ignore[valid-type]
    tier_samples: Annotated[list[TierSampleIn], Meta(max_length=MAX_SAMPLES)] = []
    stage_samples: Annotated[list[StageSampleIn], Meta(max_length=MAX_SAMPLES)] = []


_decoder = msgspec.json.Decoder(BatchIn)


class NeedsFullCheck(Exception):
    """The fast path cannot accept this batch; the complete check decides."""


def load_json(body: bytes) -> Any:
    """The body as plain Python values (duplicated keys: the last wins), or 400 naming the problem."""
    try:
        return jsonbody.load_json(body)
    except jsonbody.BadJSON as exc:
        raise BatchRejected(400, {exc.path or "non_field_errors": [exc.message]}) from None


def decode(body: bytes, *, identity: AgentIdentity, tiers: dict[str, int], now: dt.datetime) -> ParsedBatch:
    """Validate the whole batch; raise BatchRejected (400/403/413) or return rows for COPY.
    The fast path needs no database; the complete check (errors only) reads it."""
    try:
        return fast_decode(body, identity=identity, tiers=tiers, now=now)
    except NeedsFullCheck:
        pass
    return parse_batch(load_json(body), token=identity, now=now)


def fast_decode(body: bytes, *, identity: AgentIdentity, tiers: dict[str, int], now: dt.datetime) -> ParsedBatch:
    try:
        batch = _decoder.decode(body)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        raise NeedsFullCheck from None  # the complete check names the problem
    if batch.contract not in VERSIONS:
        raise NeedsFullCheck  # 400 naming the versions spoken
    out = ParsedBatch(batch_id=batch.batch_id, contract=batch.contract)
    earliest = now - dt.timedelta(hours=raw_retention_hours())
    latest = now + dt.timedelta(seconds=max_future_skew_s())
    times: list[dt.datetime] = []
    if batch.node_samples:
        if identity.kind != AgentKind.NODE or batch.tier_samples or batch.stage_samples:
            raise NeedsFullCheck
        _node_rows(batch.node_samples, identity, out, times, contract=batch.contract)
    elif identity.kind == AgentKind.NODE and (batch.tier_samples or batch.stage_samples):
        raise NeedsFullCheck
    for ts in batch.tier_samples:
        tier_id = tiers.get(ts.tier)
        if tier_id is None or ts.endpoints is not None:
            raise NeedsFullCheck
        t = _utc(ts.time)
        times.append(t)
        out.tier_rows.append((t, tier_id, ts.window_s, ts.queue_depth, ts.arrivals, ts.completions,
                              ts.input_tokens, ts.output_tokens))
    for ss in batch.stage_samples:
        tier_id = tiers.get(ss.tier)
        if tier_id is None or ss.stage not in STAGES or not (ss.p50_ms <= ss.p95_ms <= ss.p99_ms <= ss.max_ms):
            raise NeedsFullCheck
        if ss.node is not None or ss.errors > ss.count:
            raise NeedsFullCheck  # a per-node breakdown names a node: the complete check looks it up
        t = _utc(ss.time)
        times.append(t)
        out.stage_rows.append((t, tier_id, ss.stage, ss.window_s, ss.count, ss.p50_ms, ss.p95_ms, ss.p99_ms,
                               ss.max_ms, None, ss.errors))
    if times:
        lo, hi = min(times), max(times)
        if lo < earliest or hi > latest:
            raise NeedsFullCheck
        out.min_time, out.max_time = lo, hi
    return out


def _node_rows(samples: list[Any], identity: AgentIdentity, out: ParsedBatch,
               times: list[dt.datetime], *, contract: int) -> None:
    nullable = metrics.nullable_fields(contract)
    node_id, hostname, own = identity.node_id, identity.hostname, identity.modules
    for s in samples:
        if s.node != hostname:
            raise NeedsFullCheck
        t = _utc(s.time)
        times.append(t)
        row = _node_row(t, node_id, s)
        if None in row and any(getattr(s, f) is None for f in NODE_METRICS if f not in nullable):
            raise NeedsFullCheck  # null where this contract version wants a number
        out.node_rows.append(row)
        if s.latency:
            if contract < LATENCY_SINCE:
                raise NeedsFullCheck
            for stage, h in s.latency.items():
                n = sum(h.counts)
                if stage not in STAGES or h.offset + len(h.counts) - 1 > sketch.MAX_INDEX or n > INT32:
                    raise NeedsFullCheck
                out.latency_rows.append((t, node_id, stage, h.offset, h.counts, n))
        if s.holders is not None:
            if contract < HOLDERS_SINCE or any(h.module not in own for h in s.holders):
                raise NeedsFullCheck  # the complete check names the version or the module
            out.holder_rows.append((t, node_id, holders_json(
                [{"pid": h.pid, "name": h.name, "module": h.module} for h in s.holders])))
        if len(s.modules) > 1 and len({m.serial for m in s.modules}) != len(s.modules):
            raise NeedsFullCheck
        for m in s.modules:
            module_id = own.get(m.serial)
            if module_id is None:
                raise NeedsFullCheck
            row = _module_row(t, module_id, node_id, m)
            if None in row and any(getattr(m, f) is None for f in MODULE_METRICS if f not in nullable):
                raise NeedsFullCheck  # null where this contract version wants a number
            out.module_rows.append(row)


def _utc(t: dt.datetime) -> dt.datetime:
    try:
        return t if t.tzinfo is dt.UTC else t.astimezone(dt.UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00: the complete check names it
        raise NeedsFullCheck from None
