"""Validation of a telemetry batch, whole, before anything is written: the
complete check that names every problem (up to 50) by its path, e.g.
``node_samples[17].modules[2].temp_c: must be a number``.

The ingest path first tries ``decoder.decode_batch`` (compiled msgspec Structs,
no database); only a batch that it cannot accept comes here, so a rejected
batch gets the same full list of errors as before, and this module stays the
authority on what is valid: the fast path never accepts what this rejects.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from apps.agents.choices import AgentKind
from apps.agents.contract import ENDPOINTS_SINCE, HOLDERS_SINCE, LATENCY_SINCE, MAX_HOLDERS
from apps.agents.identity import AgentIdentity
from apps.inventory.choices import MAX_MODULES_PER_NODE
from apps.inventory.models import ExternalEndpoint, Module, Node, Tier
from apps.telemetry import metrics, sketch
from apps.telemetry.batch import (
    INT32,
    MAX_ERRORS,
    MAX_SAMPLES,
    STAGES,
    BatchRejected,
    ParsedBatch,
    check_batch_id,
    check_contract,
    holders_json,
    max_future_skew_s,
    raw_retention_hours,
)
from apps.telemetry.choices import Stage
from apps.telemetry.ingest.fields import (
    ENDPOINT_FIELDS,
    MAX_ENDPOINTS,
    MODULE_FIELDS,
    NODE_FIELDS,
    STAGE_FIELDS,
    TIER_FIELDS,
    TIER_OPTIONAL,
    Check,
    Invalid,
    _integer,
    count32,
    non_negative,
)


class _Collector:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}
        self.forbidden: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)
        if len(self.errors) >= MAX_ERRORS:
            raise BatchRejected(400, self.errors)

    def forbid(self, path: str, message: str) -> None:
        self.forbidden.setdefault(path, []).append(message)


def _fields(c: _Collector, item: dict[str, Any], path: str, checks: list[tuple[str, Check]],
            required: bool = True, nullable: frozenset[str] = frozenset()) -> list[Any] | None:
    values: list[Any] = []
    ok = True
    for name, check in checks:
        if name in nullable and name in item and item[name] is None:
            values.append(None)  # the agent does not know: stored as null, never as zero
            continue
        if name not in item or item[name] is None:
            if required:
                c.add(f"{path}.{name}", "is required (null when unknown)" if name in nullable else "is required")
                ok = False
            else:
                values.append(0)
            continue
        try:
            values.append(check(item[name]))
        except Invalid as exc:
            c.add(f"{path}.{name}", str(exc))
            ok = False
    return values if ok else None


def _time(c: _Collector, item: dict[str, Any], path: str, now: dt.datetime) -> dt.datetime | None:
    raw = item.get("time")
    if raw is None:
        c.add(f"{path}.time", "is required")
        return None
    if not isinstance(raw, str):
        c.add(f"{path}.time", "must be an ISO 8601 date-time string")
        return None
    try:
        t = dt.datetime.fromisoformat(raw)
    except ValueError:
        c.add(f"{path}.time", "must be an ISO 8601 date-time string, e.g. 2026-11-29T22:00:00Z")
        return None
    if t.tzinfo is None:
        c.add(f"{path}.time", "must carry a time zone (e.g. a trailing Z)")
        return None
    try:
        t = t.astimezone(dt.UTC)
    except OverflowError:
        c.add(f"{path}.time", "is out of range: in UTC it falls outside the years 1-9999")
        return None
    skew = max_future_skew_s()
    if (t - now).total_seconds() > skew:
        c.add(f"{path}.time", f"is {(t - now).total_seconds():.0f} s in the future (at most {skew:g} s allowed)")
        return None
    hours = raw_retention_hours()
    if (now - t).total_seconds() > hours * 3600:
        c.add(f"{path}.time", f"is older than the raw retention of {hours:g} h")
        return None
    return t


def _list(c: _Collector, payload: dict[str, Any], key: str) -> list[Any]:
    value = payload.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        c.add(key, "must be a list")
        return []
    if len(value) > MAX_SAMPLES:
        raise BatchRejected(413, {key: [f"{len(value)} samples; at most {MAX_SAMPLES} per batch"]})
    return value


def parse_batch(payload: Any, *, token: AgentIdentity, now: dt.datetime) -> ParsedBatch:
    """Validate the whole batch (already parsed from JSON); raise BatchRejected, or
    return rows ready for COPY. Reads the node's modules and the tiers from the
    database, not from the identity cache: this is the authority."""
    batch = ParsedBatch(batch_id=check_batch_id(payload), contract=check_contract(payload))
    c = _Collector()
    node_samples = _list(c, payload, "node_samples")
    tier_samples = _list(c, payload, "tier_samples")
    stage_samples = _list(c, payload, "stage_samples")

    if token.kind == AgentKind.GATEWAY and node_samples:
        c.forbid("node_samples", "the gateway key may write only tier_samples and stage_samples")
    if token.kind == AgentKind.NODE:
        for key, items in (("tier_samples", tier_samples), ("stage_samples", stage_samples)):
            if items:
                c.forbid(key, "a node key may write only its own node's node_samples")
    if c.forbidden:
        raise BatchRejected(403, c.forbidden)

    if node_samples:
        _parse_node_samples(c, batch, node_samples, token, now)
    if tier_samples or stage_samples:
        tiers = dict(Tier.objects.values_list("kind", "id"))
        _parse_tier_samples(c, batch, tier_samples, tiers, now)
        _parse_stage_samples(c, batch, stage_samples, tiers, now)
    if c.forbidden:
        raise BatchRejected(403, c.forbidden)
    if c.errors:
        raise BatchRejected(400, c.errors)
    return batch


def _parse_node_samples(c: _Collector, batch: ParsedBatch, items: list[Any], token: AgentIdentity,
                        now: dt.datetime) -> None:
    assert token.node_id is not None
    node = Node.objects.only("id", "hostname").get(pk=token.node_id)
    nullable = metrics.nullable_fields(batch.contract)
    own_modules = dict(Module.objects.filter(node=node).values_list("serial", "id"))
    foreign: dict[str, str | None] | None = None
    for i, item in enumerate(items):
        path = f"node_samples[{i}]"
        if not isinstance(item, dict):
            c.add(path, "must be an object")
            continue
        host = item.get("node")
        if not isinstance(host, str) or not host:
            c.add(f"{path}.node", "is required: the node's hostname")
        elif host != node.hostname:
            if Node.objects.filter(hostname=host).exists():
                c.forbid(f"{path}.node", f"this key belongs to {node.hostname}, not {host}")
            else:
                c.add(f"{path}.node", f"unknown node {host}")
            continue
        t = _time(c, item, path, now)
        values = _fields(c, item, path, NODE_FIELDS, nullable=nullable)
        modules = item.get("modules", [])
        if not isinstance(modules, list):
            c.add(f"{path}.modules", "must be a list")
            modules = []
        elif len(modules) > MAX_MODULES_PER_NODE:
            c.add(f"{path}.modules", f"at most {MAX_MODULES_PER_NODE} modules per node")
            modules = []
        seen: set[str] = set()
        for j, mod in enumerate(modules):
            mpath = f"{path}.modules[{j}]"
            if not isinstance(mod, dict):
                c.add(mpath, "must be an object")
                continue
            serial = mod.get("serial")
            module_id = None
            if not isinstance(serial, str) or not serial:
                c.add(f"{mpath}.serial", "is required")
            elif serial in seen:
                c.add(f"{mpath}.serial", f"module {serial} appears twice in one sample")
            else:
                seen.add(serial)
                module_id = own_modules.get(serial)
                if module_id is None:
                    if foreign is None:
                        foreign = _module_nodes(items)
                    if serial in foreign:
                        owner = foreign[serial] or "no node"
                        c.forbid(f"{mpath}.serial", f"module {serial} is in {owner}, not in {node.hostname}")
                    else:
                        c.add(f"{mpath}.serial", f"unknown module {serial}")
            mvalues = _fields(c, mod, mpath, MODULE_FIELDS, nullable=nullable)
            if t is not None and module_id is not None and mvalues is not None:
                batch.module_rows.append((t, module_id, node.pk, *mvalues))
        latency = _latency(c, item, path, batch.contract)
        holders = _holders(c, item, path, batch.contract, own_modules)
        if t is not None and values is not None:
            batch.note_time(t)
            batch.node_rows.append((t, node.pk, *values))
            batch.latency_rows.extend((t, node.pk, *h) for h in latency)
            if holders is not None:
                batch.holder_rows.append((t, node.pk, holders_json(holders)))


def _holders(c: _Collector, item: dict[str, Any], path: str, contract: int,
             own_modules: dict[str, int]) -> list[dict[str, Any]] | None:
    """A node sample's processes holding its modules (contract 4): [{pid, name, module}], None: not sent."""
    value = item.get("holders")
    if value is None:
        return None
    path = f"{path}.holders"
    if contract < HOLDERS_SINCE:
        c.add(path, f"holders need contract {HOLDERS_SINCE} or later (this batch speaks {contract})")
        return None
    if not isinstance(value, list):
        c.add(path, "must be a list of {pid, name, module}")
        return None
    if len(value) > MAX_HOLDERS:
        c.add(path, f"at most {MAX_HOLDERS} holders per sample")
        return None
    out = []
    for i, h in enumerate(value):
        hpath = f"{path}[{i}]"
        if not isinstance(h, dict):
            c.add(hpath, "must be an object {pid, name, module}")
            continue
        extra = set(h) - {"pid", "name", "module"}
        if extra:
            c.add(hpath, f"unknown field(s) {', '.join(sorted(map(str, extra)))}")
        pid, name, module = h.get("pid"), h.get("name"), h.get("module")
        if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= INT32:
            c.add(f"{hpath}.pid", f"must be a whole number 1..{INT32}")
        if not isinstance(name, str) or not 1 <= len(name) <= 128:
            c.add(f"{hpath}.name", "must be the process name, 1 to 128 characters")
        if not isinstance(module, str) or module not in own_modules:
            c.add(f"{hpath}.module", f"must be the serial of one of this node's modules, not {module!r}")
        out.append({"pid": pid, "name": name, "module": module})
    return out


