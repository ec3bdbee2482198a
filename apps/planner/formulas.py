"""The field's sizing formulas (docs/domain.md, "Capacity planning"), as pure functions.

No Django here (but for the one rule every page prints figures by, ``number_text``): frozen
dataclasses in, frozen dataclasses out, units in the names.

Arithmetic is exact: every input is turned into a ``Fraction`` from its decimal
spelling (``1.7`` is 17/10, not the nearest binary float), so a ceiling such as
``modules = ceil(300 TFLOPs / 30 TOPS)`` is 10, never 11 because of
10.000000000000002. Results are turned back into ``float``/``int`` at the end.

Every result carries ``explanations``: for each output, its formula with the
numbers filled in, so an operator can check the arithmetic by hand.

Decisions docs/domain.md leaves open (also in docs/planner.md):
- model compute (TFLOPs per second) is compared with the modules' INT8 TOPS
  one for one, as the field's rule of thumb does;
- CPU cores for agents are rounded up to whole cores;
- agent counts between the reference rows (4, 11-19, 51-99) get the next row up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction

from apps.common.templatetags.numbers import number_text

Number = int | float | Decimal | Fraction

GFLOPS_PER_TFLOP = 1000
# Rule of thumb: an 8-GPU server ~ an array of 10 high-clock CPU nodes and 20 modules,
# which serves agent traffic below ~1,000 concurrent users.
RULE_OF_THUMB_CPU_NODES = 10
RULE_OF_THUMB_MODULES = 20
RULE_OF_THUMB_USERS_PER_GPU_SERVER = 1000


def exact(value: Number) -> Fraction:
    """The exact rational a number spells: floats by their shortest decimal repr."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Decimal):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a finite number")
        return Fraction(repr(value))
    raise TypeError(f"{value!r} is not a number")


def ceil_exact(value: Fraction) -> int:
    return math.ceil(value)


def fmt(value: Number) -> str:
    """A number as every page prints it (``number_text``: 250,000 · 1,216 · 37.5 · 0.938), the very
    large and very small in scientific notation as the planner page's script prints them (2.5e8)."""
    q = exact(value)
    if q.denominator == 1 and abs(q) < 10**7:
        return f"{int(q):,}"
    v = float(q)
    if v != 0 and (abs(v) >= 1e7 or abs(v) < 1e-3):
        mantissa, exponent = f"{v:.4e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    return number_text(v)


def fmt_ceil(value: Number) -> str:
    """The figure inside a ceiling: as ``fmt``, but a fraction never reads as a whole number, so the
    step shows why it rounds up (ceil(10.004) = 11, not ceil(10) = 11)."""
    q = exact(value)
    text = fmt(q)
    if q.denominator == 1 or "." in text or "e" in text:
        return text
    for places in range(1, 10):
        shown = f"{float(q):,.{places}f}".rstrip("0").rstrip(".")
        if "." in shown:
            return shown
    return text


def _num(q: Fraction) -> float:
    return float(q)


# ---------------------------------------------------------------------------
# Array sizing, from traffic


@dataclass(frozen=True)
class ArrayInputs:
    concurrent_users: Number
    request_interval_s: Number
    input_tokens: Number
    output_tokens: Number
    gflops_per_token: Number = 6
    module_tops: Number = 30
    modules_per_node: int = 2
    instructions_per_request: Number = 500_000
    cpu_count: int = 1
    cores_per_cpu: int = 8
    core_ips: Number = 1_000_000_000
    usable_fraction: Number = Fraction(1, 4)


@dataclass(frozen=True)
class ArrayPlan:
    requests_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    compute_tflops: float
    modules_needed: int
    nodes_needed: int
    cpu_instructions_per_s: float
    cpu_capacity_per_s: float
    cpu_headroom: float
    explanations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _ArrayExact:
    requests_per_s: Fraction
    input_tokens_per_s: Fraction
    output_tokens_per_s: Fraction
    compute_tflops: Fraction
    modules_needed: int
    nodes_needed: int
    cpu_instructions_per_s: Fraction
    cpu_capacity_per_s: Fraction
    cpu_headroom: Fraction
    explanations: dict[str, str]


