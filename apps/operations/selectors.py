"""Reads of fleet operations: what a hold waits for, which nodes a scale picks,
the gateway's schedulable set, the latest telemetry an operation needs."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db.models import F, Prefetch, Q, QuerySet, Sum
from django.utils import timezone

from apps.inventory.choices import SERVING_STATES, ModuleState, NodeState
from apps.inventory.models import Module, Node, Rack, Tier
from apps.inventory.selectors import version_drift
from apps.operations import capacity
from apps.operations.choices import ACTIVE_DRAIN_STATES, AfterDrain, DeadlineAction, DrainState, ScaleState
from apps.operations.models import AutoscalerDecision, AutoscalerPolicy, Drain, Quarantine, ScaleRequest
from apps.telemetry.models import NodeHolders, NodeStatus
from apps.telemetry.selectors.snapshot import fleet_snapshot, nodes_not_seen

# A tier's queue depth older than this is not acted on.
QUEUE_FRESH_S = 60
# Health of module states a node may be activated with.
ACTIVATABLE_MODULE_STATES = (ModuleState.HEALTHY,)
# Module states that take work.
SCHEDULABLE_MODULE_STATES = (ModuleState.HEALTHY, ModuleState.DEGRADED)
# The capacity guard's traffic: rates over this many minutes of rollups.
CAPACITY_WINDOW_MINUTES = 5


def human_duration(seconds: float) -> str:
    s = int(abs(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


# ---- telemetry the operations read ------------------------------------------------------------


def node_report(*, node_id: int) -> NodeStatus | None:
    return NodeStatus.objects.filter(node_id=node_id).first()


def node_holders(*, node_id: int) -> NodeHolders | None:
    """The processes holding the node's modules as its agent last listed them; None: it does not look."""
    return NodeHolders.objects.filter(node_id=node_id).first()


def holders_text(holders: list[dict[str, Any]], *, limit: int = 5) -> str:
    """``"pid 4242 vllm on AX-1; pid 17 python on AX-2"`` (and how many more)."""
    shown = "; ".join(f"pid {h['pid']} {h['name']} on {h['module']}" for h in holders[:limit])
    return shown + (f" and {len(holders) - limit} more" if len(holders) > limit else "")


def drain_holders(drain: Drain) -> tuple[list[dict[str, Any]], bool] | None:
    """The processes the node's agent last listed as holding its modules, and whether that list is
    newer than the drain's start; None when its agent does not look (it never listed any)."""
    row = node_holders(node_id=drain.node_id)
    if row is None:
        return None
    return list(row.holders or []), row.time >= drain.started_at


def node_last_seen(*, node_id: int) -> dt.datetime | None:
    """When the server last received a report of the node (its clock, not the agent's)."""
    return NodeStatus.objects.filter(node_id=node_id).values_list("last_seen", flat=True).first()


def heartbeat_candidates(*, cutoff: dt.datetime, watched: frozenset[str]) -> list[int]:
    """Nodes in ``watched`` states silent since ``cutoff``: their last report is older, or they never
    reported and have been in their state since before it. One query."""
    silent = nodes_not_seen(seconds=0, now=cutoff).filter(state__in=watched)
    return list(silent.exclude(status__isnull=True, state_changed_at__gte=cutoff)
                .order_by("pk").values_list("pk", flat=True))


def reachable_again(*, since: dt.datetime) -> list[int]:
    """Unreachable nodes with a report received after they became unreachable, and since ``since``."""
    return list(Node.objects.filter(state=NodeState.UNREACHABLE, status__last_seen__gte=since,
                                    status__last_seen__gt=F("state_changed_at"))
                .order_by("pk").values_list("pk", flat=True))


def tier_snapshot(*, tier: Tier, now: dt.datetime | None = None, window_minutes: int | None = None
                  ) -> dict[str, Any]:
    """The fleet snapshot's entry for ``tier`` (apps.telemetry.selectors.snapshot.fleet_snapshot)."""
    return dict(fleet_snapshot(now=now, window_minutes=window_minutes, tier_id=tier.pk)["tiers"][0])


def tier_queue_depth(*, tier: Tier, now: dt.datetime | None = None) -> float | None:
    """The tier's newest queue depth from the gateway, if fresh."""
    now = now or timezone.now()
    snap = tier_snapshot(tier=tier, now=now)
    if snap["queue_depth"] is None or snap["queue_time"] is None:
        return None
    if dt.datetime.fromisoformat(snap["queue_time"]) < now - dt.timedelta(seconds=QUEUE_FRESH_S):
        return None
    return float(snap["queue_depth"])


