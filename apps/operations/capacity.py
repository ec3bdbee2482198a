"""How much capacity a tier's traffic needs, and the one rule for how much may be
taken away. Pure (no Django): ``apps.operations.selectors.tier_load`` reads the
fleet snapshot and the inventory into ``TierLoad``; the lifecycle's capacity
guard, the autoscaler (through the guard) and the planner's what-if call
``tier_need`` and ``removal_check``.

A tier needs the most of three figures, each in active nodes:

- **traffic** (docs/domain.md's sizing formulas, with headroom): access &
  logic: requests/s × instructions per request ÷ a node's usable instructions/s
  (cores × 1e9/s × clock ÷ 3 GHz × 25 %); hybrid inference: output tokens/s ×
  GFLOPs per token ÷ a module's INT8 TOPS gives modules, ÷ modules per node
  gives nodes. Both divided by (1 − headroom).
- **utilisation** (measured): the work the serving nodes do now (active,
  cordoned and draining nodes: their mean CPU, or their modules' mean
  utilisation, times their count) ÷ the target utilisation. A node taken out of
  service leaves its work to the others, so the work, not the mean, is what the
  remaining nodes must carry. A tier running hot needs more than its formula
  says (agent logic costs more CPU than the rule of thumb).
- **queue**: a queue that grows (arrivals above completions beyond the
  tolerance) needs every active node and more: active × arrivals ÷ completions.

The floor is ``max(min_active_nodes, need)``. Taking a serving node (or module)
out of service is refused when the tier would fall below its floor; an operator
may override with a reason, a health action on a critical finding may go below
it (broken capacity is not capacity). External large-model tiers (endpoints,
not nodes) need no array nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from apps.common.templatetags.numbers import number_text

ACCESS_LOGIC = "access_logic"
HYBRID_INFERENCE = "hybrid_inference"
REFERENCE_CLOCK_GHZ = 3.0


@dataclass(frozen=True)
class Params:
    """Defaults from docs/domain.md; ``settings.CAPACITY`` may override each."""

    instructions_per_request: float = 500_000    # docs/domain.md: 300k-500k; the upper end
    core_ips: float = 1e9                        # simple instructions/s per core at 3 GHz
    usable_fraction: float = 0.25                # of that, usable in practice
    gflops_per_token: float = 6.0                # a 1B/7B mix
    headroom: float = 0.25                       # on the traffic formula
    target_util: float = 0.7                     # measured utilisation a tier should run at
    release_util: float = 0.5                    # a plan releases nodes only down to this utilisation
    queue_tolerance: float = 0.05                # arrivals may exceed completions by this share


@dataclass(frozen=True)
class TierLoad:
    """What a tier has and does now. ``None`` where telemetry has nothing fresh."""

    kind: str
    name: str
    min_active_nodes: int
    active_nodes: int                     # nodes that count as capacity (state active)
    serving_modules: int = 0              # healthy/degraded modules on active nodes
    node_cpu_ips: float = 0.0             # usable instructions/s of the tier's mean active node
    module_tops: float = 0.0              # mean INT8 TOPS of the serving modules
    requests_per_s: float | None = None
    completions_per_s: float | None = None
    output_tokens_per_s: float | None = None
    busy_nodes: float | None = None       # CPU work of the serving nodes, in node-equivalents
    busy_modules: float | None = None     # module work of the serving nodes, in module-equivalents
    queue_depth: float | None = None
    window_s: int | None = None           # the window the rates are measured over


@dataclass(frozen=True)
class Need:
    nodes: int                            # active nodes the traffic needs
    modules: int                          # serving modules it needs (hybrid inference; 0 elsewhere)
    binding: str                          # which figure sets it: traffic, utilisation, queue or none
    parts: dict[str, int] = field(default_factory=dict)
    explanation: str = ""

    def floor(self, min_active_nodes: int) -> int:
        return max(min_active_nodes, self.nodes)


def _ceil(x: float) -> int:
    # 2.0000000001 from float noise is 2, not 3.
    return max(0, math.ceil(round(x, 9)))


def _n(x: float) -> str:
    # as every page prints a figure: 293 req/s, 37.5 TOPS, 2.64 per node
    return number_text(x)


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def tier_need(load: TierLoad, p: Params = Params()) -> Need:
    """The active nodes (and modules) ``load``'s traffic needs now, which figure binds and why."""
    if load.kind not in (ACCESS_LOGIC, HYBRID_INFERENCE):
        return Need(0, 0, "none", {}, f"{load.name}: served by endpoints outside the array; needs no array nodes")
    parts: dict[str, int] = {}
    texts: list[str] = []
    modules_needed = 0
    per_node = load.serving_modules / load.active_nodes if load.active_nodes else 0.0

    # Traffic: the formulas of docs/domain.md ("Capacity planning").
    if load.kind == ACCESS_LOGIC and load.requests_per_s is not None and load.node_cpu_ips > 0:
        load_ips = load.requests_per_s * p.instructions_per_request
        n = _ceil(load_ips / (1 - p.headroom) / load.node_cpu_ips)
        parts["traffic"] = n
        texts.append(f"traffic: {_n(load.requests_per_s)} req/s × {_n(p.instructions_per_request)} instructions "
                     f"÷ (1 − {_pct(p.headroom)} headroom) ÷ {_n(load.node_cpu_ips)}/s per node = {n}")
    elif load.kind == HYBRID_INFERENCE and load.output_tokens_per_s is not None and load.module_tops > 0:
        tflops = load.output_tokens_per_s * p.gflops_per_token / 1000
        mods = _ceil(tflops / (1 - p.headroom) / load.module_tops)
        modules_needed = max(modules_needed, mods)
        n = _ceil(mods / per_node) if per_node else mods
        parts["traffic"] = n
        texts.append(f"traffic: {_n(load.output_tokens_per_s)} output tok/s × {_n(p.gflops_per_token)} GFLOPs = "
                     f"{_n(tflops)} TFLOPs ÷ (1 − {_pct(p.headroom)} headroom) ÷ {_n(load.module_tops)} TOPS = "
                     f"{mods} modules ÷ {_n(per_node)} per node = {n}")

    # Utilisation: the work done now at the target utilisation.
    if load.kind == ACCESS_LOGIC and load.busy_nodes is not None:
        n = _ceil(load.busy_nodes / p.target_util)
        parts["utilisation"] = n
        texts.append(f"utilisation: CPU work of {_n(load.busy_nodes)} busy nodes ÷ {_pct(p.target_util)} target = {n}")
    elif load.kind == HYBRID_INFERENCE and load.busy_modules is not None and per_node:
        mods = _ceil(load.busy_modules / p.target_util)
        modules_needed = max(modules_needed, mods)
        n = _ceil(mods / per_node)
        parts["utilisation"] = n
        texts.append(f"utilisation: work of {_n(load.busy_modules)} busy modules ÷ {_pct(p.target_util)} target = "
                     f"{mods} modules ÷ {_n(per_node)} per node = {n}")

    # Queue: growing means the tier already has too little.
    if (load.requests_per_s is not None and load.completions_per_s is not None and load.active_nodes
            and load.requests_per_s > load.completions_per_s * (1 + p.queue_tolerance)):
        ratio = load.requests_per_s / max(load.completions_per_s, 1e-9)
        n = _ceil(load.active_nodes * ratio)
        parts["queue"] = n
        if load.kind == HYBRID_INFERENCE:
            modules_needed = max(modules_needed, _ceil(load.serving_modules * ratio))
        texts.append(f"queue: growing ({_n(load.requests_per_s)} arrivals/s against {_n(load.completions_per_s)} "
                     f"completions/s): {load.active_nodes} × {_n(ratio)} = {n}")

    if not parts:
        return Need(0, 0, "none", {}, f"{load.name}: no fresh traffic or utilisation from telemetry")
    binding = max(parts, key=lambda k: (parts[k], k == "queue", k == "utilisation"))
    nodes = parts[binding]
    return Need(nodes, modules_needed, binding, parts,
                f"{load.name} needs {nodes} active node{'s' if nodes != 1 else ''} ({binding} binds): "
                + "; ".join(texts))


