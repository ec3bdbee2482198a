"""Reads of fleet operations: what a hold waits for, which nodes a scale picks,
the gateway's schedulable set, the latest telemetry an operation needs."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db.models import Prefetch, QuerySet, Sum
from django.utils import timezone

from apps.inventory.choices import SERVING_STATES, ModuleState, NodeState
from apps.inventory.models import Module, Node, Rack, Tier
from apps.inventory.selectors import version_drift
from apps.operations.choices import ACTIVE_DRAIN_STATES, AfterDrain, DeadlineAction, DrainState
from apps.operations.models import AutoscalerDecision, AutoscalerPolicy, Drain, Quarantine, ScaleRequest
from apps.telemetry.models import NodeStatus, TierStatus

# A tier's queue depth older than this is not acted on.
QUEUE_FRESH_S = 60
# Health of module states a node may be activated with.
ACTIVATABLE_MODULE_STATES = (ModuleState.HEALTHY,)
# Module states that take work.
SCHEDULABLE_MODULE_STATES = (ModuleState.HEALTHY, ModuleState.DEGRADED)


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


def tier_queue_depth(*, tier: Tier, now: dt.datetime | None = None) -> float | None:
    """The tier's newest queue depth from the gateway, if fresh."""
    now = now or timezone.now()
    status = TierStatus.objects.filter(tier=tier, last_seen__gte=now - dt.timedelta(seconds=QUEUE_FRESH_S)).first()
    return float(status.queue_depth) if status is not None else None


def tier_active_count(*, tier: Tier) -> int:
    return Node.objects.filter(tier=tier, state=NodeState.ACTIVE).count()


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
    return Quarantine.objects.select_related("module", "module__node")


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
        base = (f"forced drained with {drain.in_flight_at_force} in flight" if drain.forced
                else "drained: zero in flight")
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
        else:
            n = report.in_flight
            parts.append(f"waiting for {n} in-flight request{'s' if n != 1 else ''}" if n
                         else "zero in flight reported; completes on the next pass")
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
        if not node.ecc_memory:
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


def scale_down_candidates(*, tier: Tier, count: int) -> list[Node]:
    """Active nodes to release: fewest requests in flight first (no report counts as
    busy), from the racks with the most active nodes of the tier, to keep the spread."""
    nodes = list(Node.objects.filter(tier=tier, state=NodeState.ACTIVE).order_by("hostname"))
    in_flight = dict(NodeStatus.objects.filter(node__in=nodes).values_list("node_id", "in_flight"))
    per_rack: dict[int, int] = defaultdict(int)
    for n in nodes:
        per_rack[n.rack_id] += 1
    chosen: list[Node] = []
    while nodes and len(chosen) < count:
        pick = min(nodes, key=lambda n: (in_flight.get(n.pk, 10**9), -per_rack[n.rack_id], n.hostname))
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