def tier_active_count(*, tier: Tier) -> int:
    return Node.objects.filter(tier=tier, state=NodeState.ACTIVE).count()


def capacity_params() -> capacity.Params:
    """The capacity function's parameters: docs/domain.md's defaults, each overridable in ``settings.CAPACITY``."""
    return capacity.Params(**getattr(settings, "CAPACITY", {}))


def tier_load(*, tier: Tier, now: dt.datetime | None = None, params: capacity.Params | None = None
              ) -> capacity.TierLoad:
    """What the capacity function needs about ``tier``: the fleet snapshot's counts and figures (rates
    over the last CAPACITY_WINDOW_MINUTES of rollups when there are any, else the gateway's newest
    sample), and the active nodes' CPUs and serving modules from the inventory."""
    snap = tier_snapshot(tier=tier, now=now, window_minutes=CAPACITY_WINDOW_MINUTES)
    window = snap.get("window") or {}
    rated = window if window.get("requests_per_s") is not None else snap
    cpus = list(Node.objects.filter(tier=tier, state=NodeState.ACTIVE).values_list("cpu_cores", "cpu_clock_ghz"))
    p = params or capacity_params()
    ips = [cores * p.core_ips * float(clock) / capacity.REFERENCE_CLOCK_GHZ * p.usable_fraction
           for cores, clock in cpus]
    tops = [float(t) for t in Module.objects.filter(node__tier=tier, node__state=NodeState.ACTIVE,
                                                    state__in=SCHEDULABLE_MODULE_STATES)
            .values_list("module_type__int8_tops", flat=True)]
    return capacity.TierLoad(
        kind=tier.kind, name=tier.name, min_active_nodes=tier.min_active_nodes, active_nodes=snap["active"],
        serving_modules=snap["serving_modules"], node_cpu_ips=sum(ips) / len(ips) if ips else 0.0,
        module_tops=sum(tops) / len(tops) if tops else 0.0,
        requests_per_s=rated.get("requests_per_s"), completions_per_s=rated.get("completions_per_s"),
        output_tokens_per_s=rated.get("output_tokens_per_s"), busy_nodes=snap["busy_nodes"],
        busy_modules=snap["busy_modules"], queue_depth=snap["queue_depth"],
        window_s=60 * CAPACITY_WINDOW_MINUTES if rated is window else None)


def tier_need(*, tier: Tier, now: dt.datetime | None = None,
              params: capacity.Params | None = None) -> tuple[capacity.TierLoad, capacity.Need]:
    """``tier``'s load now and the active nodes it needs (the capacity guard's numbers)."""
    params = params or capacity_params()
    load = tier_load(tier=tier, now=now, params=params)
    return load, capacity.tier_need(load, params)


# ---- holds -----------------------------------------------------------------------------------


def drain_list() -> QuerySet[Drain]:
    """Holds with their node, and the node's latest report (for what they wait for) in the same query."""
    return Drain.objects.select_related("node", "node__tier", "node__rack", "node__status", "scale_request")


def _status_of(drain: Drain) -> NodeStatus | None | str:
    """The node's latest report if it was fetched with the drain, else "unset" (look it up)."""
    node = drain.node
    if not Node.status.is_cached(node):  # type: ignore[attr-defined]
        return "unset"
    try:
        return node.status  # type: ignore[no-any-return]
    except NodeStatus.DoesNotExist:
        return None


def quarantine_list() -> QuerySet[Quarantine]:
    return Quarantine.objects.select_related("module", "module__node", "module__node__tier", "module__node__rack")