def array_from_rate(
    *,
    requests_per_s: Fraction,
    rate_explanation: str,
    input_tokens: Fraction,
    output_tokens: Fraction,
    gflops_per_token: Fraction,
    module_tops: Fraction,
    modules_per_node: Fraction,
    instructions_per_request: Fraction,
    cpu_capacity_per_s: Fraction,
    capacity_explanation: str,
) -> _ArrayExact:
    rps = requests_per_s
    in_tps = rps * input_tokens
    out_tps = rps * output_tokens
    tflops = out_tps * gflops_per_token / GFLOPS_PER_TFLOP
    modules = ceil_exact(tflops / module_tops)
    nodes = ceil_exact(Fraction(modules) / modules_per_node)
    load = rps * instructions_per_request
    headroom = 1 - load / cpu_capacity_per_s
    r = fmt(rps)
    explanations = {
        "requests_per_s": rate_explanation,
        "input_tokens_per_s": f"input tokens/s = {r} req/s × {fmt(input_tokens)} input tokens = {fmt(in_tps)}",
        "output_tokens_per_s": f"output tokens/s = {r} req/s × {fmt(output_tokens)} output tokens = {fmt(out_tps)}",
        "compute_tflops": (
            f"model compute = {fmt(out_tps)} output tok/s × {fmt(gflops_per_token)} GFLOPs per token "
            f"= {fmt(out_tps * gflops_per_token)} GFLOPs/s = {fmt(tflops)} TFLOPs/s"
        ),
        "modules_needed": (
            f"modules = ceil({fmt(tflops)} TFLOPs/s ÷ {fmt(module_tops)} TOPS per module) "
            f"= ceil({fmt_ceil(tflops / module_tops)}) = {modules}"
        ),
        "nodes_needed": (
            f"nodes = ceil({modules} modules ÷ {fmt(modules_per_node)} modules per node) "
            f"= ceil({fmt_ceil(Fraction(modules) / modules_per_node)}) = {nodes}"
        ),
        "cpu_instructions_per_s": (
            f"CPU load = {r} req/s × {fmt(instructions_per_request)} instructions per request = {fmt(load)}/s"
        ),
        "cpu_capacity_per_s": capacity_explanation,
        "cpu_headroom": (
            f"CPU headroom = 1 − {fmt(load)} ÷ {fmt(cpu_capacity_per_s)} = {fmt(headroom)}"
            + (" (overloaded)" if headroom < 0 else "")
        ),
    }
    return _ArrayExact(
        requests_per_s=rps, input_tokens_per_s=in_tps, output_tokens_per_s=out_tps, compute_tflops=tflops,
        modules_needed=modules, nodes_needed=nodes, cpu_instructions_per_s=load,
        cpu_capacity_per_s=cpu_capacity_per_s, cpu_headroom=headroom, explanations=explanations,
    )


def size_array(inputs: ArrayInputs) -> ArrayPlan:
    """Modules, nodes and CPU headroom for concurrent users sending requests."""
    users = exact(inputs.concurrent_users)
    interval_s = exact(inputs.request_interval_s)
    rps = users / interval_s
    cpus, cores, ips, usable = (exact(inputs.cpu_count), exact(inputs.cores_per_cpu), exact(inputs.core_ips),
                                exact(inputs.usable_fraction))
    capacity = cpus * cores * ips * usable
    result = array_from_rate(
        requests_per_s=rps,
        rate_explanation=f"requests/s = {fmt(users)} users ÷ {fmt(interval_s)} s between requests = {fmt(rps)}",
        input_tokens=exact(inputs.input_tokens),
        output_tokens=exact(inputs.output_tokens),
        gflops_per_token=exact(inputs.gflops_per_token),
        module_tops=exact(inputs.module_tops),
        modules_per_node=exact(inputs.modules_per_node),
        instructions_per_request=exact(inputs.instructions_per_request),
        cpu_capacity_per_s=capacity,
        capacity_explanation=(
            f"CPU capacity = {fmt(cpus)} CPU × {fmt(cores)} cores × {fmt(ips)} instructions/s per core "
            f"× {fmt(usable)} usable = {fmt(capacity)}/s"
        ),
    )
    return _to_plan(result)


