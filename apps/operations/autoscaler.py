"""The autoscaler's decision as a pure function (no Django): the benchmark and
the service call the same code.

desired = ceil(current x observed / target) on queue depth per active node,
as the Kubernetes HPA does, then:

1. tolerance: no change while |observed/target - 1| <= tolerance;
2. scale-down headroom (``down_headroom``): queue depth grows faster than
   linearly as nodes are removed, so the linear formula removes too many and
   the next evaluation adds them back (flapping); a scale-down goes only as
   far as the queue per node, assumed to grow with the square of the load per
   node, stays within the lower tolerance;
3. min/max bounds;
4. stabilisation (HPA ``behavior``): scale up only to the *lowest*
   recommendation of the up window, scale down only to the *highest*
   recommendation of the down window (defaults 0 s and 300 s);
5. step limits (HPA ``behavior`` policies): a scale-up adds at most the
   larger of ``max_step`` nodes and ``scale_up_percent`` of the current count
   (the HPA's default: 4 or 100%); a scale-down removes at most
   ``scale_down_percent`` of the current count (at least one node, at most
   ``max_step``);
6. cooldown: no scale-down until ``cooldown_s`` after the last scale action
   (scale-up is never delayed by the cooldown: the SLO comes first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Params:
    target_per_node: float
    tolerance: float = 0.1
    up_window_s: float = 0.0
    down_window_s: float = 300.0
    max_step: int = 4
    scale_up_percent: float = 100.0
    scale_down_percent: float = 25.0
    down_headroom: bool = True
    cooldown_s: float = 60.0
    min_nodes: int = 0
    max_nodes: int = 1000


@dataclass(frozen=True)
class Decision:
    current: int
    ratio: float | None
    raw: int
    recommendation: int
    stabilized: int
    desired: int
    notes: list[str] = field(default_factory=list)

    @property
    def direction(self) -> int:
        return (self.desired > self.current) - (self.desired < self.current)

    def explanation(self) -> str:
        return "; ".join(self.notes)


def _clamp(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, n))


def decide(
    params: Params,
    *,
    current: int,
    queue_depth: float,
    now: float,
    history: Sequence[tuple[float, int]] = (),
    last_scale_at: float | None = None,
) -> Decision:
    """``history``: (time, recommendation) of earlier decisions, any order;
    ``now`` and times in seconds on one clock."""
    lo, hi = params.min_nodes, params.max_nodes
    target = params.target_per_node
    notes: list[str] = []
    if current <= 0:
        ratio = None
        raw = math.ceil(queue_depth / target - 1e-9) if queue_depth > 0 else 0
        notes.append(f"no active node; queue depth {queue_depth:g} / target {target:g} per node = {raw}")
    else:
        per_node = queue_depth / current
        ratio = per_node / target
        if abs(ratio - 1.0) <= params.tolerance:
            raw = current
            notes.append(f"queue depth {queue_depth:g} over {current} nodes = {per_node:.2f} per node, "
                         f"within {params.tolerance:g} of the target {target:g}: no change")
        else:
            raw = math.ceil(current * ratio - 1e-9)
            notes.append(f"queue depth {queue_depth:g} over {current} nodes = {per_node:.2f} per node vs target "
                         f"{target:g}: ceil({current} x {ratio:.3f}) = {raw}")
    recommendation = raw
    if raw < current and ratio is not None and ratio > 0 and params.down_headroom:
        # Queue depth grows faster than linearly as nodes are removed (queueing is convex in load),
        # so the linear formula removes too many and the next evaluation adds them back (flapping).
        # Scale down only as far as the queue per node, assumed to grow with the square of the
        # load per node, stays within the lower tolerance.
        floor = math.ceil(current * math.sqrt(ratio / (1.0 - params.tolerance)) - 1e-9)
        if floor > raw:
            recommendation = min(current, floor)
            notes.append(f"scale-down headroom: queue grows with the square of load per node, keep {recommendation}")
    bounded = _clamp(recommendation, lo, hi)
    if bounded != recommendation:
        notes.append(f"bounded to [{lo}, {hi}]: {bounded}")
    recommendation = bounded

    up_recs = [r for t, r in history if 0 <= now - t <= params.up_window_s] + [recommendation]
    down_recs = [r for t, r in history if 0 <= now - t <= params.down_window_s] + [recommendation]
    stabilized = current
    up_rec, down_rec = min(up_recs), max(down_recs)
    if stabilized < up_rec:
        stabilized = up_rec
    if stabilized > down_rec:
        stabilized = down_rec
    if recommendation > current and stabilized < recommendation:
        notes.append(f"scale-up stabilisation: lowest recommendation of the last {params.up_window_s:g}s "
                     f"is {up_rec}")
    if recommendation < current and stabilized > recommendation:
        notes.append(f"scale-down stabilisation: highest recommendation of the last {params.down_window_s:g}s "
                     f"is {down_rec}")

    desired = stabilized
    up = max(params.max_step, math.ceil(current * params.scale_up_percent / 100))
    if desired > current + up:
        desired = current + up
        notes.append(f"step limited to +{up}")
    else:
        down = min(params.max_step, max(1, math.floor(current * params.scale_down_percent / 100)))
        if desired < current - down:
            desired = current - down
            notes.append(f"step limited to -{down}")
    if desired < current and last_scale_at is not None and now - last_scale_at < params.cooldown_s:
        left = params.cooldown_s - (now - last_scale_at)
        notes.append(f"cooldown: no scale-down for another {left:.0f}s")
        desired = current
    bounded = _clamp(desired, lo, hi)
    if bounded != desired:
        notes.append(f"current count outside [{lo}, {hi}]: {bounded}")
        desired = bounded
    if desired == current:
        notes.append(f"keep {current}")
    else:
        notes.append(f"{'scale up' if desired > current else 'scale down'} {current} -> {desired}")
    return Decision(current=current, ratio=ratio, raw=raw, recommendation=recommendation,
                    stabilized=stabilized, desired=desired, notes=notes)
