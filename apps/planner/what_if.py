"""What-if: the array plan for a demand, against the capacity installed per tier.

Pure (no Django): ``apps.planner.selectors`` reads the inventory and telemetry
into the dataclasses below.

- access & logic tier (CPU): a node's usable capacity is cores × instructions/s
  per core (scaled by clock ÷ 3 GHz, the clock DOMAIN's 1e9/s is quoted at) ×
  the usable fraction. Nodes needed = ceil(CPU load ÷ (1 − target headroom) ÷
  the tier's mean node capacity).
- hybrid inference tier (modules): modules needed = ceil(model compute ÷ TOPS
  per module), TOPS per module = the installed modules' mean unless given;
  nodes needed = ceil(modules ÷ modules per node), modules per node = the
  installed mean unless given.
- external large model tier: not sized by the array formulas (endpoints only).

A positive delta is capacity to add, a negative one capacity that could be
released; the recommendation keeps the tier within its min/max active nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from apps.planner.formulas import Number, array_from_rate, ceil_exact, exact, fmt

ACCESS_LOGIC = "access_logic"
HYBRID_INFERENCE = "hybrid_inference"
EXTERNAL_LARGE_MODEL = "external_large_model"
REFERENCE_CLOCK_GHZ = 3
# Used only when the tier has no nodes at all to take a mean from.
FALLBACK_NODE_CORES = 8
FALLBACK_MODULE_TOPS = 30
FALLBACK_MODULES_PER_NODE = 2


@dataclass(frozen=True)
class Demand:
    requests_per_s: Number
    input_tokens_per_request: Number
    output_tokens_per_request: Number
    source: str  # "telemetry", "user" or "telemetry+user"
    explanation: str


@dataclass(frozen=True)
class NodeCapacity:
    hostname: str
    cpu_cores: int
    cpu_clock_ghz: Number
    module_tops: tuple[Number, ...] = ()  # INT8 TOPS of each serving module


@dataclass(frozen=True)
class TierInstalled:
    kind: str
    name: str
    active: tuple[NodeCapacity, ...]
    standby: tuple[NodeCapacity, ...]
    min_active_nodes: int
    max_active_nodes: int
    endpoints: int = 0


@dataclass(frozen=True)
class WhatIfParams:
    gflops_per_token: Number = 6
    module_tops: Number | None = None
    modules_per_node: Number | None = None
    instructions_per_request: Number = 500_000
    core_ips: Number = 1_000_000_000
    usable_fraction: Number = Fraction(1, 4)
    target_cpu_headroom: Number = 0


@dataclass(frozen=True)
class TierPlan:
    tier: str
    name: str
    active_nodes: int
    standby_nodes: int
    nodes_needed: int | None
    nodes_delta: int  # recommended change of active nodes, within the tier's min/max
    action: str
    installed: Mapping[str, float | int | None]
    needed: Mapping[str, float | int | None]
    modules_delta: int | None = None
    explanations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WhatIfResult:
    demand: Demand
    plan: Mapping[str, float | int]
    tiers: tuple[TierPlan, ...]
    explanations: Mapping[str, str]


def _node_cpu_per_s(node: NodeCapacity, p: WhatIfParams) -> Fraction:
    return node.cpu_cores * exact(p.core_ips) * exact(node.cpu_clock_ghz) / REFERENCE_CLOCK_GHZ * exact(
        p.usable_fraction)


def _recommend(tier: TierInstalled, needed: int) -> tuple[int, str]:
    """The change of active nodes within min/max, and a sentence saying what to do."""
    active, standby = len(tier.active), len(tier.standby)
    target = min(max(needed, tier.min_active_nodes), tier.max_active_nodes)
    delta = target - active
    notes = []
    if needed > tier.max_active_nodes:
        notes.append(f"the plan needs {needed}, above the tier maximum of {tier.max_active_nodes}")
    if needed < tier.min_active_nodes:
        notes.append(f"the tier minimum keeps {tier.min_active_nodes} active")
    if delta > 0:
        from_standby = min(delta, standby)
        text = f"add {delta} node{'s' if delta != 1 else ''} ({from_standby} from standby"
        text += f", {delta - from_standby} new)" if delta > from_standby else ")"
    elif delta < 0:
        text = f"release {-delta} node{'s' if delta != -1 else ''} (drain first)"
    else:
        text = "no change"
    if notes:
        text += "; " + "; ".join(notes)
    return delta, text


def _mean(values: list[Fraction], fallback: Number) -> Fraction:
    return sum(values, Fraction(0)) / len(values) if values else exact(fallback)


def plan_against_installed(demand: Demand, params: WhatIfParams, installed: list[TierInstalled]) -> WhatIfResult:
    tiers = {t.kind: t for t in installed}
    access = tiers.get(ACCESS_LOGIC) or TierInstalled(ACCESS_LOGIC, "Access & logic", (), (), 0, 1000)
    hybrid = tiers.get(HYBRID_INFERENCE) or TierInstalled(HYBRID_INFERENCE, "Hybrid inference", (), (), 0, 1000)

    rps = exact(demand.requests_per_s)
    # Means from the active nodes, else the standby nodes, else the reference node.
    access_pool = access.active or access.standby
    node_cpu = _mean([_node_cpu_per_s(n, params) for n in access_pool],
                     _node_cpu_per_s(NodeCapacity("reference", FALLBACK_NODE_CORES, REFERENCE_CLOCK_GHZ), params))
    installed_cpu = sum((_node_cpu_per_s(n, params) for n in access.active), Fraction(0))

    active_tops = [exact(t) for n in hybrid.active for t in n.module_tops]
    standby_tops = [exact(t) for n in hybrid.standby for t in n.module_tops]
    module_tops = exact(params.module_tops) if params.module_tops is not None else _mean(
        active_tops or standby_tops, FALLBACK_MODULE_TOPS)
    if params.modules_per_node is not None:
        per_node = exact(params.modules_per_node)
    elif hybrid.active and active_tops:
        per_node = Fraction(len(active_tops), len(hybrid.active))
    else:
        per_node = Fraction(FALLBACK_MODULES_PER_NODE)

    array = array_from_rate(
        requests_per_s=rps,
        rate_explanation=f"requests/s = {fmt(rps)} ({demand.source}: {demand.explanation})",
        input_tokens=exact(demand.input_tokens_per_request),
        output_tokens=exact(demand.output_tokens_per_request),
        gflops_per_token=exact(params.gflops_per_token),
        module_tops=module_tops,
        modules_per_node=per_node,
        instructions_per_request=exact(params.instructions_per_request),
        cpu_capacity_per_s=installed_cpu if installed_cpu > 0 else node_cpu,
        capacity_explanation=(
            f"installed CPU capacity = sum over {len(access.active)} active access & logic nodes of cores × "
            f"{fmt(params.core_ips)}/s × clock ÷ {REFERENCE_CLOCK_GHZ} GHz × {fmt(params.usable_fraction)} usable "
            f"= {fmt(installed_cpu)}/s"
        ),
    )

    # Access & logic: CPU.
    target = exact(params.target_cpu_headroom)
    required_cpu = array.cpu_instructions_per_s / (1 - target)
    cpu_nodes = ceil_exact(required_cpu / node_cpu)
    cpu_delta, cpu_action = _recommend(access, cpu_nodes)
    cpu_headroom = (1 - array.cpu_instructions_per_s / installed_cpu) if installed_cpu > 0 else None
    access_plan = TierPlan(
        tier=access.kind, name=access.name, active_nodes=len(access.active), standby_nodes=len(access.standby),
        nodes_needed=cpu_nodes, nodes_delta=cpu_delta, action=cpu_action,
        installed={"cpu_capacity_per_s": float(installed_cpu),
                   "cpu_headroom": None if cpu_headroom is None else float(cpu_headroom)},
        needed={"cpu_instructions_per_s": float(array.cpu_instructions_per_s),
                "cpu_capacity_per_s": float(required_cpu), "node_cpu_capacity_per_s": float(node_cpu)},
        explanations={
            "cpu_capacity_per_s": array.explanations["cpu_capacity_per_s"],
            "cpu_headroom": (f"headroom = 1 − {fmt(array.cpu_instructions_per_s)} ÷ {fmt(installed_cpu)} "
                             f"= {fmt(cpu_headroom)}" if cpu_headroom is not None
                             else "no active access & logic nodes: no installed CPU capacity"),
            "nodes_needed": (
                f"nodes = ceil({fmt(array.cpu_instructions_per_s)}/s ÷ (1 − {fmt(target)} target headroom) ÷ "
                f"{fmt(node_cpu)}/s per node) = {cpu_nodes}"
            ),
            "nodes_delta": f"{cpu_nodes} needed − {len(access.active)} active → {cpu_action}",
        },
    )

    # Hybrid inference: modules.
    modules_installed = len(active_tops)
    installed_tops = sum(active_tops, Fraction(0))
    modules_delta = array.modules_needed - modules_installed
    hyb_delta, hyb_action = _recommend(hybrid, array.nodes_needed)
    module_word = "add" if modules_delta > 0 else "release" if modules_delta < 0 else "keep"
    compute_headroom = (1 - array.compute_tflops / installed_tops) if installed_tops > 0 else None
    hybrid_plan = TierPlan(
        tier=hybrid.kind, name=hybrid.name, active_nodes=len(hybrid.active), standby_nodes=len(hybrid.standby),
        nodes_needed=array.nodes_needed, nodes_delta=hyb_delta,
        action=f"modules: {module_word} {abs(modules_delta)}; nodes: {hyb_action}",
        modules_delta=modules_delta,
        installed={"modules": modules_installed, "tops": float(installed_tops),
                   "compute_headroom": None if compute_headroom is None else float(compute_headroom)},
        needed={"modules": array.modules_needed, "compute_tflops": float(array.compute_tflops),
                "module_tops": float(module_tops), "modules_per_node": float(per_node)},
        explanations={
            "compute_tflops": array.explanations["compute_tflops"],
            "modules_needed": array.explanations["modules_needed"]
            + ("" if params.module_tops is not None else " (TOPS per module: the installed modules' mean)"),
            "nodes_needed": array.explanations["nodes_needed"]
            + ("" if params.modules_per_node is not None else " (modules per node: the installed mean)"),
            "modules_delta": (f"{array.modules_needed} needed − {modules_installed} installed on active nodes "
                              f"= {modules_delta:+d}"),
            "compute_headroom": (f"headroom = 1 − {fmt(array.compute_tflops)} TFLOPs/s ÷ {fmt(installed_tops)} TOPS "
                                 f"= {fmt(compute_headroom)}" if compute_headroom is not None
                                 else "no modules on active hybrid nodes"),
            "nodes_delta": f"{array.nodes_needed} needed − {len(hybrid.active)} active → {hyb_action}",
        },
    )
    plans = [access_plan, hybrid_plan]
    external = tiers.get(EXTERNAL_LARGE_MODEL)
    if external is not None:
        plans.append(TierPlan(
            tier=external.kind, name=external.name, active_nodes=len(external.active),
            standby_nodes=len(external.standby), nodes_needed=None, nodes_delta=0,
            action="not sized by the array formulas (requests for ≥70B models go to its endpoints)",
            installed={"endpoints": external.endpoints}, needed={},
        ))
    plan = {
        "requests_per_s": float(array.requests_per_s), "input_tokens_per_s": float(array.input_tokens_per_s),
        "output_tokens_per_s": float(array.output_tokens_per_s), "compute_tflops": float(array.compute_tflops),
        "modules_needed": array.modules_needed, "nodes_needed": array.nodes_needed,
        "cpu_instructions_per_s": float(array.cpu_instructions_per_s),
    }
    keys = ("requests_per_s", "input_tokens_per_s", "output_tokens_per_s", "compute_tflops", "modules_needed",
            "nodes_needed", "cpu_instructions_per_s")
    return WhatIfResult(demand=demand, plan=plan, tiers=tuple(plans),
                        explanations={k: array.explanations[k] for k in keys})