def _to_plan(r: _ArrayExact) -> ArrayPlan:
    return ArrayPlan(
        requests_per_s=_num(r.requests_per_s),
        input_tokens_per_s=_num(r.input_tokens_per_s),
        output_tokens_per_s=_num(r.output_tokens_per_s),
        compute_tflops=_num(r.compute_tflops),
        modules_needed=r.modules_needed,
        nodes_needed=r.nodes_needed,
        cpu_instructions_per_s=_num(r.cpu_instructions_per_s),
        cpu_capacity_per_s=_num(r.cpu_capacity_per_s),
        cpu_headroom=_num(r.cpu_headroom),
        explanations=r.explanations,
    )


def sweep_users(inputs: ArrayInputs, *, points: int = 41) -> list[tuple[int, int, float]]:
    """(concurrent users, modules needed, CPU headroom) from 0 to twice the given users."""
    top = max(2 * exact(inputs.concurrent_users), Fraction(points - 1))
    out = []
    for i in range(points):
        users = ceil_exact(top * i / (points - 1))
        plan = size_array(replace(inputs, concurrent_users=users))
        out.append((users, plan.modules_needed, plan.cpu_headroom))
    return out


# ---------------------------------------------------------------------------
# Agent sizing, from agents


@dataclass(frozen=True)
class ReferenceConfiguration:
    agents_from: int
    agents_to: int | None  # None: and up
    cpu: str
    accelerators: str
    memory: str

    @property
    def agents(self) -> str:
        return f"{self.agents_from}+" if self.agents_to is None else f"{self.agents_from}–{self.agents_to}"

    @property
    def summary(self) -> str:
        return ", ".join(p for p in (self.cpu, self.accelerators, self.memory) if p)


REFERENCE_CONFIGURATIONS: tuple[ReferenceConfiguration, ...] = (
    ReferenceConfiguration(1, 3, "8 high-clock cores", "one mid-range card", "32 GB"),
    ReferenceConfiguration(5, 10, "16 cores", "one high-end card", "64 GB"),
    ReferenceConfiguration(20, 50, "dual 16-core", "several cards", "128 GB+"),
    ReferenceConfiguration(100, None, "a scheduled heterogeneous cluster", "", ""),
)


@dataclass(frozen=True)
class ReferenceMatch:
    row: ReferenceConfiguration
    exact: bool  # False: the agents fall between two rows and got the next row up
    explanation: str


def reference_configuration(agents: int) -> ReferenceMatch:
    """The reference row for a scale; counts between rows get the next row up."""
    if agents < 1:
        raise ValueError("agents must be at least 1")
    for row in REFERENCE_CONFIGURATIONS:
        if row.agents_to is None or agents <= row.agents_to:
            inside = agents >= row.agents_from
            why = (f"{agents} agents fall in the {row.agents} row" if inside else
                   f"{agents} agents fall between rows; sized up to the {row.agents} row")
            return ReferenceMatch(row=row, exact=inside, explanation=f"{why}: {row.summary}")
    raise AssertionError("unreachable: the last row is open-ended")


@dataclass(frozen=True)
class AgentInputs:
    agents: int
    inferences_per_s_per_agent: Number
    tokens_per_inference: Number
    tokens_per_s_per_accelerator: Number
    cores_per_agent: Number = 1
    safety_factor: Number = Fraction(3, 2)
    batching_gain: Number = 1


@dataclass(frozen=True)
class AgentPlan:
    cpu_cores_needed: int
    inference_tokens_per_s: float
    accelerators_needed: int
    accelerators_needed_batched: int
    reference: ReferenceMatch
    explanations: Mapping[str, str] = field(default_factory=dict)