def _latency(c: _Collector, item: dict[str, Any], path: str, contract: int) -> list[tuple[Any, ...]]:
    """A node sample's latency histograms (contract 3): (stage, offset, counts, total) each."""
    value = item.get("latency")
    if value is None:
        return []
    path = f"{path}.latency"
    if contract < LATENCY_SINCE:
        c.add(path, f"latency histograms need contract {LATENCY_SINCE} or later (this batch speaks {contract})")
        return []
    if not isinstance(value, dict):
        c.add(path, "must be an object: stage -> {offset, counts}")
        return []
    out = []
    for stage, h in value.items():
        hpath = f"{path}.{stage}"
        if stage not in STAGES:
            c.add(hpath, f"unknown stage: one of {', '.join(Stage.values)}")
            continue
        if not isinstance(h, dict):
            c.add(hpath, "must be an object {offset, counts}")
            continue
        try:
            offset = _integer(h.get("offset"), sketch.MIN_INDEX, sketch.MAX_INDEX)
        except Invalid as exc:
            c.add(f"{hpath}.offset", f"{exc} (a bucket index)" if h.get("offset") is not None else "is required")
            continue
        counts = h.get("counts")
        if not isinstance(counts, list) or not counts:
            c.add(f"{hpath}.counts", "must be a non-empty list of counts")
            continue
        if offset + len(counts) - 1 > sketch.MAX_INDEX:
            c.add(f"{hpath}.counts", f"reaches bucket {offset + len(counts) - 1}; the last is {sketch.MAX_INDEX}")
            continue
        clean = []
        for k, n in enumerate(counts):
            try:
                clean.append(count32(n))
            except Invalid as exc:
                c.add(f"{hpath}.counts[{k}]", str(exc))
                break
        else:
            total = sum(clean)
            if total > INT32:
                c.add(f"{hpath}.counts", f"at most {INT32} latencies in one histogram")
                continue
            out.append((stage, offset, clean, total))
    return out


