"""Reads of telemetry. Dashboard reads use the per-minute rollups and the
latest-state rows only, never the raw samples (rollups include the current,
partial minute as of the last rollup run, at most about a minute old; the
latest-state rows are as fresh as the last batch)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from apps.inventory.choices import SERVING_STATES, ModuleState, NodeState
from apps.inventory.models import Node, Tier
from apps.telemetry import sketch
from apps.telemetry.choices import Stage
from apps.telemetry.models import (
    EndpointRollup,
    IngestBatch,
    ModuleRollup,
    ModuleStatus,
    NodeRollup,
    NodeStatus,
    StageNodeRollup,
    StageRollup,
    TierRollup,
    TierStatus,
    WindowSummary,
)

# A node whose latest sample is older than this does not count towards "now" figures.
FRESH_S = 120


def _since(now: dt.datetime, minutes: int) -> dt.datetime:
    """Start of a window of ``minutes`` whole minutes ending with the current minute."""
    return now.replace(second=0, microsecond=0) - dt.timedelta(minutes=minutes - 1)


def _rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def nodes_not_seen(*, seconds: int, now: dt.datetime | None = None) -> QuerySet[Node]:
    """Nodes in service whose agent has not sent a sample for ``seconds`` (or never)."""
    cutoff = (now or timezone.now()) - dt.timedelta(seconds=seconds)
    return (
        Node.objects.exclude(state=NodeState.RETIRED)
        .filter(Q(status__isnull=True) | Q(status__last_seen__lt=cutoff))
        .select_related("tier", "status")
        .order_by("hostname")
    )


def _stage_summary(tier_id: int | None, since: dt.datetime) -> dict[int, list[dict[str, Any]]]:
    """Per tier, per stage over the window: count, count-weighted p50, worst-minute p95/p99/max."""
    sql = """SELECT tier_id, stage, sum(count),
                 CASE WHEN sum(count) > 0 THEN sum(p50_ms * count) / sum(count) ELSE avg(p50_ms) END,
                 max(p95_ms), max(p99_ms), max(max_ms)
             FROM telemetry_stagerollup WHERE minute >= %s {tier} GROUP BY tier_id, stage"""
    params: list[Any] = [since]
    if tier_id is not None:
        params.append(tier_id)
    order = {s: i for i, s in enumerate(Stage.values)}
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for tid, stage, count, p50, p95, p99, mx in _rows(
        sql.format(tier="AND tier_id = %s" if tier_id is not None else ""), params
    ):
        out[tid].append({"stage": stage, "count": int(count), "p50_ms": _r(p50, 2), "p95_ms": _r(p95, 2),
                         "p99_ms": _r(p99, 2), "max_ms": _r(mx, 2)})
    for items in out.values():
        items.sort(key=lambda d: order.get(d["stage"], 99))
    return out


# ---- stage latency from the merged histograms (contract 3) ----------------------------------------

# Percentiles of merged log-bucket histograms, all in SQL. ``{source}`` yields (key, bin, stage, bucket,
# c) rows, one per bucket of each histogram merged; the counts are added per (key, bin, stage, bucket), and
# percentile q is the bucket holding the latency of rank floor(q (n - 1)) (0-based) among the n merged,
# as DDSketch answers. The caller maps buckets to ms (sketch.value).
_PERCENTILES = """
    WITH b AS (SELECT key, bin, stage, bucket, sum(c) AS c FROM ({source}) s GROUP BY key, bin, stage, bucket),
    r AS (SELECT key, bin, stage, bucket, sum(c) OVER (PARTITION BY key, bin, stage ORDER BY bucket) AS running,
                 sum(c) OVER (PARTITION BY key, bin, stage) AS total FROM b)
    SELECT key, bin, stage, max(total),
           min(bucket) FILTER (WHERE running > floor(0.5 * (total - 1))),
           min(bucket) FILTER (WHERE running > floor(0.95 * (total - 1))),
           min(bucket) FILTER (WHERE running > floor(0.99 * (total - 1))),
           max(bucket)
    FROM r GROUP BY key, bin, stage ORDER BY key, bin, stage"""


def _ms(bucket: int | None) -> float | None:
    return None if bucket is None else round(sketch.value(bucket), 2)


def _percentile_rows(source: str, params: list[Any]) -> list[tuple[Any, Any, dict[str, Any]]]:
    """(key, bin, figures) per key, bin and stage: count, p50/p95/p99 and max (the top bucket's value),
    each within sketch.RELATIVE_ACCURACY of the exact figure over every latency merged; ``exact`` true."""
    return [(key, bin_, {"stage": stage, "count": int(count), "p50_ms": _ms(p50), "p95_ms": _ms(p95),
                         "p99_ms": _ms(p99), "max_ms": _ms(top), "exact": True})
            for key, bin_, stage, count, p50, p95, p99, top in _rows(_PERCENTILES.format(source=source), params)]


def _percentiles(source: str, params: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    """Per key, per stage (in stage order), over the whole range."""
    order = {s: i for i, s in enumerate(Stage.values)}
    out: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for key, _bin, figures in _percentile_rows(source, params):
        out[key].append(figures)
    for items in out.values():
        items.sort(key=lambda d: order.get(d["stage"], 99))
    return out


_BUCKETS = ("SELECT {key} AS key, {bin} AS bin, r.stage, u.bucket, u.c FROM {table} r"
            " CROSS JOIN LATERAL unnest(r.buckets, r.counts) AS u(bucket, c) WHERE {where}")


def latency_percentiles(*, since: dt.datetime, until: dt.datetime, node_id: int | None = None,
                        tier_id: int | None = None) -> list[dict[str, Any]]:
    """Per stage over the minutes in [since, until): count, p50, p95, p99 and max of the latencies
    of one node (``node_id``), one tier (``tier_id``) or the whole fleet (neither), from the log-bucket
    histograms the nodes send: the per-minute bucket counts are added in SQL, so each percentile is
    within 1 % of the exact percentile of every latency in the range (``apps/telemetry/sketch.py``)."""
    where = "r.minute >= %s AND r.minute < %s"
    params: list[Any] = [since, until]
    if node_id is not None:
        table, where = "telemetry_nodelatencyrollup", f"{where} AND r.node_id = %s"
        params.append(node_id)
    elif tier_id is not None:
        table, where = "telemetry_tierlatencyrollup", f"{where} AND r.tier_id = %s"
        params.append(tier_id)
    else:
        table = "telemetry_tierlatencyrollup"
    return _percentiles(_BUCKETS.format(key="0", bin="0", table=table, where=where), params).get(0, [])


def latency_window(*, minutes: int, tier: Tier | None = None, node: Node | None = None,
                   now: dt.datetime | None = None) -> dict[str, Any]:
    """Stage latency percentiles of one node, one tier or the fleet over the last ``minutes`` whole
    minutes up to the current one (``latency_percentiles``)."""
    now = now or timezone.now()
    since = _since(now, minutes)
    until = since + dt.timedelta(minutes=minutes)
    scope = "node" if node is not None else "tier" if tier is not None else "fleet"
    stages = latency_percentiles(since=since, until=until, node_id=node.pk if node is not None else None,
                                 tier_id=tier.pk if tier is not None else None)
    return {"scope": scope, "tier": tier.kind if tier is not None else None,
            "node": node.pk if node is not None else None, "minutes": minutes, "since": since, "until": until,
            "stages": stages}


def _latency_by_tier(since: dt.datetime, tier_id: int | None) -> dict[int, list[dict[str, Any]]]:
    """Per tier, per stage over the minutes from ``since``: the merged histograms' figures."""
    where = "r.minute >= %s"
    params: list[Any] = [since]
    if tier_id is not None:
        where = f"{where} AND r.tier_id = %s"
        params.append(tier_id)
    return _percentiles(_BUCKETS.format(key="r.tier_id", bin="0", table="telemetry_tierlatencyrollup",
                                        where=where), params)


def _with_histograms(summaries: list[dict[str, Any]], exact: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tier's stages: from the histograms where there are any, else the gateway's summaries
    (``exact`` false: a merge of per-window percentiles, an approximation)."""
    have = {d["stage"]: d for d in exact}
    order = {s: i for i, s in enumerate(Stage.values)}
    out = [*exact, *({**d, "exact": False} for d in summaries if d["stage"] not in have)]
    return sorted(out, key=lambda d: order.get(d["stage"], 99))


# Fields of each row of snapshot["nodes"], in order (rows are lists to keep a websocket frame small).
NODE_FIELDS = ["id", "hostname", "tier_id", "rack", "slot", "state", "cpu", "module_util", "temp_c",
               "power_w", "in_flight", "age_s"]
# Module states that take work (quarantined and failed modules are out).
SERVING_MODULE_STATES = (ModuleState.HEALTHY, ModuleState.DEGRADED)


def iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def node_rows(*, now: dt.datetime, tier_id: int | None = None) -> list[list[Any]]:
    """One compact row per node not retired (see NODE_FIELDS): state and the latest figures."""
    sql = """SELECT n.id, n.hostname, n.tier_id, r.name, n.slot, n.state, s.cpu_util, m.util, m.temp, m.power,
                    s.in_flight, s.last_seen
             FROM inventory_node n JOIN inventory_rack r ON r.id = n.rack_id
             LEFT JOIN telemetry_nodestatus s ON s.node_id = n.id
             LEFT JOIN (SELECT node_id, avg(util) AS util, max(temp_c) AS temp, sum(power_w) AS power
                        FROM telemetry_modulestatus GROUP BY node_id) m ON m.node_id = n.id
             WHERE n.state <> %s {tier}
             ORDER BY r.name, n.slot"""
    params: list[Any] = [NodeState.RETIRED]
    if tier_id is not None:
        params.append(tier_id)
    rows = []
    for pk, host, tid, rack, slot, state, cpu, util, temp, power, in_flight, seen in _rows(
            sql.format(tier="AND n.tier_id = %s" if tier_id is not None else ""), params):
        age = None if seen is None else round((now - seen).total_seconds(), 1)
        rows.append([pk, host, tid, rack, slot, state, _r(cpu, 3), _r(util, 3), _r(temp, 1), _r(power, 1),
                     in_flight, age])
    return rows


def _stage_latest(since: dt.datetime, tier_id: int | None) -> dict[int, list[dict[str, Any]]]:
    """Newest stage summary per (tier, stage): one probe of the (tier, stage, time) index each."""
    sql = """SELECT t.id, st.stage, s.time, s.p50_ms, s.p95_ms, s.p99_ms, s.count
             FROM inventory_tier t CROSS JOIN unnest(%s::text[]) AS st(stage)
             JOIN LATERAL (SELECT time, p50_ms, p95_ms, p99_ms, count FROM telemetry_stagesample x
                           WHERE x.tier_id = t.id AND x.stage = st.stage AND x.time >= %s
                           ORDER BY x.time DESC LIMIT 1) s ON true {tier}"""
    params: list[Any] = [list(Stage.values), since]
    if tier_id is not None:
        params.append(tier_id)
    order = {s: i for i, s in enumerate(Stage.values)}
    out: dict[int, list[dict[str, Any]]] = {}
    for tid, stage, _time, p50, p95, p99, count in _rows(
            sql.format(tier="WHERE t.id = %s" if tier_id is not None else ""), params):
        out.setdefault(tid, []).append(
            {"stage": stage, "p50_ms": _r(p50, 1), "p95_ms": _r(p95, 1), "p99_ms": _r(p99, 1), "count": count})
    for items in out.values():
        items.sort(key=lambda d: order.get(d["stage"], 99))
    return out


def _now_figures(fresh: dt.datetime, tier_id: int | None) -> dict[int, dict[str, Any]]:
    """Per tier, from the latest-state rows: reporting nodes, the active nodes' mean CPU, the work the
    serving nodes (active, cordoned, draining: still finishing requests) do in node-equivalents, the
    serving modules (healthy or degraded on active nodes), their mean utilisation and the module work
    of the serving nodes, and the requests in flight."""
    tier = "AND n.tier_id = %s" if tier_id is not None else ""
    extra: list[Any] = [tier_id] if tier_id is not None else []
    serving = list(SERVING_STATES)
    out: dict[int, dict[str, Any]] = defaultdict(dict)
    for tid, reporting, cpu, serving_cpu, in_flight in _rows(
            f"""SELECT n.tier_id, count(*) FILTER (WHERE s.last_seen >= %s),
                       avg(s.cpu_util) FILTER (WHERE s.last_seen >= %s AND n.state = %s),
                       avg(s.cpu_util) FILTER (WHERE s.last_seen >= %s AND n.state = ANY(%s)),
                       sum(s.in_flight) FILTER (WHERE s.last_seen >= %s)
                FROM inventory_node n LEFT JOIN telemetry_nodestatus s ON s.node_id = n.id
                WHERE n.state <> %s {tier} GROUP BY n.tier_id""",
            [fresh, fresh, NodeState.ACTIVE, fresh, serving, fresh, NodeState.RETIRED, *extra]):
        out[tid].update(reporting=int(reporting), cpu_util=cpu, serving_cpu=serving_cpu, in_flight=in_flight)
    for tid, on_active, util, on_serving, serving_util in _rows(
            f"""SELECT n.tier_id, count(*) FILTER (WHERE n.state = %s),
                       avg(ms.util) FILTER (WHERE ms.last_seen >= %s AND n.state = %s),
                       count(*), avg(ms.util) FILTER (WHERE ms.last_seen >= %s)
                FROM inventory_module m JOIN inventory_node n ON n.id = m.node_id
                LEFT JOIN telemetry_modulestatus ms ON ms.module_id = m.id
                WHERE n.state = ANY(%s) AND m.state = ANY(%s) {tier} GROUP BY n.tier_id""",
            [NodeState.ACTIVE, fresh, NodeState.ACTIVE, fresh, serving, list(SERVING_MODULE_STATES), *extra]):
        out[tid].update(serving_modules=int(on_active), module_util=util, busy_modules=(
            float(serving_util) * on_serving if serving_util is not None else None))
    return out


def _window_figures(since: dt.datetime, tier_id: int | None) -> dict[int, dict[str, Any]]:
    """Per tier over the rollups since ``since``: utilisation mean and p95 over node-minutes, queue
    depth mean and max, arrival, completion and output-token rates, and per-stage latency."""
    tier = "AND n.tier_id = %s" if tier_id is not None else ""
    tier_t = "AND tier_id = %s" if tier_id is not None else ""
    extra: list[Any] = [tier_id] if tier_id is not None else []
    out: dict[int, dict[str, Any]] = defaultdict(dict)
    for tid, mean, p95 in _rows(
            f"""SELECT n.tier_id, avg(r.cpu_util_mean),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY r.cpu_util_mean)
                FROM telemetry_noderollup r JOIN inventory_node n ON n.id = r.node_id
                WHERE r.minute >= %s {tier} GROUP BY n.tier_id""", [since, *extra]):
        out[tid].update(cpu_util_mean=_r(mean), cpu_util_p95=_r(p95))
    for tid, mean, p95 in _rows(
            f"""SELECT n.tier_id, avg(r.util_mean), percentile_cont(0.95) WITHIN GROUP (ORDER BY r.util_mean)
                FROM telemetry_modulerollup r JOIN inventory_node n ON n.id = r.node_id
                WHERE r.minute >= %s {tier} GROUP BY n.tier_id""", [since, *extra]):
        out[tid].update(module_util_mean=_r(mean), module_util_p95=_r(p95))
    for tid, mean, mx, arr, comp, in_tok, out_tok, win in _rows(
            f"""SELECT tier_id, sum(queue_depth_mean * samples) / nullif(sum(samples), 0), max(queue_depth_max),
                       sum(arrivals), sum(completions), sum(input_tokens), sum(output_tokens), sum(window_s)
                FROM telemetry_tierrollup WHERE minute >= %s {tier_t} GROUP BY tier_id""", [since, *extra]):
        out[tid].update(
            queue_depth_mean=_r(mean, 2), queue_depth_max=mx,
            requests_per_s=_r(float(arr) / win, 3) if win else None,
            completions_per_s=_r(float(comp) / win, 3) if win else None,
            input_tokens_per_s=_r(float(in_tok) / win, 1) if win else None,
            output_tokens_per_s=_r(float(out_tok) / win, 1) if win else None)
    summaries = _stage_summary(tier_id, since)
    exact = _latency_by_tier(since, tier_id)
    for tid in summaries.keys() | exact.keys():
        out[tid]["stages"] = _with_histograms(summaries.get(tid, []), exact.get(tid, []))
    return out


# The REST snapshot's default window: its figures are computed by the rollup run (WindowSummary) and
# read while that is at most SUMMARY_MAX_AGE old (the rollups run every minute).
SUMMARY_MINUTES = 15
SUMMARY_MAX_AGE = dt.timedelta(seconds=150)


def window_summary_figures(*, now: dt.datetime) -> tuple[dt.datetime, dict[int, dict[str, Any]]]:
    """The window figures of every tier over the SUMMARY_MINUTES up to ``now`` (for the rollup run)."""
    since = _since(now, SUMMARY_MINUTES)
    return since, _window_figures(since, None)


def _window(now: dt.datetime, minutes: int, tier_id: int | None) -> tuple[dt.datetime, dict[int, dict[str, Any]]]:
    """(start of the window, window figures per tier): the rollup run's summary when it is fresh."""
    if minutes == SUMMARY_MINUTES:
        summary = WindowSummary.objects.filter(
            minutes=minutes, computed_at__gt=now - SUMMARY_MAX_AGE, computed_at__lte=now).first()
        if summary is not None:
            figures = {int(tid): f for tid, f in summary.tiers.items()}
            return summary.since, {tid: f for tid, f in figures.items() if tier_id is None or tid == tier_id}
    since = _since(now, minutes)
    return since, _window_figures(since, tier_id)


def fleet_snapshot(*, now: dt.datetime | None = None, window_minutes: int | None = 15, nodes: bool = False,
                   tier_id: int | None = None) -> dict[str, Any]:
    """The fleet snapshot: the REST snapshot, every websocket frame, the capacity guard, the
    autoscaler and the planner's what-if read this one function (docs/telemetry.md defines each
    figure). Per tier:

    - node counts: ``by_state`` and one count per state (``active``, ``standby``, ``cordoned``,
      ``draining``, ``drained``, ``maintenance``, ``unreachable``, ``failed``), ``total`` (not
      retired), ``held`` = cordoned + draining + drained, ``out`` = unreachable + failed;
    - ``serving`` = active + cordoned + draining (nodes still doing work);
    - from the latest-state rows (a report is fresh for FRESH_S seconds after it was received):
      ``reporting`` nodes, ``cpu_util`` (mean over active nodes), ``busy_nodes`` (the serving nodes'
      mean CPU × their count: the tier's CPU work in node-equivalents), ``serving_modules`` (healthy
      or degraded on active nodes) and their mean ``module_util``, ``busy_modules`` (the same for the
      modules of serving nodes), ``in_flight`` (sum), and the
      gateway's newest ``queue_depth``, ``requests_per_s``, ``completions_per_s`` and
      ``output_tokens_per_s``; ``stages``: the newest latency summary per stage;
    - ``window`` (when ``window_minutes``): the same kinds of figures over the per-minute rollups
      since ``window.since``; for the default 15 minutes, as of the last rollup run (WindowSummary).

    With ``nodes``, one compact row per node (``node_fields`` names the columns).
    """
    now = now or timezone.now()
    fresh = now - dt.timedelta(seconds=FRESH_S)
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    node_qs = Node.objects.order_by()
    if tier_id is not None:
        node_qs = node_qs.filter(tier_id=tier_id)
    for tid, state, n in node_qs.values_list("tier_id", "state").annotate(n=Count("id")):
        counts[tid][state] = n
    now_figures = _now_figures(fresh, tier_id)
    since, window = _window(now, window_minutes, tier_id) if window_minutes else (now, {})
    latest = {s.tier_id: s for s in TierStatus.objects.filter(last_seen__gte=fresh)}
    stages = _stage_latest(now - dt.timedelta(seconds=5 * FRESH_S), tier_id)
    tiers_qs = Tier.objects.order_by("level")
    if tier_id is not None:
        tiers_qs = tiers_qs.filter(pk=tier_id)
    tiers = []
    for tier in tiers_qs:
        by_state = counts.get(tier.pk, {})
        n = {state: by_state.get(state, 0) for state in NodeState.values}
        f = now_figures.get(tier.pk, {})
        ts = latest.get(tier.pk)
        window_s = ts.window_s if ts is not None and ts.window_s else None
        item: dict[str, Any] = {
            "id": tier.pk, "kind": tier.kind, "name": tier.name, "level": tier.level,
            "min_active": tier.min_active_nodes, "max_active": tier.max_active_nodes,
            "by_state": by_state, "total": sum(by_state.values()) - n[NodeState.RETIRED],
            **{state: n[state] for state in NodeState.values if state != NodeState.RETIRED},
            "held": n[NodeState.CORDONED] + n[NodeState.DRAINING] + n[NodeState.DRAINED],
            "out": n[NodeState.UNREACHABLE] + n[NodeState.FAILED],
            "reporting": f.get("reporting", 0),
            "serving": n[NodeState.ACTIVE] + n[NodeState.CORDONED] + n[NodeState.DRAINING],
            "cpu_util": _r(f.get("cpu_util"), 3),
            "busy_nodes": (_r(float(f["serving_cpu"]) * (n[NodeState.ACTIVE] + n[NodeState.CORDONED]
                                                          + n[NodeState.DRAINING]), 2)
                           if f.get("serving_cpu") is not None else None),
            "serving_modules": f.get("serving_modules", 0),
            "module_util": _r(f.get("module_util"), 3),
            "busy_modules": _r(f.get("busy_modules"), 2),
            "in_flight": f.get("in_flight"),
            "queue_depth": ts.queue_depth if ts is not None else None,
            "queue_time": iso(ts.time) if ts is not None else None,
            "requests_per_s": _r(ts.arrivals / window_s, 3) if ts is not None and window_s else None,
            "completions_per_s": _r(ts.completions / window_s, 3) if ts is not None and window_s else None,
            "output_tokens_per_s": _r(ts.output_tokens / window_s, 1) if ts is not None and window_s else None,
            "stages": stages.get(tier.pk, []),
        }
        if window_minutes:
            item["window"] = {"minutes": window_minutes, "since": iso(since), "stages": [], **window.get(tier.pk, {})}
        tiers.append(item)
    snapshot: dict[str, Any] = {"time": iso(now), "fresh_s": FRESH_S, "tiers": tiers}
    if nodes:
        snapshot["node_fields"] = NODE_FIELDS
        snapshot["nodes"] = node_rows(now=now, tier_id=tier_id)
    return snapshot


def ingest_recent(*, now: dt.datetime, seconds: int = 10, limit: int = 50) -> dict[str, Any]:
    """The newest ingest batches (ids and when the last one arrived), so a client can tell which
    telemetry a frame reflects."""
    batches = list(IngestBatch.objects.filter(received_at__gte=now - dt.timedelta(seconds=seconds))
                   .order_by("-received_at").values_list("batch_id", "received_at")[:limit])
    newest = batches[0][1] if batches else NodeStatus.objects.order_by("-last_seen").values_list(
        "last_seen", flat=True).first()
    return {"last_received_at": iso(newest), "recent_batches": [b for b, _ in batches]}


def utilisation_series(*, minutes: int, tier_id: int | None = None, now: dt.datetime | None = None
                       ) -> dict[int, dict[str, list[Any]]]:
    """Per tier and minute, from the rollups: mean node CPU and mean module utilisation.
    {tier id: {"cpu": [(minute, value)], "module": [(minute, value)]}}"""
    now = now or timezone.now()
    since = _since(now, minutes)
    tier = "AND n.tier_id = %s" if tier_id is not None else ""
    params: list[Any] = [since] + ([tier_id] if tier_id is not None else [])
    out: dict[int, dict[str, list[Any]]] = {}
    for tid, minute, value in _rows(
            f"""SELECT n.tier_id, r.minute, avg(r.cpu_util_mean) FROM telemetry_noderollup r
                JOIN inventory_node n ON n.id = r.node_id WHERE r.minute >= %s {tier}
                GROUP BY n.tier_id, r.minute ORDER BY r.minute""", params):
        out.setdefault(tid, {"cpu": [], "module": []})["cpu"].append((minute, _r(value, 3)))
    for tid, minute, value in _rows(
            f"""SELECT n.tier_id, r.minute, avg(r.util_mean) FROM telemetry_modulerollup r
                JOIN inventory_node n ON n.id = r.node_id WHERE r.minute >= %s {tier}
                GROUP BY n.tier_id, r.minute ORDER BY r.minute""", params):
        out.setdefault(tid, {"cpu": [], "module": []})["module"].append((minute, _r(value, 3)))
    return out


def node_latest(*, node: Node, now: dt.datetime) -> dict[str, Any]:
    """A node's newest report and its modules' ({"node": {...} | None, "modules": {module id: {...}}})."""
    status = NodeStatus.objects.filter(node=node).first()
    modules = {
        s.module_id: {"time": iso(s.time), "util": _r(s.util, 3), "temp_c": _r(s.temp_c, 1),
                      "power_w": _r(s.power_w, 1), "link_width": s.link_width,
                      "link_width_expected": s.link_width_expected, "ecc_corrected": s.ecc_corrected,
                      "ecc_uncorrected": s.ecc_uncorrected, "errors": s.errors}
        for s in ModuleStatus.objects.filter(node=node)}
    return {
        "node": None if status is None else {
            "time": iso(status.time), "age_s": round((now - status.last_seen).total_seconds(), 1),
            "cpu_util": _r(status.cpu_util, 3), "mem_util": _r(status.mem_util, 3), "in_flight": status.in_flight,
            "load1": _r(status.load1, 2), "threads": status.threads},
        "modules": modules,
    }


def _tier_filter(tier: Tier | None) -> list[Tier]:
    return [tier] if tier is not None else list(Tier.objects.order_by("level"))


# The most points a chart series carries: a longer range is merged into bins of whole minutes in SQL
# (the 24 h range: 4-minute bins), so neither the database nor Python handles a row per minute.
MAX_POINTS = 360


def series_step(minutes: int) -> int:
    """Minutes per point of a series over ``minutes``."""
    return max(1, -(-minutes // MAX_POINTS))


def queue_depth_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per tier, per bin of ``series_step(minutes)`` minutes (aligned on the window's start): queue depth
    mean (weighted by samples) and max, arrivals and completions per second (summed over the bin's
    seconds); and the newest queue depth."""
    now = now or timezone.now()
    since = _since(now, minutes)
    step = series_step(minutes)
    tiers = list(_tier_filter(tier))
    points: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for tid, minute, mean, mx, arrivals, completions, window_s in _rows(
            """SELECT tier_id, date_bin(%s, minute, %s) AS bin,
                      CASE WHEN sum(samples) > 0 THEN sum(queue_depth_mean * samples) / sum(samples)
                           ELSE avg(queue_depth_mean) END,
                      max(queue_depth_max), sum(arrivals), sum(completions), sum(window_s)
               FROM telemetry_tierrollup WHERE minute >= %s AND tier_id = ANY(%s)
               GROUP BY tier_id, bin ORDER BY tier_id, bin""",
            [dt.timedelta(minutes=step), since, since, [t.pk for t in tiers]]):
        points[tid].append(
            {"minute": minute, "queue_depth_mean": _r(mean, 2), "queue_depth_max": mx,
             "arrivals_per_s": _r(float(arrivals) / window_s, 3) if window_s else None,
             "completions_per_s": _r(float(completions) / window_s, 3) if window_s else None})
    statuses = {s.tier_id: s for s in TierStatus.objects.filter(tier__in=tiers)}
    out = []
    for t in tiers:
        status = statuses.get(t.pk)
        latest = {"time": status.time, "queue_depth": status.queue_depth} if status else None
        out.append({"tier": t.kind, "points": points.get(t.pk, []), "latest": latest})
    return {"minutes": minutes, "step_minutes": step, "tiers": out}


def _stage_points(tier_ids: list[int], since: dt.datetime, step: int, *, by_tier: bool
                  ) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """Points per (tier id, or 0 for every tier merged, stage), per bin of ``step`` minutes from
    ``since``: from the histograms' bucket counts where a bin has any (``exact`` true), else from
    the gateway's summaries (``exact`` false). Merged over the tiers, a stage's bin takes the
    histograms only when every tier the summaries report it for sent histograms too (the external
    tier's generation has no nodes to send any: merging only the hybrid tier's buckets would leave
    the large model's calls out of the fleet's generation figure)."""
    width = dt.timedelta(minutes=step)
    key = "tier_id" if by_tier else "0"
    points: dict[tuple[int, str], dict[dt.datetime, dict[str, Any]]] = defaultdict(dict)
    summarised: dict[tuple[str, dt.datetime], set[int]] = {}  # the tiers whose summaries report a stage's bin
    for tid, stage, minute, count, p50, p95, p99, mx, tiers in _rows(
            f"""SELECT {key} AS key, stage, date_bin(%s, minute, %s) AS bin, sum(count),
                      CASE WHEN sum(count) > 0 THEN sum(p50_ms * count) / sum(count) ELSE avg(p50_ms) END,
                      max(p95_ms), max(p99_ms), max(max_ms), array_agg(DISTINCT tier_id)
               FROM telemetry_stagerollup WHERE minute >= %s AND tier_id = ANY(%s)
               GROUP BY key, stage, bin""",
            [width, since, since, tier_ids]):
        points[(tid, stage)][minute] = {"minute": minute, "count": int(count), "p50_ms": _r(p50, 2),
                                        "p95_ms": _r(p95, 2), "p99_ms": _r(p99, 2), "max_ms": _r(mx, 2),
                                        "exact": False}
        summarised[(stage, minute)] = set(tiers)
    sent: dict[tuple[str, dt.datetime], set[int]] = defaultdict(set)  # the tiers whose nodes sent histograms
    if not by_tier:
        for stage, minute, tid in _rows(
                """SELECT DISTINCT stage, date_bin(%s, minute, %s), tier_id FROM telemetry_tierlatencyrollup
                   WHERE minute >= %s AND tier_id = ANY(%s)""", [width, since, since, tier_ids]):
            sent[(stage, minute)].add(tid)
    for tid, minute, figures in _percentile_rows(
            _BUCKETS.format(key=f"r.{key}" if by_tier else "0", bin="date_bin(%s, r.minute, %s)",
                            table="telemetry_tierlatencyrollup", where="r.minute >= %s AND r.tier_id = ANY(%s)"),
            [width, since, since, tier_ids]):
        stage = figures.pop("stage")
        if not by_tier and not summarised.get((stage, minute), set()) <= sent[(stage, minute)]:
            continue  # a tier without histograms reports this stage: the summaries' merge covers them all
        points[(tid, stage)][minute] = {"minute": minute, **figures}
    return {k: [p for _, p in sorted(by_minute.items())] for k, by_minute in points.items()}


def stage_latency_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per tier and stage, per bin of ``series_step(minutes)`` minutes: count, p50, p95, p99 and max.
    From the nodes' latency histograms where a bin has any (``exact`` true: the bin's bucket counts
    added in SQL, each percentile within 1 %); else from the gateway's summaries (``exact`` false:
    count summed, p50 the count-weighted mean of the minutes' p50, p95/p99/max the largest of the
    minutes', as a StageRollup merges its windows)."""
    now = now or timezone.now()
    since = _since(now, minutes)
    step = series_step(minutes)
    tiers = list(_tier_filter(tier))
    points = _stage_points([t.pk for t in tiers], since, step, by_tier=True)
    out = [{"tier": t.kind, "stages": [{"stage": s, "points": points.get((t.pk, s), [])} for s in Stage.values]}
           for t in tiers]
    return {"minutes": minutes, "step_minutes": step, "tiers": out}


def fleet_stage_latency_series(*, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """As ``stage_latency_series``, with every tier merged per stage (a stage may run in more than one
    tier): the histograms' bucket counts of all tiers added (exact) where every tier reporting the
    stage sent them, else the summaries merged."""
    now = now or timezone.now()
    since = _since(now, minutes)
    step = series_step(minutes)
    points = _stage_points(list(Tier.objects.values_list("pk", flat=True)), since, step, by_tier=False)
    return {"minutes": minutes, "step_minutes": step,
            "stages": [{"stage": s, "points": points.get((0, s), [])} for s in Stage.values]}


def node_history(*, node: Node, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """A node's per-minute history and latest state, with its modules'."""
    now = now or timezone.now()
    since = _since(now, minutes)
    status = NodeStatus.objects.filter(node=node).first()
    points = [
        {"minute": r.minute, "cpu_util_mean": _r(r.cpu_util_mean), "cpu_util_max": _r(r.cpu_util_max),
         "mem_util_mean": _r(r.mem_util_mean), "load1_mean": _r(r.load1_mean, 2),
         "in_flight_mean": _r(r.in_flight_mean, 2), "in_flight_max": r.in_flight_max}
        for r in NodeRollup.objects.filter(node_id=node.pk, minute__gte=since).order_by("minute")
    ]
    module_points: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in ModuleRollup.objects.filter(node_id=node.pk, minute__gte=since).order_by("minute"):
        module_points[m.module_id].append(
            {"minute": m.minute, "util_mean": _r(m.util_mean), "temp_c_max": _r(m.temp_c_max, 1),
             "power_w_mean": _r(m.power_w_mean, 2), "link_width_min": m.link_width_min,
             "link_width_expected": m.link_width_expected, "ecc_corrected": m.ecc_corrected_max,
             "ecc_uncorrected": m.ecc_uncorrected_max, "errors": m.errors_max})
    module_status = {s.module_id: s for s in ModuleStatus.objects.filter(node=node)}
    modules = []
    for module in node.modules.order_by("slot"):
        ms = module_status.get(module.pk)
        modules.append({
            "id": module.pk, "serial": module.serial, "slot": module.slot,
            "latest": None if ms is None else {
                "time": ms.time, "util": ms.util, "temp_c": ms.temp_c, "power_w": ms.power_w,
                "link_width": ms.link_width, "link_width_expected": ms.link_width_expected,
                "ecc_corrected": ms.ecc_corrected, "ecc_uncorrected": ms.ecc_uncorrected, "errors": ms.errors},
            "points": module_points.get(module.pk, []),
        })
    return {
        "node": {"id": node.pk, "hostname": node.hostname, "tier": node.tier.kind, "state": node.state},
        "minutes": minutes,
        "latest": None if status is None else {
            "time": status.time, "last_seen": status.last_seen, "cpu_util": status.cpu_util,
            "mem_util": status.mem_util, "load1": status.load1, "in_flight": status.in_flight,
            "threads": status.threads},
        "points": points,
        "modules": modules,
    }


def observed_traffic(*, window_s: int = 900, now: dt.datetime | None = None) -> dict[str, Any] | None:
    """Traffic over the last ``window_s`` seconds, for the planner, from the fleet snapshot's window.

    requests_per_s is the arrival rate at the entry tier (the lowest-level tier
    with data: every request enters there); tokens per request are the tokens
    reported by all tiers divided by those entry requests. None without data.
    """
    snapshot = fleet_snapshot(now=now, window_minutes=max(1, round(window_s / 60)))
    rated = [t for t in snapshot["tiers"] if t["window"].get("requests_per_s") is not None]
    if not rated:
        return None
    rate = float(rated[0]["window"]["requests_per_s"])
    tokens_in = sum(float(t["window"]["input_tokens_per_s"]) for t in rated)
    tokens_out = sum(float(t["window"]["output_tokens_per_s"]) for t in rated)
    return {
        "window_s": window_s,
        "requests_per_s": rate,
        "input_tokens_per_request": tokens_in / rate if rate else None,
        "output_tokens_per_request": tokens_out / rate if rate else None,
        "per_tier": {t["kind"]: {"requests_per_s": float(t["window"]["requests_per_s"])} for t in rated},
    }


# ---- inputs of the health sweep (apps/health): a few set-based reads over latest state and rollups ----


def node_status_rows() -> dict[int, dict[str, Any]]:
    """Every node's latest state: {node id: {last_seen, cpu_util, in_flight}} (one query)."""
    return {r["node_id"]: dict(r) for r in NodeStatus.objects.values("node_id", "last_seen", "cpu_util", "in_flight")}


def module_status_rows() -> dict[int, dict[str, Any]]:
    """Every module's latest state: {module id: {last_seen, util, temp_c, ...}} (one query)."""
    return {r["module_id"]: dict(r) for r in ModuleStatus.objects.values(
        "module_id", "node_id", "last_seen", "util", "temp_c", "power_w", "link_width", "link_width_expected",
        "ecc_corrected", "ecc_uncorrected", "errors")}


def node_cpu_minutes(*, since: dt.datetime) -> dict[int, list[tuple[dt.datetime, float, float]]]:
    """Per node, its minute rollups since ``since``: [(minute, cpu mean, cpu max)] oldest first (one query)."""
    out: dict[int, list[tuple[dt.datetime, float, float]]] = defaultdict(list)
    for node_id, minute, mean, top in (NodeRollup.objects.filter(minute__gte=since).order_by("minute")
                                       .values_list("node_id", "minute", "cpu_util_mean", "cpu_util_max")):
        out[node_id].append((minute, mean, top))
    return dict(out)


def module_counter_baselines(*, since: dt.datetime) -> dict[int, dict[str, Any]]:
    """Per module, the counters at the start of the window: the smallest per-minute maxima since
    ``since`` (counters only grow between reboots) and the first minute that holds them (one query)."""
    from django.db.models import Min

    rows = ModuleRollup.objects.filter(minute__gte=since).values("module_id").annotate(
        first_minute=Min("minute"), ecc_corrected=Min("ecc_corrected_max"),
        ecc_uncorrected=Min("ecc_uncorrected_max"), errors=Min("errors_max"))
    return {r["module_id"]: dict(r) for r in rows}


def tier_queue_minutes(*, since: dt.datetime) -> dict[int, list[tuple[dt.datetime, float]]]:
    """Per tier, its mean queue depth per minute since ``since``, oldest first (one query)."""
    out: dict[int, list[tuple[dt.datetime, float]]] = defaultdict(list)
    for tier_id, minute, mean in (TierRollup.objects.filter(minute__gte=since).order_by("minute")
                                  .values_list("tier_id", "minute", "queue_depth_mean")):
        out[tier_id].append((minute, mean))
    return dict(out)


def endpoint_minutes(*, since: dt.datetime) -> dict[int, list[dict[str, Any]]]:
    """Per external endpoint, its per-minute figures since ``since`` (minute, window_s, requests, errors,
    tokens, p95_ms), oldest first (one query)."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for endpoint_id, minute, window_s, requests, errors, tokens, p95 in (
            EndpointRollup.objects.filter(minute__gte=since).order_by("minute")
            .values_list("endpoint_id", "minute", "window_s", "requests", "errors", "tokens", "p95_ms")):
        out[endpoint_id].append({"minute": minute, "window_s": window_s, "requests": requests, "errors": errors,
                                 "tokens": tokens, "p95_ms": p95})
    return dict(out)


def stage_p95_minutes(*, since: dt.datetime) -> dict[int, dict[str, list[float]]]:
    """Per tier and stage, the per-minute p95 latencies (ms) since ``since``, oldest first (one query)."""
    out: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for tier_id, stage, p95 in (StageRollup.objects.filter(minute__gte=since, count__gt=0).order_by("minute")
                                .values_list("tier_id", "stage", "p95_ms")):
        out[tier_id][stage].append(p95)
    return {t: dict(s) for t, s in out.items()}


# ---- cohorts of nodes (rollouts compare the nodes they upgraded with the ones not reached yet) ----


def stage_cohorts(*, cohorts: dict[str, list[int]], since: dt.datetime, until: dt.datetime
                  ) -> dict[str, dict[str, dict[str, Any]]]:
    """Per cohort (a name and its node ids) and stage, over the per-node stage rollups of the minutes
    from ``since`` to ``until`` (both included, whole minutes): requests, errors and their rate, p95
    as the request-weighted mean of the node-minutes' p95 (and the worst node-minute's), and how many
    nodes and minutes reported. A stage no node of the cohort reported is absent (one query per cohort)."""
    from django.db.models import F, Max, Sum

    lo, hi = since.replace(second=0, microsecond=0), until
    out: dict[str, dict[str, dict[str, Any]]] = {}
    order = {st: i for i, st in enumerate(Stage.values)}
    for name, node_ids in cohorts.items():
        rows = (StageNodeRollup.objects.filter(node_id__in=node_ids, minute__gte=lo, minute__lte=hi, count__gt=0)
                .values("stage").annotate(requests=Sum("count"), failed=Sum("errors"),
                                          weighted=Sum(F("p95_ms") * F("count")), worst=Max("p95_ms"),
                                          nodes=Count("node_id", distinct=True),
                                          minutes=Count("minute", distinct=True)))
        stages: dict[str, dict[str, Any]] = {}
        for r in sorted(rows, key=lambda r: order.get(r["stage"], 99)):
            requests = int(r["requests"])
            stages[r["stage"]] = {
                "requests": requests, "errors": int(r["failed"]), "error_rate": _r(r["failed"] / requests, 6),
                "p95_ms": _r(r["weighted"] / requests, 2), "p95_max_ms": _r(r["worst"], 2),
                "nodes": int(r["nodes"]), "minutes": int(r["minutes"])}
        out[name] = stages
    return out


def stage_cohort_series(*, cohorts: dict[str, list[int]], since: dt.datetime, until: dt.datetime
                        ) -> dict[str, list[dict[str, Any]]]:
    """Per cohort, per minute from ``since`` to ``until``: each stage's request-weighted p95 (ms) and
    the cohort's error rate over all stages, oldest first (one query per cohort)."""
    from django.db.models import F, Sum

    lo = since.replace(second=0, microsecond=0)
    out: dict[str, list[dict[str, Any]]] = {}
    for name, node_ids in cohorts.items():
        points: dict[dt.datetime, dict[str, Any]] = {}
        for r in (StageNodeRollup.objects.filter(node_id__in=node_ids, minute__gte=lo, minute__lte=until,
                                                 count__gt=0)
                  .values("minute", "stage").annotate(requests=Sum("count"), failed=Sum("errors"),
                                                      weighted=Sum(F("p95_ms") * F("count")))
                  .order_by("minute")):
            p = points.setdefault(r["minute"], {"minute": r["minute"], "stages": {}, "requests": 0, "errors": 0})
            p["stages"][r["stage"]] = _r(r["weighted"] / r["requests"], 2)
            p["requests"] += int(r["requests"])
            p["errors"] += int(r["failed"])
        out[name] = [{"minute": iso(p["minute"]), "p95_ms": p["stages"],
                      "error_rate": _r(p["errors"] / p["requests"], 6) if p["requests"] else None}
                     for p in points.values()]
    return out