def drain_waiting_for(drain: Drain, *, now: dt.datetime | None = None, status: Any = "unset") -> str:
    """What the hold waits for, in words: "waiting for 3 in-flight requests; deadline in 4m12s"."""
    now = now or timezone.now()
    parts: list[str] = []
    if drain.state == DrainState.RELEASED:
        return f"released {drain.released_at:%Y-%m-%d %H:%M:%S} by {drain.released_by_name}" if drain.released_at \
            else "released"
    if drain.state == DrainState.CORDONED:
        parts.append("cordoned: no new work; waiting for an uncordon")
    elif drain.state == DrainState.DRAINED:
        where: dict[str, str] = {AfterDrain.MAINTENANCE: "; in maintenance",
                                 AfterDrain.STANDBY: "; returning to standby"}
        cut = "an unknown number" if drain.in_flight_at_force is None else drain.in_flight_at_force
        base = f"forced drained with {cut} in flight" if drain.forced else "drained: zero in flight"
        parts.append(base + where.get(drain.after, ""))
    else:
        if status == "unset":
            status = _status_of(drain)
        report = node_report(node_id=drain.node_id) if status == "unset" else status
        if report is None:
            parts.append("waiting for a report from the node (none yet)")
        elif report.time < drain.started_at:
            parts.append("waiting for a report from the node newer than the drain's start "
                         f"(last report {human_duration((now - report.time).total_seconds())} ago)")
        elif report.in_flight is None:
            # Unknown is not zero: the agent has no in-flight source (or its read failed).
            parts.append("in-flight work unknown: the node's agent reports no in-flight count, so the drain "
                         "cannot see it empty and waits for its deadline"
                         + ("" if drain.deadline is not None else " (none set: release it by hand)"))
        else:
            n = report.in_flight
            held = drain_holders(drain) if not n else None  # what holds a module matters at zero in flight
            if n:
                parts.append(f"waiting for {n} in-flight request{'s' if n != 1 else ''}")
            elif held is not None and not held[1]:
                parts.append("zero in flight; waiting for the agent's list of what holds the modules, newer "
                             "than the drain's start")
            elif held is not None and held[0]:
                parts.append(f"zero in flight; waiting for {len(held[0])} process(es) holding its modules: "
                             f"{holders_text(held[0])}")
            else:
                parts.append("zero in flight reported; completes on the next pass")
        if drain.deadline is not None:
            left = (drain.deadline - now).total_seconds()
            if left > 0:
                parts.append(f"deadline in {human_duration(left)}")
            elif drain.deadline_action == DeadlineAction.FORCE:
                parts.append(f"deadline passed {human_duration(left)} ago: forcing")
            else:
                parts.append(f"deadline passed {human_duration(left)} ago: staying draining and alerting")
        if drain.after == AfterDrain.MAINTENANCE:
            parts.append("then maintenance")
        elif drain.after == AfterDrain.STANDBY:
            parts.append("then standby")
    if drain.resume_after is not None:
        left = (drain.resume_after - now).total_seconds()
        parts.append(f"resumes in {human_duration(left)}" if left > 0 else "resuming")
    return "; ".join(parts)


def node_active_hold(*, node: Node) -> Drain | None:
    return drain_list().filter(node=node, state__in=ACTIVE_DRAIN_STATES).first()


def node_operations(*, node: Node) -> dict[str, Any]:
    """For the node page: its active hold and what it waits for, its quarantined modules."""
    hold = node_active_hold(node=node)
    return {
        "hold": hold,
        "waiting_for": drain_waiting_for(hold) if hold is not None else "",
        "quarantines": list(quarantine_list().filter(module__node=node, released_at__isnull=True)),
        "modules": list(Module.objects.filter(node=node).order_by("slot")),
    }


# ---- scaling ---------------------------------------------------------------------------------


def node_power_w() -> dict[int, int]:
    """Each node's draw: CPU plus its modules' rated power, in watts."""
    modules = dict(Module.objects.filter(node__isnull=False).values_list("node_id")
                   .annotate(w=Sum("module_type__power_w")))
    return {pk: cpu + (modules.get(pk) or 0) for pk, cpu in Node.objects.values_list("pk", "cpu_power_w")}


def rack_draw_w(power: dict[int, int] | None = None) -> dict[int, int]:
    """Power drawn per rack by nodes that serve (active, cordoned, draining)."""
    power = power if power is not None else node_power_w()
    out: dict[int, int] = defaultdict(int)
    for pk, rack_id in Node.objects.filter(state__in=SERVING_STATES).values_list("pk", "rack_id"):
        out[rack_id] += power.get(pk, 0)
    return out


