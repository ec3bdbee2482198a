"""What-if: the array plan for a demand, against the capacity installed per tier.

Pure (no Django): ``apps.planner.selectors`` reads the inventory and telemetry
into the dataclasses below.

- access & logic tier (CPU): a node's usable capacity is cores × instructions/s
  per core (scaled by clock ÷ 3 GHz, the clock docs/domain.md quotes 1e9/s at) ×
  the usable fraction. Nodes needed = ceil(CPU load ÷ (1 − target headroom) ÷
  the tier's mean node capacity).
- hybrid inference tier (modules): modules needed = ceil(model compute ÷ TOPS
  per module), TOPS per module = the installed modules' mean unless given;
  nodes needed = ceil(modules ÷ modules per node), modules per node = the
  installed mean unless given.
- external large model tier: not sized by the array formulas (endpoints only).

A positive delta is capacity to add, a negative one capacity that could be
released; the recommendation keeps the tier within its min/max active nodes.

The formulas size from request counts only. Against a running fleet the plan
also reads each array tier as measured (``apps.operations.capacity``, the
function the lifecycle's capacity guard uses): the work its nodes do now and
whether its queue grows, scaled by the demand planned for ÷ the demand
observed. Nodes are added when the formula or the measured work at the target
utilisation (70 %) or a growing queue asks for more than are active; nodes are
released only down to where the measured work would keep the tier at or below
the release utilisation (50 %): between the two thresholds nothing changes, so
a release is not undone at the next rise. A growing queue is never answered
with a release. The plan names the limit that binds: formula, utilisation,
queue, minimum or maximum.

Beside the plan, each array tier shows its autoscaler's latest decision and a
sentence on why the two figures differ: the plan sizes for throughput (the
work the traffic takes, at a target utilisation), the autoscaler for waiting
work (queue depth ÷ its target queue per node, then its own limits); neither
sees what the other measures, so they agree only by coincidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from apps.operations import capacity
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
class AutoscalerView:
    """A tier autoscaler's latest decision (``apps.operations.autoscaler``): the queue it saw and the
    active nodes it wants."""

    current: int               # active nodes it counted
    queue_depth: float         # requests waiting at the tier
    target_per_node: float     # the queue per node it aims at
    raw: int                   # its formula: ceil(current × queue per node ÷ target)
    desired: int               # after its bounds, scale-down headroom, stabilisation, step and cooldown
    dry_run: bool
    as_of: str = ""            # ISO time of its latest evaluation


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
    binding: str = "formula"  # the limit that sets the recommendation: formula, utilisation, queue, minimum, maximum
    autoscaler: Mapping[str, object] | None = None  # its latest decision and why the two differ


@dataclass(frozen=True)
class WhatIfResult:
    demand: Demand
    plan: Mapping[str, float | int]
    tiers: tuple[TierPlan, ...]
    explanations: Mapping[str, str]


def _node_cpu_per_s(node: NodeCapacity, p: WhatIfParams) -> Fraction:
    return node.cpu_cores * exact(p.core_ips) * exact(node.cpu_clock_ghz) / REFERENCE_CLOCK_GHZ * exact(
        p.usable_fraction)


@dataclass(frozen=True)
class Sizing:
    """Active nodes a tier should have, the limit that sets it, and what that limit sizes for in words."""

    nodes: int
    binding: str
    text: str
    basis: str = ""


def _measured_sizing(formula_nodes: int, active: int, load: capacity.TierLoad | None, factor: float,
                     cp: capacity.Params, formula_basis: str = "") -> tuple[Sizing, dict[str, str], float | None]:
    """The formula's nodes against the tier as measured (scaled by ``factor``, the demand planned
    for ÷ the demand observed): add at the target utilisation or a growing queue, release only
    down to the release utilisation. Returns the sizing, explanations and the measured utilisation."""
    formula = Sizing(formula_nodes, "formula", f"the formula needs {formula_nodes}", formula_basis)
    if load is None:
        return formula, {}, None
    scaled = replace(
        load,
        requests_per_s=None if load.requests_per_s is None else load.requests_per_s * factor,
        completions_per_s=None if load.completions_per_s is None else load.completions_per_s * factor,
        output_tokens_per_s=None,  # the formula above sizes the traffic; here only what was measured
        busy_nodes=None if load.busy_nodes is None else load.busy_nodes * factor,
        busy_modules=None if load.busy_modules is None else load.busy_modules * factor,
    )
    if scaled.kind == capacity.ACCESS_LOGIC:
        scaled = replace(scaled, requests_per_s=None if load.completions_per_s is None else scaled.requests_per_s)
    add = capacity.tier_need(scaled, cp)
    keep = capacity.tier_need(scaled, replace(cp, target_util=cp.release_util))
    add_parts = {k: v for k, v in add.parts.items() if k != "traffic"}
    keep_parts = {k: v for k, v in keep.parts.items() if k != "traffic"}
    if load.kind == capacity.ACCESS_LOGIC:
        utilisation = (load.busy_nodes / load.active_nodes) if load.busy_nodes is not None and load.active_nodes \
            else None
    else:
        utilisation = (load.busy_modules / load.serving_modules) if load.busy_modules is not None \
            and load.serving_modules else None
    notes = {"measured": (add.explanation if add_parts else f"{load.name}: no fresh utilisation or queue figures")
             + (f" (measured work × {factor:.2f}, the demand planned for ÷ the demand observed)"
                if add_parts and abs(factor - 1) > 1e-9 else "")}
    if not add_parts:
        return formula, notes, utilisation
    busy = scaled.busy_nodes if load.kind == capacity.ACCESS_LOGIC else scaled.busy_modules
    work = (f"the measured work ({fmt(busy or 0)} busy "
            f"{'nodes' if load.kind == capacity.ACCESS_LOGIC else 'modules'})")
    bases = {"utilisation": f"{work} at the {100 * cp.target_util:.0f} % target utilisation",
             "queue": "a growing queue (arrivals above completions)"}
    add_key = max(add_parts, key=lambda k: (add_parts[k], k == "queue"))
    if max(formula_nodes, add_parts[add_key]) > active:  # more is needed than is active
        if add_parts[add_key] > formula_nodes:
            return Sizing(add_parts[add_key], add_key, f"{add_key} needs {add_parts[add_key]}",
                          bases[add_key]), notes, utilisation
        return formula, notes, utilisation
    if "queue" in add_parts:  # a growing queue is never answered with a release
        return Sizing(active, "queue", "the queue grows: keep every active node", bases["queue"]), notes, utilisation
    keep_key = max(keep_parts, key=lambda k: keep_parts[k])
    keep_nodes = keep_parts[keep_key]
    notes["release"] = (f"release only down to {keep_nodes}: {keep.explanation.split(': ', 1)[-1]} "
                        f"(release threshold {100 * cp.release_util:.0f} % utilisation)")
    release = f"{100 * cp.release_util:.0f} %"
    if keep_nodes >= active:
        return Sizing(active, keep_key,
                      f"{keep_key} keeps {active}: the tier runs above the {release} a release may take it to",
                      f"{work} keeps the tier above the {release} utilisation a release may take it to"
                      ), notes, utilisation
    if keep_nodes > formula_nodes:
        return Sizing(keep_nodes, keep_key, f"{keep_key} needs {keep_nodes}",
                      f"{work} at the {release} utilisation a release may take the tier to"), notes, utilisation
    return formula, notes, utilisation


def _autoscaler_comparison(sizing: Sizing, binding: str, kept: int, view: AutoscalerView, *,
                           observed: bool) -> dict[str, object]:
    """The autoscaler's latest decision beside the plan's nodes needed (``sizing``; ``kept``: the
    active nodes the plan keeps within the tier's bounds), with two sentences on why they differ.
    ``observed``: the plan is for the observed demand (else for the caller's, which the queue is not)."""
    basis = sizing.basis or sizing.text
    if binding in ("minimum", "maximum"):
        basis += f" (the tier {binding} keeps {kept} active)"
    queue, target = exact(view.queue_depth), exact(view.target_per_node)
    per_node = queue / view.current if view.current else None
    if per_node is not None and ceil_exact(queue / target) != view.raw:  # within its tolerance: no change
        formula = (f"{fmt(queue)} requests queued over {view.current} nodes is {fmt(per_node)} a node, within its "
                   f"tolerance of its target of {fmt(target)} a node, so its formula keeps {view.raw}")
    else:
        formula = (f"{fmt(queue)} requests queued ÷ its target of {fmt(target)} a node = {view.raw} nodes"
                   + (f" ({fmt(per_node)} a node over the {view.current} active now)" if per_node is not None else ""))
    if view.desired != view.raw:
        formula += f", and its bounds, stabilisation and step limits make that {view.desired}"
    text = (f"The planner's {sizing.nodes} sizes the tier for throughput: {basis}. "
            f"The autoscaler's {view.desired}{' (dry run)' if view.dry_run else ''} sizes it for the waiting work "
            f"{'' if observed else 'of the traffic now, not the demand planned here'}".rstrip() + ": "
            f"{formula}; neither reads what the other does, so they agree only when the queue per node "
            f"follows the work per node.")
    return {"current": view.current, "queue_depth": view.queue_depth, "target_per_node": view.target_per_node,
            "raw": view.raw, "desired": view.desired, "dry_run": view.dry_run, "as_of": view.as_of,
            "comparison": text}


def _recommend(tier: TierInstalled, sizing: Sizing) -> tuple[int, str, str]:
    """The change of active nodes within min/max, a sentence saying what to do and which limit binds."""
    active, standby = len(tier.active), len(tier.standby)
    needed = sizing.nodes
    target = min(max(needed, tier.min_active_nodes), tier.max_active_nodes)
    binding = sizing.binding
    if target > needed:
        binding = "minimum"
    elif target < needed:
        binding = "maximum"
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
    if notes:  # the tier's bounds bind
        text += f"; {binding} binds: " + "; ".join(notes) + f" ({sizing.text})"
    else:
        text += f"; {binding} binds: {sizing.text}"
    return delta, text, binding


def _factor(demand: Demand, load: capacity.TierLoad | None) -> float:
    """The demand planned for ÷ the demand observed (1 when the plan is for the observed demand)."""
    if load is None or not load.requests_per_s or demand.source == "telemetry":
        return 1.0
    return float(demand.requests_per_s) / load.requests_per_s


def _mean(values: list[Fraction], fallback: Number) -> Fraction:
    return sum(values, Fraction(0)) / len(values) if values else exact(fallback)


def plan_against_installed(demand: Demand, params: WhatIfParams, installed: list[TierInstalled], *,
                           measured: Mapping[str, capacity.TierLoad] | None = None,
                           capacity_params: capacity.Params | None = None,
                           autoscaler: Mapping[str, AutoscalerView] | None = None) -> WhatIfResult:
    """``measured``: each array tier's load now (``apps.operations.selectors.tier_load``); without it
    the formulas alone size the tiers. ``autoscaler``: each array tier's latest autoscaler decision,
    shown beside the plan with why the two differ."""
    measured = measured or {}
    autoscaler = autoscaler or {}
    cp = capacity_params or capacity.Params()
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
    access_load = measured.get(ACCESS_LOGIC)
    cpu_sizing, cpu_notes, cpu_util = _measured_sizing(
        cpu_nodes, len(access.active), access_load, _factor(demand, access_load), cp,
        f"{fmt(array.cpu_instructions_per_s)} instructions/s of CPU work at {fmt(node_cpu)}/s a node")
    cpu_delta, cpu_action, cpu_binding = _recommend(access, cpu_sizing)
    access_view = autoscaler.get(ACCESS_LOGIC)
    cpu_headroom = (1 - array.cpu_instructions_per_s / installed_cpu) if installed_cpu > 0 else None
    access_plan = TierPlan(
        tier=access.kind, name=access.name, active_nodes=len(access.active), standby_nodes=len(access.standby),
        nodes_needed=cpu_sizing.nodes, nodes_delta=cpu_delta, action=cpu_action, binding=cpu_binding,
        autoscaler=None if access_view is None else _autoscaler_comparison(
            cpu_sizing, cpu_binding, len(access.active) + cpu_delta, access_view,
            observed=demand.source == "telemetry"),
        installed={"cpu_capacity_per_s": float(installed_cpu),
                   "cpu_headroom": None if cpu_headroom is None else float(cpu_headroom),
                   "measured_utilisation": cpu_util},
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
            "nodes_delta": f"{cpu_sizing.nodes} needed − {len(access.active)} active → {cpu_action}",
            **cpu_notes,
        },
    )

    # Hybrid inference: modules.
    modules_installed = len(active_tops)
    installed_tops = sum(active_tops, Fraction(0))
    modules_delta = array.modules_needed - modules_installed
    hybrid_load = measured.get(HYBRID_INFERENCE)
    hyb_sizing, hyb_notes, hyb_util = _measured_sizing(
        array.nodes_needed, len(hybrid.active), hybrid_load, _factor(demand, hybrid_load), cp,
        f"{fmt(array.compute_tflops)} TFLOPs/s of model compute at {fmt(module_tops)} TOPS a module, "
        f"{fmt(per_node)} modules a node")
    hyb_delta, hyb_action, hyb_binding = _recommend(hybrid, hyb_sizing)
    hybrid_view = autoscaler.get(HYBRID_INFERENCE)
    modules_kept = array.modules_needed
    modules_text = (f"{array.modules_needed} needed − {modules_installed} installed on active nodes "
                    f"= {modules_delta:+d}")
    if hyb_sizing.binding != "formula":  # measured work sets the nodes: the modules follow them
        modules_kept = max(0, round((len(hybrid.active) + hyb_delta) * per_node))
        modules_delta = modules_kept - modules_installed
        modules_text = (f"{hyb_sizing.binding} binds: {len(hybrid.active) + hyb_delta} nodes × {fmt(per_node)} "
                        f"modules per node = {modules_kept} − {modules_installed} installed = {modules_delta:+d}")
    module_word = "add" if modules_delta > 0 else "release" if modules_delta < 0 else "keep"
    compute_headroom = (1 - array.compute_tflops / installed_tops) if installed_tops > 0 else None
    hybrid_plan = TierPlan(
        tier=hybrid.kind, name=hybrid.name, active_nodes=len(hybrid.active), standby_nodes=len(hybrid.standby),
        nodes_needed=hyb_sizing.nodes, nodes_delta=hyb_delta, binding=hyb_binding,
        autoscaler=None if hybrid_view is None else _autoscaler_comparison(
            hyb_sizing, hyb_binding, len(hybrid.active) + hyb_delta, hybrid_view,
            observed=demand.source == "telemetry"),
        action=f"modules: {module_word} {abs(modules_delta)}; nodes: {hyb_action}",
        modules_delta=modules_delta,
        installed={"modules": modules_installed, "tops": float(installed_tops),
                   "compute_headroom": None if compute_headroom is None else float(compute_headroom),
                   "measured_utilisation": hyb_util},
        needed={"modules": modules_kept, "compute_tflops": float(array.compute_tflops),
                "module_tops": float(module_tops), "modules_per_node": float(per_node)},
        explanations={
            "compute_tflops": array.explanations["compute_tflops"],
            "modules_needed": array.explanations["modules_needed"]
            + ("" if params.module_tops is not None else " (TOPS per module: the installed modules' mean)"),
            "nodes_needed": array.explanations["nodes_needed"]
            + ("" if params.modules_per_node is not None else " (modules per node: the installed mean)"),
            "modules_delta": modules_text,
            "compute_headroom": (f"headroom = 1 − {fmt(array.compute_tflops)} TFLOPs/s ÷ {fmt(installed_tops)} TOPS "
                                 f"= {fmt(compute_headroom)}" if compute_headroom is not None
                                 else "no modules on active hybrid nodes"),
            "nodes_delta": f"{hyb_sizing.nodes} needed − {len(hybrid.active)} active → {hyb_action}",
            **hyb_notes,
        },
    )
    plans = [access_plan, hybrid_plan]
    external = tiers.get(EXTERNAL_LARGE_MODEL)
    if external is not None:
        plans.append(TierPlan(
            tier=external.kind, name=external.name, active_nodes=len(external.active),
            standby_nodes=len(external.standby), nodes_needed=None, nodes_delta=0,
            action="not sized by the array formulas (requests for ≥70B models go to its endpoints)", binding="none",
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
