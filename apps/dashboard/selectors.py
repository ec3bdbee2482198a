"""Reads for the live dashboard. The 1 Hz snapshot reads latest-state rows only
(NodeStatus, ModuleStatus, TierStatus, node states) plus one index probe per
(tier, stage) for the newest stage summary: a handful of small queries whatever
the history size, never a scan of raw samples. History comes from the per-minute
rollups through apps.telemetry.selectors."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection
from django.db.models import Count
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.inventory.models import Node, Tier
from apps.operations.choices import ACTIVE_DRAIN_STATES, ScaleState
from apps.operations.models import AutoscalerDecision, AutoscalerPolicy, Drain, ScaleRequest
from apps.operations.selectors import drain_waiting_for
from apps.telemetry.choices import Stage
from apps.telemetry.models import IngestBatch, NodeStatus, TierStatus

# Latest samples older than this do not count towards "now" figures (as apps.telemetry.selectors).
FRESH_S = 120
# Fields of each row of snapshot["nodes"], in order (rows are lists to keep the frame small).
NODE_FIELDS = ["id", "hostname", "tier_id", "rack", "slot", "state", "cpu", "module_util", "temp_c",
               "power_w", "in_flight", "age_s"]
TIME_RANGES = [(15, "15 m"), (60, "1 h"), (360, "6 h"), (1440, "24 h")]


def iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def _r(value: Any, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def _stage_latest(since: dt.datetime) -> dict[int, list[dict[str, Any]]]:
    """Newest stage summary per (tier, stage): one probe of the (tier, stage, time) index each."""
    sql = """SELECT t.id, st.stage, s.time, s.p50_ms, s.p95_ms, s.p99_ms, s.count
             FROM inventory_tier t CROSS JOIN unnest(%s::text[]) AS st(stage)
             JOIN LATERAL (SELECT time, p50_ms, p95_ms, p99_ms, count FROM telemetry_stagesample x
                           WHERE x.tier_id = t.id AND x.stage = st.stage AND x.time >= %s
                           ORDER BY x.time DESC LIMIT 1) s ON true"""
    order = {s: i for i, s in enumerate(Stage.values)}
    out: dict[int, list[dict[str, Any]]] = {}
    for tier_id, stage, _time, p50, p95, p99, count in _rows(sql, [list(Stage.values), since]):
        out.setdefault(tier_id, []).append(
            {"stage": stage, "p50_ms": _r(p50, 1), "p95_ms": _r(p95, 1), "p99_ms": _r(p99, 1), "count": count})
    for items in out.values():
        items.sort(key=lambda d: order.get(d["stage"], 99))
    return out


def node_rows(*, now: dt.datetime, tier_id: int | None = None) -> list[list[Any]]:
    """One compact row per node not retired (see NODE_FIELDS): state and the latest figures."""
    sql = """SELECT n.id, n.hostname, n.tier_id, r.name, n.slot, n.state, s.cpu_util, m.util, m.temp, m.power,
                    s.in_flight, s.time
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
    for pk, host, tid, rack, slot, state, cpu, util, temp, power, in_flight, time in _rows(
            sql.format(tier="AND n.tier_id = %s" if tier_id is not None else ""), params):
        age = None if time is None else round((now - time).total_seconds(), 1)
        rows.append([pk, host, tid, rack, slot, state, _r(cpu), _r(util), _r(temp, 1), _r(power, 1),
                     in_flight, age])
    return rows