def scale_up_candidates(*, tier: Tier, count: int) -> tuple[list[Node], dict[str, str]]:
    """Standby nodes to activate: ECC memory, every module healthy and on its pinned
    versions, spread over racks (fewest serving nodes of the tier first) within each
    rack's power budget. Returns the chosen nodes and why the others were passed over."""
    skipped: dict[str, str] = {}
    drifted = set(version_drift().values_list("node_id", flat=True))
    unhealthy = set(Module.objects.filter(node__tier=tier).exclude(state__in=ACTIVATABLE_MODULE_STATES)
                    .values_list("node_id", flat=True))
    eligible: list[Node] = []
    for node in Node.objects.filter(tier=tier, state=NodeState.STANDBY).select_related("rack").order_by("hostname"):
        if node.gray:
            skipped[node.hostname] = "in the gray pool (validates version combinations, never serves)"
        elif not node.ecc_memory:
            skipped[node.hostname] = "no ECC memory"
        elif node.pk in unhealthy:
            skipped[node.hostname] = "a module is not healthy"
        elif node.pk in drifted:
            skipped[node.hostname] = "a module is off its pinned driver/framework"
        else:
            eligible.append(node)
    power = node_power_w()
    draw = rack_draw_w(power)
    budgets = dict(Rack.objects.values_list("pk", "power_budget_w"))
    per_rack: dict[int, int] = defaultdict(int)
    for rack_id in Node.objects.filter(tier=tier, state__in=SERVING_STATES).values_list("rack_id", flat=True):
        per_rack[rack_id] += 1
    chosen: list[Node] = []
    while eligible and len(chosen) < count:
        fits = [n for n in eligible if draw[n.rack_id] + power.get(n.pk, 0) <= budgets.get(n.rack_id, 0)]
        for n in eligible:
            if n not in fits:
                skipped[n.hostname] = (f"rack {n.rack.name} would draw {draw[n.rack_id] + power.get(n.pk, 0)} W "
                                       f"of its {budgets.get(n.rack_id, 0)} W budget")
        if not fits:
            break
        pick = min(fits, key=lambda n: (per_rack[n.rack_id], n.hostname))
        chosen.append(pick)
        eligible.remove(pick)
        skipped.pop(pick.hostname, None)
        per_rack[pick.rack_id] += 1
        draw[pick.rack_id] += power.get(pick.pk, 0)
    for n in eligible:
        skipped.setdefault(n.hostname, "not needed")
    return chosen, {h: r for h, r in skipped.items() if r != "not needed"}


def _busy(in_flight: int | None) -> int:
    return 10**9 if in_flight is None else in_flight


def scale_down_candidates(*, tier: Tier, count: int) -> list[Node]:
    """Active nodes to release: fewest requests in flight first (no report, or an unknown
    count, counts as busy), from the racks with the most active nodes of the tier, to keep the spread."""
    nodes = list(Node.objects.filter(tier=tier, state=NodeState.ACTIVE).order_by("hostname"))
    in_flight = dict(NodeStatus.objects.filter(node__in=nodes).values_list("node_id", "in_flight"))
    per_rack: dict[int, int] = defaultdict(int)
    for n in nodes:
        per_rack[n.rack_id] += 1
    chosen: list[Node] = []
    while nodes and len(chosen) < count:
        pick = min(nodes, key=lambda n: (_busy(in_flight.get(n.pk)), -per_rack[n.rack_id], n.hostname))
        chosen.append(pick)
        nodes.remove(pick)
        per_rack[pick.rack_id] -= 1
    return chosen


def scale_request_list() -> QuerySet[ScaleRequest]:
    return ScaleRequest.objects.select_related("tier").prefetch_related(
        Prefetch("drains", queryset=Drain.objects.select_related("node")))


def scale_released(*, sr: ScaleRequest) -> list[str]:
    return [d.node.hostname for d in sr.drains.all()
            if d.state == DrainState.RELEASED and d.release_reason.startswith("drained empty")]


def scale_progress(*, sr: ScaleRequest) -> str:
    if sr.state != "running":
        return sr.note or sr.get_state_display()
    waiting = [d for d in sr.drains.all() if d.state in ACTIVE_DRAIN_STATES]
    if not waiting:
        return "completing"
    return "; ".join(f"{d.node.hostname}: {drain_waiting_for(d)}" for d in waiting[:10])


def drain_progress(*, now: dt.datetime | None = None, ids: list[int] | None = None) -> dict[int, dict[str, Any]]:
    """Active holds (plus ``ids``, to report the ones that just ended) with what each waits for."""
    now = now or timezone.now()
    qs = Drain.objects.select_related("node", "node__status")
    qs = qs.filter(state__in=ACTIVE_DRAIN_STATES) | qs.filter(pk__in=ids or [])
    return {
        d.pk: {"id": d.pk, "node": d.node_id, "hostname": d.node.hostname, "tier_id": d.node.tier_id,
               "kind": d.kind, "owner": d.owner, "state": d.state, "reason": d.reason,
               "waiting_for": drain_waiting_for(d, now=now)}
        for d in qs
    }