def _module_nodes(items: list[Any]) -> dict[str, str | None]:
    """Owners of every serial named in the batch (only looked up when one is not the node's own)."""
    serials = {
        m.get("serial") for s in items if isinstance(s, dict) and isinstance(s.get("modules"), list)
        for m in s["modules"] if isinstance(m, dict) and isinstance(m.get("serial"), str)
    }
    return dict(Module.objects.filter(serial__in=serials).values_list("serial", "node__hostname"))


def _tier(c: _Collector, item: dict[str, Any], path: str, tiers: dict[str, int]) -> int | None:
    kind = item.get("tier")
    if kind not in tiers:
        c.add(f"{path}.tier", f"must be one of {', '.join(sorted(tiers))}")
        return None
    return tiers[kind]


def _parse_tier_samples(c: _Collector, batch: ParsedBatch, items: list[Any], tiers: dict[str, int],
                        now: dt.datetime) -> None:
    names = _EndpointNames()
    for i, item in enumerate(items):
        path = f"tier_samples[{i}]"
        if not isinstance(item, dict):
            c.add(path, "must be an object")
            continue
        tier_id = _tier(c, item, path, tiers)
        t = _time(c, item, path, now)
        values = _fields(c, item, path, TIER_FIELDS)
        optional = _fields(c, item, path, TIER_OPTIONAL, required=False)
        endpoints = _parse_endpoints(c, batch, item, path, tier_id, names)
        if tier_id is not None and t is not None and values is not None and optional is not None:
            batch.note_time(t)
            batch.tier_rows.append((t, tier_id, *values, *optional))
            batch.endpoint_rows.extend((t, endpoint_id, values[0], *figures) for endpoint_id, figures in endpoints)