def size_agents(inputs: AgentInputs) -> AgentPlan:
    """CPU cores and accelerator cards for concurrent agents."""
    agents = exact(inputs.agents)
    cores_per_agent, safety = exact(inputs.cores_per_agent), exact(inputs.safety_factor)
    ips, tpi = exact(inputs.inferences_per_s_per_agent), exact(inputs.tokens_per_inference)
    per_card, gain = exact(inputs.tokens_per_s_per_accelerator), exact(inputs.batching_gain)
    cores_exact = agents * cores_per_agent * safety
    cores = ceil_exact(cores_exact)
    tps = agents * ips * tpi
    cards = ceil_exact(tps / per_card)
    cards_batched = ceil_exact(tps / (per_card * gain))
    ref = reference_configuration(int(agents))
    explanations = {
        "cpu_cores_needed": (
            f"CPU cores = ceil({fmt(agents)} agents × {fmt(cores_per_agent)} cores per agent × "
            f"{fmt(safety)} safety factor) = ceil({fmt_ceil(cores_exact)}) = {cores}"
        ),
        "inference_tokens_per_s": (
            f"inference tokens/s = {fmt(agents)} agents × {fmt(ips)} inferences/s × "
            f"{fmt(tpi)} tokens per inference = {fmt(tps)}"
        ),
        "accelerators_needed": (
            f"accelerators = ceil({fmt(tps)} tok/s ÷ {fmt(per_card)} tok/s per accelerator) "
            f"= ceil({fmt_ceil(tps / per_card)}) = {cards}"
        ),
        "accelerators_needed_batched": (
            f"with batching = ceil({fmt(tps)} tok/s ÷ ({fmt(per_card)} tok/s × {fmt(gain)} batching gain)) "
            f"= ceil({fmt_ceil(tps / (per_card * gain))}) = {cards_batched}"
        ),
        "reference_configuration": ref.explanation,
    }
    return AgentPlan(
        cpu_cores_needed=cores, inference_tokens_per_s=_num(tps), accelerators_needed=cards,
        accelerators_needed_batched=cards_batched, reference=ref, explanations=explanations,
    )


# ---------------------------------------------------------------------------
# Cost comparison (rule of thumb)


@dataclass(frozen=True)
class CostInputs:
    gpu_server_price: Number
    cpu_node_price: Number
    module_price: Number
    cpu_nodes: int
    modules: int
    concurrent_users: Number


@dataclass(frozen=True)
class CostComparison:
    rule_of_thumb_array_cost: float
    rule_of_thumb_ratio: float  # array cost ÷ one 8-GPU server
    plan_array_cost: float
    gpu_servers_equivalent: int
    gpu_cost: float
    plan_saving: float  # GPU cost − plan cost; negative: the array costs more
    explanations: Mapping[str, str] = field(default_factory=dict)


def compare_cost(inputs: CostInputs) -> CostComparison:
    """One 8-GPU server against an array of CPU nodes and modules, at the given prices."""
    gpu, node, module = exact(inputs.gpu_server_price), exact(inputs.cpu_node_price), exact(inputs.module_price)
    users = exact(inputs.concurrent_users)
    ref_cost = RULE_OF_THUMB_CPU_NODES * node + RULE_OF_THUMB_MODULES * module
    ratio = ref_cost / gpu
    plan_cost = inputs.cpu_nodes * node + inputs.modules * module
    servers = max(1, ceil_exact(users / RULE_OF_THUMB_USERS_PER_GPU_SERVER))
    gpu_cost = servers * gpu
    saving = gpu_cost - plan_cost
    explanations = {
        "rule_of_thumb_array_cost": (
            f"{RULE_OF_THUMB_CPU_NODES} CPU nodes × {fmt(node)} + {RULE_OF_THUMB_MODULES} modules × {fmt(module)} "
            f"= {fmt(ref_cost)}"
        ),
        "rule_of_thumb_ratio": (
            f"array ÷ one 8-GPU server = {fmt(ref_cost)} ÷ {fmt(gpu)} = {fmt(ratio)} (the rule of thumb says ≈ 1)"
        ),
        "plan_array_cost": (
            f"{inputs.cpu_nodes} CPU nodes × {fmt(node)} + {inputs.modules} modules × {fmt(module)} = {fmt(plan_cost)}"
        ),
        "gpu_servers_equivalent": (
            f"8-GPU servers = max(1, ceil({fmt(users)} users ÷ {RULE_OF_THUMB_USERS_PER_GPU_SERVER} users per "
            f"server)) = {servers}"
        ),
        "gpu_cost": f"{servers} 8-GPU servers × {fmt(gpu)} = {fmt(gpu_cost)}",
        "plan_saving": f"{fmt(gpu_cost)} − {fmt(plan_cost)} = {fmt(saving)}",
    }
    return CostComparison(
        rule_of_thumb_array_cost=_num(ref_cost), rule_of_thumb_ratio=_num(ratio), plan_array_cost=_num(plan_cost),
        gpu_servers_equivalent=servers, gpu_cost=_num(gpu_cost), plan_saving=_num(saving), explanations=explanations,
    )
