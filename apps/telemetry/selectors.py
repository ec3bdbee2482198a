"""Reads of telemetry. Dashboard reads use the per-minute rollups and the
latest-state rows only, never the raw samples (rollups include the current,
partial minute as of the last rollup run, at most about a minute old; the
latest-state rows are as fresh as the last batch)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.inventory.choices import NodeState
from apps.inventory.models import Node, Tier
from apps.inventory.selectors import fleet_counts
from apps.telemetry.choices import Stage
from apps.telemetry.models import (
    ModuleRollup,
    ModuleStatus,
    NodeRollup,
    NodeStatus,
    StageRollup,
    TierRollup,
    TierStatus,
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


def fleet_snapshot(*, minutes: int = 15, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per tier: nodes by state, CPU and module utilisation (mean and p95 over the
    node-minutes of the window, plus the mean of the latest samples), queue depth
    (latest, window mean and max), request rate and per-stage latency."""
    now = now or timezone.now()
    since = _since(now, minutes)
    fresh = now - dt.timedelta(seconds=FRESH_S)
    counts = fleet_counts()
    cpu = {t: (m, p) for t, m, p in _rows(
        """SELECT n.tier_id, avg(r.cpu_util_mean), percentile_cont(0.95) WITHIN GROUP (ORDER BY r.cpu_util_mean)
           FROM telemetry_noderollup r JOIN inventory_node n ON n.id = r.node_id
           WHERE r.minute >= %s GROUP BY n.tier_id""", [since])}
    mod = {t: (m, p) for t, m, p in _rows(
        """SELECT n.tier_id, avg(r.util_mean), percentile_cont(0.95) WITHIN GROUP (ORDER BY r.util_mean)
           FROM telemetry_modulerollup r JOIN inventory_node n ON n.id = r.node_id
           WHERE r.minute >= %s GROUP BY n.tier_id""", [since])}
    cpu_now = {t: (m, k) for t, m, k in _rows(
        """SELECT n.tier_id, avg(s.cpu_util), count(*) FROM telemetry_nodestatus s
           JOIN inventory_node n ON n.id = s.node_id WHERE s.time >= %s GROUP BY n.tier_id""", [fresh])}
    mod_now = {t: m for t, m in _rows(
        """SELECT n.tier_id, avg(s.util) FROM telemetry_modulestatus s
           JOIN inventory_node n ON n.id = s.node_id WHERE s.time >= %s GROUP BY n.tier_id""", [fresh])}
    queue = {t: (mean, mx, float(arr), float(comp), win) for t, mean, mx, arr, comp, win in _rows(
        """SELECT tier_id, sum(queue_depth_mean * samples) / nullif(sum(samples), 0), max(queue_depth_max),
                  sum(arrivals), sum(completions), sum(window_s)
           FROM telemetry_tierrollup WHERE minute >= %s GROUP BY tier_id""", [since])}
    latest = {s.tier_id: s for s in TierStatus.objects.all()}
    stages = _stage_summary(None, since)
    tiers = []
    for tier in Tier.objects.order_by("level"):
        by_state = counts.get(tier.name, {})
        q = queue.get(tier.pk)
        status = latest.get(tier.pk)
        window_s = q[4] if q else None
        tiers.append({
            "kind": tier.kind, "name": tier.name, "level": tier.level,
            "nodes": {
                "active": by_state.get(NodeState.ACTIVE, 0), "standby": by_state.get(NodeState.STANDBY, 0),
                "draining": by_state.get(NodeState.DRAINING, 0), "total": sum(by_state.values()),
                "reporting": int(cpu_now.get(tier.pk, (None, 0))[1]), "by_state": by_state,
            },
            "cpu_util": {"mean": _r(cpu.get(tier.pk, (None, None))[0]), "p95": _r(cpu.get(tier.pk, (None, None))[1]),
                         "now": _r(cpu_now.get(tier.pk, (None, 0))[0])},
            "module_util": {"mean": _r(mod.get(tier.pk, (None, None))[0]),
                            "p95": _r(mod.get(tier.pk, (None, None))[1]), "now": _r(mod_now.get(tier.pk))},
            "queue_depth": {
                "now": status.queue_depth if status else None, "time": status.time if status else None,
                "mean": _r(q[0], 2) if q else None, "max": q[1] if q else None,
            },
            "requests_per_s": _r(q[2] / window_s, 3) if q and window_s else None,
            "completions_per_s": _r(q[3] / window_s, 3) if q and window_s else None,
            "stages": stages.get(tier.pk, []),
        })
    return {"time": now, "window_minutes": minutes, "tiers": tiers}


