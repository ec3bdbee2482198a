"""The fleet snapshot (dashboard, REST and websocket): per tier the figures now and over a window, the
nodes' compact rows, and a node's newest report."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db.models import Avg, Count, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from apps.inventory.choices import SERVING_STATES, ModuleState, NodeState
from apps.inventory.models import Node, Tier
from apps.telemetry.choices import Stage
from apps.telemetry.models import IngestBatch, ModuleStatus, NodeStatus, TierStatus, WindowSummary
from apps.telemetry.selectors.common import FRESH_S, iso, rounded, sql_rows, window_start
from apps.telemetry.selectors.latency import _latency_by_tier, _with_histograms


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
    for tid, stage, count, p50, p95, p99, mx in sql_rows(
        sql.format(tier="AND tier_id = %s" if tier_id is not None else ""), params
    ):
        out[tid].append({"stage": stage, "count": int(count), "p50_ms": rounded(p50, 2), "p95_ms": rounded(p95, 2),
                         "p99_ms": rounded(p99, 2), "max_ms": rounded(mx, 2)})
    for items in out.values():
        items.sort(key=lambda d: order.get(d["stage"], 99))
    return out


# Fields of each row of snapshot["nodes"], in order (rows are lists to keep a websocket frame small).
NODE_FIELDS = ["id", "hostname", "tier_id", "rack", "slot", "state", "cpu", "module_util", "temp_c",
               "power_w", "in_flight", "age_s"]


# Module states that take work (quarantined and failed modules are out).
SERVING_MODULE_STATES = (ModuleState.HEALTHY, ModuleState.DEGRADED)


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
    for pk, host, tid, rack, slot, state, cpu, util, temp, power, in_flight, seen in sql_rows(
            sql.format(tier="AND n.tier_id = %s" if tier_id is not None else ""), params):
        age = None if seen is None else round((now - seen).total_seconds(), 1)
        rows.append([pk, host, tid, rack, slot, state, rounded(cpu, 3), rounded(util, 3), rounded(temp, 1),
                     rounded(power, 1), in_flight, age])
    return rows


def nodes_with_load(nodes: QuerySet[Node]) -> QuerySet[Node]:
    """``nodes`` annotated with the figures of their newest report, as the snapshot's node rows carry
    them (NODE_FIELDS): ``cpu`` and ``in_flight`` from the node's latest state, ``module_util`` the
    mean over its modules' latest states; None where no report says (unknown, never zero). Columns
    to sort a list of nodes by load: one join and one correlated subquery, for the listed rows."""
    util = (ModuleStatus.objects.filter(node=OuterRef("pk")).order_by().values("node")
            .annotate(mean=Avg("util")).values("mean"))
    return nodes.annotate(cpu=F("status__cpu_util"), in_flight=F("status__in_flight"),
                          module_util=Subquery(util))


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
    for tid, stage, _time, p50, p95, p99, count in sql_rows(
            sql.format(tier="WHERE t.id = %s" if tier_id is not None else ""), params):
        out.setdefault(tid, []).append(
            {"stage": stage, "p50_ms": rounded(p50, 1), "p95_ms": rounded(p95, 1), "p99_ms": rounded(p99, 1),
             "count": count})
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
    for tid, reporting, cpu, serving_cpu, in_flight in sql_rows(
            f"""SELECT n.tier_id, count(*) FILTER (WHERE s.last_seen >= %s),
                       avg(s.cpu_util) FILTER (WHERE s.last_seen >= %s AND n.state = %s),
                       avg(s.cpu_util) FILTER (WHERE s.last_seen >= %s AND n.state = ANY(%s)),
                       sum(s.in_flight) FILTER (WHERE s.last_seen >= %s)
                FROM inventory_node n LEFT JOIN telemetry_nodestatus s ON s.node_id = n.id
                WHERE n.state <> %s {tier} GROUP BY n.tier_id""",
            [fresh, fresh, NodeState.ACTIVE, fresh, serving, fresh, NodeState.RETIRED, *extra]):
        out[tid].update(reporting=int(reporting), cpu_util=cpu, serving_cpu=serving_cpu, in_flight=in_flight)
    for tid, on_active, util, on_serving, serving_util in sql_rows(
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
    for tid, mean, p95 in sql_rows(
            f"""SELECT n.tier_id, avg(r.cpu_util_mean),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY r.cpu_util_mean)
                FROM telemetry_noderollup r JOIN inventory_node n ON n.id = r.node_id
                WHERE r.minute >= %s {tier} GROUP BY n.tier_id""", [since, *extra]):
        out[tid].update(cpu_util_mean=rounded(mean), cpu_util_p95=rounded(p95))
    for tid, mean, p95 in sql_rows(
            f"""SELECT n.tier_id, avg(r.util_mean), percentile_cont(0.95) WITHIN GROUP (ORDER BY r.util_mean)
                FROM telemetry_modulerollup r JOIN inventory_node n ON n.id = r.node_id
                WHERE r.minute >= %s {tier} GROUP BY n.tier_id""", [since, *extra]):
        out[tid].update(module_util_mean=rounded(mean), module_util_p95=rounded(p95))
    for tid, mean, mx, arr, comp, in_tok, out_tok, win in sql_rows(
            f"""SELECT tier_id, sum(queue_depth_mean * samples) / nullif(sum(samples), 0), max(queue_depth_max),
                       sum(arrivals), sum(completions), sum(input_tokens), sum(output_tokens), sum(window_s)
                FROM telemetry_tierrollup WHERE minute >= %s {tier_t} GROUP BY tier_id""", [since, *extra]):
        out[tid].update(
            queue_depth_mean=rounded(mean, 2), queue_depth_max=mx,
            requests_per_s=rounded(float(arr) / win, 3) if win else None,
            completions_per_s=rounded(float(comp) / win, 3) if win else None,
            input_tokens_per_s=rounded(float(in_tok) / win, 1) if win else None,
            output_tokens_per_s=rounded(float(out_tok) / win, 1) if win else None)
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
    since = window_start(now, SUMMARY_MINUTES)
    return since, _window_figures(since, None)


def _window(now: dt.datetime, minutes: int, tier_id: int | None) -> tuple[dt.datetime, dict[int, dict[str, Any]]]:
    """(start of the window, window figures per tier): the rollup run's summary when it is fresh."""
    if minutes == SUMMARY_MINUTES:
        summary = WindowSummary.objects.filter(
            minutes=minutes, computed_at__gt=now - SUMMARY_MAX_AGE, computed_at__lte=now).first()
        if summary is not None:
            figures = {int(tid): f for tid, f in summary.tiers.items()}
            return summary.since, {tid: f for tid, f in figures.items() if tier_id is None or tid == tier_id}
    since = window_start(now, minutes)
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
            "cpu_util": rounded(f.get("cpu_util"), 3),
            "busy_nodes": (rounded(float(f["serving_cpu"]) * (n[NodeState.ACTIVE] + n[NodeState.CORDONED]
                                                          + n[NodeState.DRAINING]), 2)
                           if f.get("serving_cpu") is not None else None),
            "serving_modules": f.get("serving_modules", 0),
            "module_util": rounded(f.get("module_util"), 3),
            "busy_modules": rounded(f.get("busy_modules"), 2),
            "in_flight": f.get("in_flight"),
            "queue_depth": ts.queue_depth if ts is not None else None,
            "queue_time": iso(ts.time) if ts is not None else None,
            "requests_per_s": rounded(ts.arrivals / window_s, 3) if ts is not None and window_s else None,
            "completions_per_s": rounded(ts.completions / window_s, 3) if ts is not None and window_s else None,
            "output_tokens_per_s": rounded(ts.output_tokens / window_s, 1) if ts is not None and window_s else None,
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


def node_latest(*, node: Node, now: dt.datetime) -> dict[str, Any]:
    """A node's newest report and its modules' ({"node": {...} | None, "modules": {module id: {...}}})."""
    status = NodeStatus.objects.filter(node=node).first()
    modules = {
        s.module_id: {"time": iso(s.time), "util": rounded(s.util, 3), "temp_c": rounded(s.temp_c, 1),
                      "power_w": rounded(s.power_w, 1), "link_width": s.link_width,
                      "link_width_expected": s.link_width_expected, "ecc_corrected": s.ecc_corrected,
                      "ecc_uncorrected": s.ecc_uncorrected, "errors": s.errors}
        for s in ModuleStatus.objects.filter(node=node)}
    return {
        "node": None if status is None else {
            "time": iso(status.time), "age_s": round((now - status.last_seen).total_seconds(), 1),
            "cpu_util": rounded(status.cpu_util, 3), "mem_util": rounded(status.mem_util, 3),
            "in_flight": status.in_flight, "load1": rounded(status.load1, 2), "threads": status.threads},
        "modules": modules,
    }