def live_snapshot(*, now: dt.datetime | None = None, recent_batches: int = 50) -> dict[str, Any]:
    """The small fleet snapshot pushed about once a second, JSON-safe (ISO times).

    Per tier: node counts by state, CPU and module utilisation of the fresh latest
    samples, the newest queue depth and request rate, the newest per-stage latency;
    per node a compact row for the rack heat map; and the newest ingest batches, so
    a client (or bench/live.py) can tell which telemetry a frame reflects.
    """
    now = now or timezone.now()
    fresh = now - dt.timedelta(seconds=FRESH_S)
    nodes = node_rows(now=now)
    counts: dict[int, dict[str, int]] = {}
    for count in Node.objects.order_by().values("tier_id", "state").annotate(n=Count("id")):
        counts.setdefault(count["tier_id"], {})[count["state"]] = count["n"]
    cpu: dict[int, list[float]] = {}
    mod: dict[int, list[float]] = {}
    in_flight: dict[int, int] = {}
    for row in nodes:
        age = row[11]
        if age is None or age > FRESH_S:
            continue
        if row[6] is not None:
            cpu.setdefault(row[2], []).append(row[6])
        if row[7] is not None:
            mod.setdefault(row[2], []).append(row[7])
        in_flight[row[2]] = in_flight.get(row[2], 0) + (row[10] or 0)
    status = {s.tier_id: s for s in TierStatus.objects.all()}
    stages = _stage_latest(now - dt.timedelta(seconds=5 * FRESH_S))
    policies = {p.tier_id: p for p in AutoscalerPolicy.objects.all()}
    tiers = []
    for tier in Tier.objects.order_by("level"):
        by_state = counts.get(tier.pk, {})
        ts = status.get(tier.pk)
        ts_fresh = ts is not None and ts.time >= fresh
        policy = policies.get(tier.pk)
        tiers.append({
            "id": tier.pk, "kind": tier.kind, "name": tier.name, "level": tier.level,
            "min_active": tier.min_active_nodes, "max_active": tier.max_active_nodes,
            "by_state": by_state, "total": sum(by_state.values()),
            "active": by_state.get(NodeState.ACTIVE, 0), "standby": by_state.get(NodeState.STANDBY, 0),
            "draining": by_state.get(NodeState.DRAINING, 0) + by_state.get(NodeState.CORDONED, 0),
            "unreachable": by_state.get(NodeState.UNREACHABLE, 0) + by_state.get(NodeState.FAILED, 0),
            "reporting": len(cpu.get(tier.pk, [])),
            "cpu_util": _r(sum(cpu[tier.pk]) / len(cpu[tier.pk])) if cpu.get(tier.pk) else None,
            "module_util": _r(sum(mod[tier.pk]) / len(mod[tier.pk])) if mod.get(tier.pk) else None,
            "in_flight": in_flight.get(tier.pk),
            "queue_depth": ts.queue_depth if ts_fresh and ts else None,
            "queue_time": iso(ts.time) if ts else None,
            "requests_per_s": _r(ts.arrivals / ts.window_s, 2) if ts_fresh and ts and ts.window_s else None,
            "stages": stages.get(tier.pk, []),
            "autoscaler": None if policy is None else {
                "id": policy.pk, "enabled": policy.enabled, "dry_run": policy.dry_run,
                "target_queue_per_node": policy.target_queue_per_node},
        })
    batches = list(IngestBatch.objects.filter(received_at__gte=now - dt.timedelta(seconds=10))
                   .order_by("-received_at").values_list("batch_id", "received_at")[:recent_batches])
    newest = NodeStatus.objects.order_by("-last_seen").values_list("last_seen", flat=True).first()
    return {
        "time": now.isoformat(),
        "tiers": tiers,
        "node_fields": NODE_FIELDS,
        "nodes": nodes,
        "ingest": {
            "last_received_at": iso(batches[0][1]) if batches else iso(newest),
            "recent_batches": [b for b, _ in batches],
        },
    }


# ---- what changed since the last tick (the broadcaster's events) ---------------------------------


def node_states() -> dict[int, tuple[str, int, str]]:
    """{node id: (state, tier id, hostname)} of every node."""
    return {pk: (state, tier_id, host)
            for pk, state, tier_id, host in Node.objects.values_list("pk", "state", "tier_id", "hostname")}


def drain_progress(*, now: dt.datetime | None = None, ids: list[int] | None = None) -> dict[int, dict[str, Any]]:
    """Active holds (plus ``ids``, to report the ones that just ended) with what each waits for."""
    now = now or timezone.now()
    qs = Drain.objects.select_related("node")
    qs = qs.filter(state__in=ACTIVE_DRAIN_STATES) | qs.filter(pk__in=ids or [])
    status = {s.node_id: s for s in NodeStatus.objects.filter(node_id__in=qs.values("node_id"))}
    return {
        d.pk: {"id": d.pk, "node": d.node_id, "hostname": d.node.hostname, "tier_id": d.node.tier_id,
               "kind": d.kind, "owner": d.owner, "state": d.state, "reason": d.reason,
               "waiting_for": drain_waiting_for(d, now=now, status=status.get(d.node_id))}
        for d in qs
    }


def scale_requests(*, since_id: int, running_ids: list[int]) -> list[dict[str, Any]]:
    qs = ScaleRequest.objects.select_related("tier").filter(pk__gt=since_id) | \
        ScaleRequest.objects.select_related("tier").filter(pk__in=running_ids)
    return [{"id": s.pk, "tier_id": s.tier_id, "tier": s.tier.kind, "desired": s.desired,
             "from_active": s.from_active, "state": s.state, "owner": s.owner, "reason": s.reason,
             "by": s.created_by_name, "note": s.note, "running": s.state == ScaleState.RUNNING}
            for s in qs.order_by("pk")]


def autoscaler_decisions(*, since_id: int) -> list[dict[str, Any]]:
    return [{"id": d.pk, "tier_id": d.tier_id, "tier": d.tier.kind, "time": iso(d.time), "current": d.current,
             "desired": d.desired, "action": d.action, "dry_run": d.dry_run, "queue_depth": d.queue_depth,
             "explanation": d.explanation}
            for d in AutoscalerDecision.objects.select_related("tier").filter(pk__gt=since_id).order_by("pk")[:50]]


def audit_brief(event: AuditEvent) -> dict[str, Any]:
    return {"id": event.pk, "time": iso(event.time), "actor": event.actor_name, "action": event.action,
            "target_type": event.target_type, "target_id": event.target_id, "target": event.target_repr,
            "reason": event.reason}