def scale_request_briefs(*, since_id: int, running_ids: list[int]) -> list[dict[str, Any]]:
    """Scale requests newer than ``since_id`` and those in ``running_ids`` (JSON-safe), oldest first."""
    qs = ScaleRequest.objects.select_related("tier").filter(Q(pk__gt=since_id) | Q(pk__in=running_ids))
    return [{"id": s.pk, "tier_id": s.tier_id, "tier": s.tier.kind, "desired": s.desired,
             "from_active": s.from_active, "state": s.state, "owner": s.owner, "reason": s.reason,
             "by": s.created_by_name, "note": s.note, "running": s.state == ScaleState.RUNNING}
            for s in qs.order_by("pk")]


def running_scale_request_ids() -> list[int]:
    return list(ScaleRequest.objects.filter(state=ScaleState.RUNNING).values_list("pk", flat=True))


def decision_briefs(*, since_id: int, limit: int = 50) -> list[dict[str, Any]]:
    """Autoscaler decisions newer than ``since_id`` (JSON-safe), oldest first."""
    return [{"id": d.pk, "tier_id": d.tier_id, "tier": d.tier.kind, "time": d.time.isoformat(),
             "current": d.current, "desired": d.desired, "action": d.action, "dry_run": d.dry_run,
             "queue_depth": d.queue_depth, "explanation": d.explanation}
            for d in decision_list().filter(pk__gt=since_id).order_by("pk")[:limit]]


def max_scale_request_id() -> int:
    return int(ScaleRequest.objects.order_by("-pk").values_list("pk", flat=True).first() or 0)


def max_decision_id() -> int:
    return int(AutoscalerDecision.objects.order_by("-pk").values_list("pk", flat=True).first() or 0)


def policy_briefs() -> dict[int, dict[str, Any]]:
    """{tier id: the tier's autoscaler policy in brief}."""
    return {p.tier_id: {"id": p.pk, "enabled": p.enabled, "dry_run": p.dry_run,
                        "target_queue_per_node": p.target_queue_per_node}
            for p in AutoscalerPolicy.objects.all()}


# ---- autoscaler ------------------------------------------------------------------------------


def policy_list() -> QuerySet[AutoscalerPolicy]:
    return AutoscalerPolicy.objects.select_related("tier")


def decision_list() -> QuerySet[AutoscalerDecision]:
    return AutoscalerDecision.objects.select_related("tier", "scale_request")


# ---- the gateway's routing view --------------------------------------------------------------


def schedulable() -> dict[str, Any]:
    """Where new work may go: active nodes only (cordoned, draining, drained and
    maintenance nodes are out) and, on them, modules that take work (quarantined
    and failed modules are out). One consistent read."""
    nodes = (Node.objects.filter(state=NodeState.ACTIVE).select_related("tier", "rack")
             .prefetch_related(Prefetch("modules", queryset=Module.objects.filter(
                 state__in=SCHEDULABLE_MODULE_STATES).order_by("slot"), to_attr="schedulable_modules"))
             .order_by("tier__level", "hostname"))
    tiers: dict[str, list[dict[str, Any]]] = {t.kind: [] for t in Tier.objects.all()}
    for n in nodes:
        tiers.setdefault(n.tier.kind, []).append({
            "id": n.pk, "hostname": n.hostname, "rack": n.rack.name,
            "modules": [{"id": m.pk, "serial": m.serial, "slot": m.slot}
                        for m in n.schedulable_modules],  # type: ignore[attr-defined]
        })
    return {"generated_at": timezone.now(), "tiers": tiers}


def holders(*, node_ids: list[int], module_ids: list[int]) -> dict[str, dict[int, dict[str, str]]]:
    """Who holds these nodes (active cordon or drain) and modules (quarantine): {owner, by, reason}."""
    nodes = {d.node_id: {"owner": d.owner, "by": d.created_by_name, "reason": d.reason}
             for d in Drain.objects.filter(node_id__in=node_ids, state__in=ACTIVE_DRAIN_STATES)}
    modules = {q.module_id: {"owner": q.owner, "by": q.created_by_name, "reason": q.reason}
               for q in Quarantine.objects.filter(module_id__in=module_ids, released_at__isnull=True)}
    return {"nodes": nodes, "modules": modules}


def overdue_drains() -> dict[int, dict[str, Any]]:
    """Active drains whose deadline passed with work still in flight (the controller alerted), per node id."""
    rows = Drain.objects.filter(state=DrainState.DRAINING, alerted_at__isnull=False).values(
        "node_id", "owner", "created_by_name", "reason", "deadline", "alerted_at", "pk")
    return {d["node_id"]: dict(d) for d in rows}