@dataclass(frozen=True)
class Refusal:
    """Why taking capacity away is refused, with the numbers."""

    tier: str
    unit: str          # "node" or "module"
    have: int
    after: int
    floor: int
    need: Need
    min_active_nodes: int

    @property
    def message(self) -> str:
        floor_text = (f"max(min_active_nodes {self.min_active_nodes}, need {self.need.nodes})"
                      if self.unit == "node" else f"the {self.need.modules} modules its traffic needs")
        return (f"{self.tier} would fall to {self.after} serving {self.unit}s (from {self.have}), below its floor of "
                f"{self.floor} = {floor_text}. {self.need.explanation}.")

    def as_dict(self) -> dict[str, object]:
        return {"tier": self.tier, "unit": self.unit, "have": self.have, "after": self.after, "floor": self.floor,
                "need": self.need.nodes, "need_modules": self.need.modules, "binding": self.need.binding,
                "min_active_nodes": self.min_active_nodes}


def removal_check(load: TierLoad, need: Need, *, nodes: int = 0, modules: int = 0) -> Refusal | None:
    """Refusal if taking ``nodes`` active nodes (or ``modules`` serving modules) out of ``load``'s tier
    would leave it below its floor; None when it may go."""
    if nodes:
        floor = need.floor(load.min_active_nodes)
        after = load.active_nodes - nodes
        if after < floor:
            return Refusal(load.name, "node", load.active_nodes, after, floor, need, load.min_active_nodes)
    if modules and need.modules:
        after = load.serving_modules - modules
        if after < need.modules:
            return Refusal(load.name, "module", load.serving_modules, after, need.modules, need,
                           load.min_active_nodes)
    return None