def _tier_filter(tier: Tier | None) -> QuerySet[Tier]:
    qs = Tier.objects.order_by("level")
    return qs.filter(pk=tier.pk) if tier is not None else qs


def queue_depth_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    since = _since(now, minutes)
    out = []
    for t in _tier_filter(tier):
        points = [
            {"minute": r.minute, "queue_depth_mean": _r(r.queue_depth_mean, 2), "queue_depth_max": r.queue_depth_max,
             "arrivals_per_s": _r(r.arrivals / r.window_s, 3) if r.window_s else None,
             "completions_per_s": _r(r.completions / r.window_s, 3) if r.window_s else None}
            for r in TierRollup.objects.filter(tier_id=t.pk, minute__gte=since).order_by("minute")
        ]
        status = TierStatus.objects.filter(tier=t).first()
        latest = {"time": status.time, "queue_depth": status.queue_depth} if status else None
        out.append({"tier": t.kind, "points": points, "latest": latest})
    return {"minutes": minutes, "tiers": out}


def stage_latency_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    since = _since(now, minutes)
    out = []
    for t in _tier_filter(tier):
        series: dict[str, list[dict[str, Any]]] = {s: [] for s in Stage.values}
        for r in StageRollup.objects.filter(tier_id=t.pk, minute__gte=since).order_by("minute"):
            series.setdefault(r.stage, []).append(
                {"minute": r.minute, "count": r.count, "p50_ms": _r(r.p50_ms, 2), "p95_ms": _r(r.p95_ms, 2),
                 "p99_ms": _r(r.p99_ms, 2), "max_ms": _r(r.max_ms, 2)})
        out.append({"tier": t.kind, "stages": [{"stage": s, "points": p} for s, p in series.items()]})
    return {"minutes": minutes, "tiers": out}


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
    """Traffic over the last ``window_s`` seconds from the tier rollups, for the planner.

    requests_per_s is the arrival rate at the entry tier (the lowest-level tier
    with data: every request enters there); tokens per request are the tokens
    reported by all tiers divided by those entry requests. None without data.
    """
    now = now or timezone.now()
    since = _since(now, max(1, round(window_s / 60)))
    rows = _rows(
        """SELECT t.kind, t.level, sum(r.arrivals), sum(r.window_s), sum(r.input_tokens), sum(r.output_tokens)
           FROM telemetry_tierrollup r JOIN inventory_tier t ON t.id = r.tier_id
           WHERE r.minute >= %s GROUP BY t.kind, t.level ORDER BY t.level""", [since])
    rows = [r for r in rows if r[3]]
    if not rows:
        return None
    per_tier = {kind: {"requests_per_s": float(arr) / float(win)} for kind, _lvl, arr, win, _i, _o in rows}
    entry = rows[0]
    entry_requests = float(entry[2])
    rate = entry_requests / float(entry[3])
    tokens_in = float(sum(r[4] for r in rows))
    tokens_out = float(sum(r[5] for r in rows))
    return {
        "window_s": window_s,
        "requests_per_s": rate,
        "input_tokens_per_request": tokens_in / entry_requests if entry_requests else None,
        "output_tokens_per_request": tokens_out / entry_requests if entry_requests else None,
        "per_tier": per_tier,
    }


def agent_self(*, node: Node) -> dict[str, Any]:
    """What a node agent needs to know about its own node: identity and modules in their slots."""
    modules = node.modules.select_related("module_type").order_by("slot")
    return {
        "node": {"id": node.pk, "hostname": node.hostname, "state": node.state, "tier": node.tier.kind},
        "modules": [
            {"serial": m.serial, "slot": m.slot, "module_type": str(m.module_type),
             "pcie_lanes": m.module_type.pcie_lanes, "state": m.state,
             "driver_version": m.driver_version, "framework_version": m.framework_version}
            for m in modules
        ],
    }