# Audit actions not worth an operator's glance on the live pages (agent credentials churn).
QUIET_ACTIONS = ("agent_token.",)


def _loud(qs: Any) -> Any:
    for prefix in QUIET_ACTIONS:
        qs = qs.exclude(action__startswith=prefix)
    return qs


def audit_events(*, since_id: int, upto_id: int) -> list[dict[str, Any]]:
    """Audit records with since_id < id <= upto_id (the newest 50 of them), oldest first."""
    qs = _loud(AuditEvent.objects.filter(pk__gt=since_id, pk__lte=upto_id)).order_by("-pk")[:50]
    return [audit_brief(e) for e in reversed(list(qs))]


def recent_audit(*, limit: int = 15, target_type: str | None = None, target_id: str | None = None
                 ) -> list[dict[str, Any]]:
    qs = _loud(AuditEvent.objects.order_by("-pk"))
    if target_type:
        qs = qs.filter(target_type=target_type)
    if target_id:
        qs = qs.filter(target_id=target_id)
    return [audit_brief(e) for e in qs[:limit]]


def max_id(model: Any) -> int:
    return int(model.objects.order_by("-pk").values_list("pk", flat=True).first() or 0)


def utilisation_series(*, minutes: int, tier_id: int | None = None, now: dt.datetime | None = None
                       ) -> dict[int, dict[str, list[Any]]]:
    """Per tier and minute, from the rollups: mean node CPU and mean module utilisation.
    {tier id: {"cpu": [(minute, value)], "module": [(minute, value)]}}"""
    now = now or timezone.now()
    since = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=minutes - 1)
    tier = "AND n.tier_id = %s" if tier_id is not None else ""
    params: list[Any] = [since] + ([tier_id] if tier_id is not None else [])
    out: dict[int, dict[str, list[Any]]] = {}
    for tid, minute, value in _rows(
            f"""SELECT n.tier_id, r.minute, avg(r.cpu_util_mean) FROM telemetry_noderollup r
                JOIN inventory_node n ON n.id = r.node_id WHERE r.minute >= %s {tier}
                GROUP BY n.tier_id, r.minute ORDER BY r.minute""", params):
        out.setdefault(tid, {"cpu": [], "module": []})["cpu"].append((minute, _r(value)))
    for tid, minute, value in _rows(
            f"""SELECT n.tier_id, r.minute, avg(r.util_mean) FROM telemetry_modulerollup r
                JOIN inventory_node n ON n.id = r.node_id WHERE r.minute >= %s {tier}
                GROUP BY n.tier_id, r.minute ORDER BY r.minute""", params):
        out.setdefault(tid, {"cpu": [], "module": []})["module"].append((minute, _r(value)))
    return out


def node_live(*, node: Node, now: dt.datetime | None = None) -> dict[str, Any]:
    """The live parts of the node page: state, the active hold and what it waits for,
    each module's state, versions and newest telemetry."""
    from apps.inventory.models import Module
    from apps.operations.selectors import node_active_hold
    from apps.telemetry.models import ModuleStatus

    now = now or timezone.now()
    node.refresh_from_db(fields=["state", "state_changed_at"])
    hold = node_active_hold(node=node)
    status = NodeStatus.objects.filter(node=node).first()
    mstatus = {s.module_id: s for s in ModuleStatus.objects.filter(node=node)}
    modules = []
    for m in Module.objects.filter(node=node).order_by("slot"):
        s = mstatus.get(m.pk)
        modules.append({
            "id": m.pk, "serial": m.serial, "slot": m.slot, "state": m.state,
            "driver": m.driver_version, "framework": m.framework_version, "firmware": m.firmware_version,
            "latest": None if s is None else {
                "time": iso(s.time), "util": _r(s.util), "temp_c": _r(s.temp_c, 1), "power_w": _r(s.power_w, 1),
                "link_width": s.link_width, "link_width_expected": s.link_width_expected,
                "ecc_corrected": s.ecc_corrected, "ecc_uncorrected": s.ecc_uncorrected, "errors": s.errors},
        })
    return {
        "id": node.pk, "hostname": node.hostname, "state": node.state,
        "state_changed_at": iso(node.state_changed_at),
        "hold": None if hold is None else {
            "id": hold.pk, "kind": hold.kind, "owner": hold.owner, "state": hold.state, "reason": hold.reason,
            "by": hold.created_by_name, "started_at": iso(hold.started_at),
            "waiting_for": drain_waiting_for(hold, now=now, status=status)},
        "latest": None if status is None else {
            "time": iso(status.time), "age_s": round((now - status.last_seen).total_seconds(), 1),
            "cpu_util": _r(status.cpu_util), "mem_util": _r(status.mem_util), "in_flight": status.in_flight,
            "load1": _r(status.load1, 2), "threads": status.threads},
        "modules": modules,
    }