class _EndpointNames:
    """Endpoint name -> (id, tier id), read once, and only for a batch that carries endpoint figures."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, int]] | None = None

    def get(self, name: str) -> tuple[int, int] | None:
        if self._known is None:
            self._known = {n: (pk, tier) for n, pk, tier in
                           ExternalEndpoint.objects.values_list("name", "id", "tier_id")}
        return self._known.get(name)


def _parse_endpoints(c: _Collector, batch: ParsedBatch, item: dict[str, Any], path: str, tier_id: int | None,
                     known: _EndpointNames) -> list[tuple[int, list[Any]]]:
    """The per-endpoint figures of one tier sample (contract 3): [(endpoint id, [requests, errors, tokens,
    p95_ms])]. Each names an endpoint of the sample's tier, once; errors never exceed requests; p95_ms is
    null only when no request completed in the window."""
    items = item.get("endpoints")
    if items is None:
        return []
    where = f"{path}.endpoints"
    if batch.contract < ENDPOINTS_SINCE:
        c.add(where, f"needs contract {ENDPOINTS_SINCE} or later (this batch speaks {batch.contract})")
        return []
    if not isinstance(items, list):
        c.add(where, "must be a list")
        return []
    if len(items) > MAX_ENDPOINTS:
        c.add(where, f"at most {MAX_ENDPOINTS} endpoints per tier sample")
        return []
    out: list[tuple[int, list[Any]]] = []
    seen: set[str] = set()
    for j, e in enumerate(items):
        epath = f"{where}[{j}]"
        if not isinstance(e, dict):
            c.add(epath, "must be an object")
            continue
        name = e.get("endpoint")
        endpoint_id = None
        if not isinstance(name, str) or not name:
            c.add(f"{epath}.endpoint", "is required: the endpoint's name in the inventory")
        elif name in seen:
            c.add(f"{epath}.endpoint", f"endpoint {name} appears twice in one tier sample")
        elif (found := known.get(name)) is None:
            c.add(f"{epath}.endpoint", f"unknown endpoint {name}")
        elif tier_id is not None and found[1] != tier_id:
            c.add(f"{epath}.endpoint", f"endpoint {name} is not in the tier {item.get('tier')}")
        else:
            seen.add(name)
            endpoint_id = found[0]
        values = _fields(c, e, epath, ENDPOINT_FIELDS)
        p95: float | None = None
        if e.get("p95_ms") is not None:
            try:
                p95 = non_negative(e["p95_ms"])
            except Invalid as exc:
                c.add(f"{epath}.p95_ms", str(exc))
                values = None
        elif "p95_ms" not in e:
            c.add(f"{epath}.p95_ms", "is required (null when no request completed in the window)")
            values = None
        if values is not None:
            requests, errors = values[0], values[1]
            if errors > requests:
                c.add(f"{epath}.errors", f"must not be above requests ({errors} > {requests})")
                values = None
            elif p95 is None and requests > 0:
                c.add(f"{epath}.p95_ms", f"must be a number: {requests} request(s) in the window")
                values = None
        if endpoint_id is not None and values is not None:
            out.append((endpoint_id, [*values, p95]))
    return out


def _parse_stage_samples(c: _Collector, batch: ParsedBatch, items: list[Any], tiers: dict[str, int],
                         now: dt.datetime) -> None:
    for i, item in enumerate(items):
        path = f"stage_samples[{i}]"
        if not isinstance(item, dict):
            c.add(path, "must be an object")
            continue
        tier_id = _tier(c, item, path, tiers)
        stage = item.get("stage")
        if stage not in STAGES:
            c.add(f"{path}.stage", f"must be one of {', '.join(Stage.values)}")
        t = _time(c, item, path, now)
        values = _fields(c, item, path, STAGE_FIELDS)
        if values is not None:
            p50, p95, p99, mx = values[2:]
            for name, lower, upper in (("p95_ms", p50, p95), ("p99_ms", p95, p99), ("max_ms", p99, mx)):
                if upper < lower:
                    c.add(f"{path}.{name}", f"must not be below the lower percentile ({upper:g} < {lower:g})")
                    values = None
                    break
        node_id, errors = _stage_breakdown(c, item, path, tier_id, values)
        if tier_id is not None and stage in STAGES and t is not None and values is not None and errors is not None:
            batch.note_time(t)
            batch.stage_rows.append((t, tier_id, stage, *values, node_id, errors))


def _stage_breakdown(c: _Collector, item: dict[str, Any], path: str, tier_id: int | None,
                     values: list[Any] | None) -> tuple[int | None, int | None]:
    """A stage sample's optional ``node`` (a per-node breakdown: a node of the sample's tier, by
    hostname) and ``errors`` (failed requests, at most ``count``). (node id or None, errors), or
    errors None when either is wrong (recorded on the collector)."""
    errors = item.get("errors", 0)
    if isinstance(errors, bool) or not isinstance(errors, int) or not 0 <= errors <= 2**31 - 1:
        c.add(f"{path}.errors", "must be an integer ≥ 0 (failed requests in the window)")
        return None, None
    if values is not None and errors > values[1]:
        c.add(f"{path}.errors", f"must not exceed count ({errors} > {values[1]})")
        return None, None
    host = item.get("node")
    if host is None:
        return None, errors
    if not isinstance(host, str) or not host:
        c.add(f"{path}.node", "must be a node's hostname (or absent for the tier's own summary)")
        return None, None
    row = Node.objects.filter(hostname=host).values_list("id", "tier_id").first()
    if row is None:
        c.add(f"{path}.node", f"unknown node {host}")
        return None, None
    if tier_id is not None and row[1] != tier_id:
        c.add(f"{path}.node", f"{host} is not in tier {item.get('tier')}")
        return None, None
    return int(row[0]), errors
