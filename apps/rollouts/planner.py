"""The plan of a rollout's waves. Pure (no Django): ``services`` reads the fleet into
``PlanNode`` and ``TierBudget`` and stores what ``plan_waves`` returns.

- The canary (wave 0): the first ``canary`` nodes of each tier in scope: a number of nodes, or a
  percentage of the tier's nodes in scope ("10%", rounded up, at least 1).
- Then waves of at most ``wave_size`` nodes.
- In every wave, the serving nodes one tier gives up are at most its budget: ``max_unavailable``
  ("25%" of the tier's active nodes, at least 1, or a number) and never more than the tier's
  active nodes above its floor ``max(min_active_nodes, need)`` (the lifecycle's capacity guard,
  which checks again at each cordon). Standby nodes cost no capacity.

A tier that has serving nodes in scope and no room above its floor cannot be planned
(``PlanError`` naming the tier and its numbers).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

_PCT = re.compile(r"^\s*(\d{1,3}(?:\.\d+)?)\s*%\s*$")
_SIGNED_INT = re.compile(r"^\s*(-?\d{1,6})\s*$")


class PlanError(ValueError):
    def __init__(self, field_name: str, message: str, *, capacity: bool = False) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message
        self.capacity = capacity  # the fleet's state, not the request, is in the way (409, not 400)


@dataclass(frozen=True)
class PlanNode:
    node_id: int
    hostname: str
    tier_id: int
    serving: bool  # active now: taking it out costs the tier a node


@dataclass(frozen=True)
class TierBudget:
    tier_id: int
    name: str
    active: int
    floor: int
    need: int
    min_active_nodes: int
    binding: str = "none"


@dataclass
class Wave:
    index: int
    canary: bool
    nodes: list[PlanNode] = field(default_factory=list)

    def out(self, tier_id: int) -> int:
        return sum(1 for n in self.nodes if n.tier_id == tier_id and n.serving)


def _nodes_or_percentage(field: str, value: Any, *, what: str, at_least: str, refuse_floats: bool) -> tuple[str, float]:
    """("pct", 25.0) or ("n", 2.0) from "25%" or 2; PlanError naming ``field`` otherwise."""
    text = str(value)
    if isinstance(value, bool) or value is None or (refuse_floats and isinstance(value, float)):
        raise PlanError(field, what)
    m = _PCT.match(text)
    if m:
        pct = float(m.group(1))
        if not 0 < pct <= 100:
            raise PlanError(field, f"{text!r}: a percentage above 0 and at most 100")
        return "pct", pct
    m = _SIGNED_INT.match(text)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise PlanError(field, f"{text!r}: {at_least}")
        return "n", float(n)
    raise PlanError(field, f"{text!r}: {what}")


def parse_max_unavailable(value: Any) -> tuple[str, float]:
    """("pct", 25.0) or ("n", 2.0); PlanError naming ``max_unavailable`` otherwise."""
    return _nodes_or_percentage("max_unavailable", value, what="a percentage like '25%' or a number of nodes",
                                at_least="at least 1 node", refuse_floats=False)


def parse_canary(value: Any) -> tuple[str, float]:
    """("n", 2.0) or ("pct", 10.0); PlanError naming ``canary`` otherwise."""
    return _nodes_or_percentage("canary", value, what="a number of nodes per tier (like 1) or a percentage of each "
                                "tier's nodes in scope (like '10%')", at_least="at least 1 node per tier",
                                refuse_floats=True)


def canary_text(value: Any) -> str:
    """The stored form of a valid canary: "2" or "10%"."""
    kind, x = parse_canary(value)
    return f"{x:g}%" if kind == "pct" else str(int(x))


def canary_count(spec: tuple[str, float], nodes_in_tier: int) -> int:
    """Canary nodes of a tier with ``nodes_in_tier`` nodes in scope."""
    kind, x = spec
    return int(x) if kind == "n" else max(1, math.ceil(nodes_in_tier * x / 100 - 1e-9))


def budget(spec: tuple[str, float], tier: TierBudget) -> int:
    """Serving nodes ``tier`` may give up at once: the spec, capped by its room above the floor."""
    kind, x = spec
    wanted = max(1, math.floor(tier.active * x / 100 + 1e-9)) if kind == "pct" else int(x)
    return max(0, min(wanted, tier.active - tier.floor))


def plan_waves(nodes: list[PlanNode], tiers: dict[int, TierBudget], *, canary: Any, wave_size: int,
               max_unavailable: Any) -> list[Wave]:
    """The waves, in order (see the module's docstring). ``nodes`` in the order to take them."""
    if wave_size < 1:
        raise PlanError("wave_size", "at least 1 node per wave")
    canary_spec = parse_canary(canary)
    spec = parse_max_unavailable(max_unavailable)
    allowed = {tid: budget(spec, t) for tid, t in tiers.items()}
    for tid, t in tiers.items():
        if allowed[tid] < 1 and any(n.serving and n.tier_id == tid for n in nodes):
            raise PlanError("max_unavailable",
                            f"tier {t.name} has no room: {t.active} active nodes, floor {t.floor} = max("
                            f"min_active_nodes {t.min_active_nodes}, need {t.need} ({t.binding} binds)); no "
                            "serving node can go out without taking it below its floor", capacity=True)
    by_tier: dict[int, list[PlanNode]] = {}
    for n in nodes:
        by_tier.setdefault(n.tier_id, []).append(n)
    waves: list[Wave] = []
    first = Wave(0, True)
    rest: list[PlanNode] = []
    for tid, members in by_tier.items():
        taken, wanted = 0, canary_count(canary_spec, len(members))
        for n in members:
            if taken < wanted and (not n.serving or first.out(tid) < allowed[tid]):
                first.nodes.append(n)
                taken += 1
            else:
                rest.append(n)
    if first.nodes:
        waves.append(first)
    # Interleave the tiers so each wave spreads across them.
    queues = {tid: [n for n in rest if n.tier_id == tid] for tid in by_tier}
    order: list[PlanNode] = []
    while any(queues.values()):
        for tid in list(queues):
            if queues[tid]:
                order.append(queues[tid].pop(0))
    while order:
        wave = Wave(len(waves), False)
        left: list[PlanNode] = []
        for n in order:
            if len(wave.nodes) < wave_size and (not n.serving or wave.out(n.tier_id) < allowed[n.tier_id]):
                wave.nodes.append(n)
            else:
                left.append(n)
        waves.append(wave)
        order = left
    return waves


def describe(waves: list[Wave], tiers: dict[int, TierBudget], spec_text: Any) -> list[dict[str, Any]]:
    """Each wave, node by node, with every tier's capacity during it against its floor."""
    spec = parse_max_unavailable(spec_text)
    out = []
    for w in waves:
        capacity = []
        for tid, t in tiers.items():
            gone = w.out(tid)
            capacity.append({"tier": tid, "tier_name": t.name, "active_before": t.active, "out": gone,
                             "active_during": t.active - gone, "need": t.need, "floor": t.floor,
                             "min_active_nodes": t.min_active_nodes, "binding": t.binding,
                             "budget": budget(spec, t), "ok": t.active - gone >= t.floor or gone == 0})
        out.append({"index": w.index, "canary": w.canary,
                    "nodes": [{"node": n.node_id, "hostname": n.hostname, "tier": n.tier_id, "serving": n.serving}
                              for n in w.nodes],
                    "capacity": capacity})
    return out
