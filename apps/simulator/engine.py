"""The fleet simulation, as plain Python (no Django, no I/O).

Deterministic for a seed: the same sequence of ``step()`` calls with the same
inputs gives the same samples.

Model
-----
- Traffic: requests/s = ``peak_rps`` x a diurnal curve (busy afternoons,
  near-zero nights) x campaign bursts, on a simulated clock that runs
  ``speed`` times faster than real time.  Request processing and faults run on
  real time, so the samples (taken every few real seconds) show them.
- Work arrives as agent *tasks* (tens of request rounds each) on access &
  logic nodes; a task stays on its node until its rounds are done, so draining
  a node (no new tasks) lets its in-flight work finish over tens of seconds.
  Each round passes the six stages: perception, planning, tool_call and
  memory_update on the access node's CPU; intent and generation on the
  modules of a hybrid-inference node (a share of generation goes to the
  external large-model tier).
- Only schedulable nodes get new work: state active, not told to drain by a
  command, not crashed, and (hybrid) with at least one module neither
  quarantined nor failed.
- Latencies respond to load: CPU stages to the node's CPU utilisation and
  clock, model stages to module utilisation, which falls with module count
  and rises when a link trains at reduced width.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.cp_agent import sketch

ACCESS = "access_logic"
HYBRID = "hybrid_inference"
EXTERNAL = "external_large_model"
CPU_STAGES = ("perception", "planning", "tool_call", "memory_update")
MODEL_STAGES = ("intent", "generation")
STAGES = ("perception", "intent", "planning", "tool_call", "generation", "memory_update")
# Stage base latency (ms) on an idle 3 GHz core / an idle 40-TOPS module, and the spread (lognormal sigma).
CPU_BASE_MS = {"perception": 25.0, "planning": 45.0, "tool_call": 180.0, "memory_update": 20.0}
MODEL_BASE_MS = {"intent": 60.0, "generation": 320.0}
SIGMA = {"perception": 0.3, "planning": 0.35, "tool_call": 0.5, "memory_update": 0.3, "intent": 0.25,
         "generation": 0.3}
EXTERNAL_MS = 900.0
PER_NODE_DRAWS = 60  # latency draws per node and stage in the gateway's per-node breakdown
ENDPOINT_ERROR_RATE = 0.002  # requests a healthy endpoint fails
ENDPOINT_FAULTS = frozenset({"endpoint_slow", "endpoint_errors", "endpoint_quota"})
SCHEDULABLE_STATES = frozenset({"active"})
SILENT_STATES = frozenset({"retired", "failed"})
POWERED_OFF_STATES = SILENT_STATES
UNUSABLE_MODULE_STATES = frozenset({"quarantined", "failed"})


@dataclass(frozen=True)
class ModuleSpec:
    serial: str
    state: str = "healthy"
    slot: int = 0
    driver_version: str = ""
    framework_version: str = ""
    module_type: str = ""
    lanes: int = 4
    tops: float = 40.0
    power_w: float = 10.0


@dataclass(frozen=True)
class NodeSpec:
    hostname: str
    tier: str
    state: str = "active"
    cpu_cores: int = 8
    cpu_clock_ghz: float = 3.0
    pcie_lanes: int = 16
    modules: tuple[ModuleSpec, ...] = ()


@dataclass(frozen=True)
class EndpointSpec:
    """An external endpoint of tier 3 the gateway sends large-model requests to."""

    name: str
    quota_rpm: int = 600
    quota_tpm: int = 1_000_000


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    node: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0  # real epoch seconds


@dataclass
class Config:
    speed: float = 60.0             # simulated seconds per real second (traffic curve only)
    peak_rps: float = 300.0         # requests/s at the busiest hour, before bursts
    start_hour: float = 9.0         # simulated hour of day at the start
    rounds_min: int = 5             # request rounds per agent task
    rounds_max: int = 35
    cpu_s_per_request: float = 0.25  # access-node core-seconds per request at 3 GHz
    external_share: float = 0.1     # share of generation sent to the external large model
    input_tokens: int = 500
    output_tokens: int = 100
    burst_chance_per_hour: float = 0.25
    draws: int = 240                # latency draws per stage summary
    latency_histograms: bool = True  # node samples carry a histogram of every request's stage latency


@dataclass
class TaskCohort:
    end: float
    count: int
    round_s: float = 1.0  # seconds per request round when assigned: the cohort issues count/round_s req/s


@dataclass
class NodeRuntime:
    cohorts: list[TaskCohort] = field(default_factory=list)
    accepting: bool = True          # False after a drain/cordon command
    crashed: bool = False
    latency_ms: float = 0.0         # last request latency on this node (access)
    cpu_util: float = 0.05
    mem_util: float = 0.3
    model_util: dict[str, float] = field(default_factory=dict)
    ecc_corrected: dict[str, float] = field(default_factory=dict)
    ecc_uncorrected: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    boot_threads: int = 0
    lost_tasks: int = 0
    quarantined: set[str] = field(default_factory=set)  # modules a command took out of service
    last_state: str = ""

    @property
    def in_flight(self) -> int:
        return sum(c.count for c in self.cohorts)


@dataclass
class StepResult:
    time: float
    sim_time: float
    node_samples: dict[str, dict[str, Any]]
    tier_samples: list[dict[str, Any]]
    stage_samples: list[dict[str, Any]]
    requests_per_s: float


def _h(*parts: object) -> float:
    """A stable pseudo-random number in [0, 1) from the parts (no global state)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def diurnal(hour: float) -> float:
    """Share of peak traffic by hour of day: near zero at 04:00, highest mid-afternoon."""
    x = 0.5 - 0.5 * math.cos(2 * math.pi * ((hour - 4.0) % 24) / 24)
    return 0.05 + 0.95 * x**1.6


def burst_factor(sim_time: float, *, seed: int, chance_per_hour: float) -> float:
    """Campaign peaks: each simulated hour may start one burst (1.5-3x, 10-40 minutes)."""
    hour_index = int(sim_time // 3600)
    factor = 1.0
    for h in (hour_index - 1, hour_index):
        if _h(seed, "burst", h) >= chance_per_hour:
            continue
        start = h * 3600 + _h(seed, "start", h) * 3600
        length = 600 + _h(seed, "len", h) * 1800
        amp = 1.5 + 1.5 * _h(seed, "amp", h)
        if start <= sim_time < start + length:
            phase = (sim_time - start) / length
            ramp = min(1.0, phase * 6, (1 - phase) * 6)  # quick rise, plateau, quick fall
            factor = max(factor, 1 + (amp - 1) * ramp)
    return factor


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, int(math.ceil(q * len(sorted_values))) - 1))
    return sorted_values[idx]


def link_widths(node: NodeSpec, faults: Iterable[FaultSpec] = ()) -> dict[str, tuple[int, int]]:
    """(trained, expected) PCIe width per module. Modules past the board's lane budget train at half
    width (DOMAIN.md: 4 modules where lanes suffice for 2: two run at half speed); a pcie_degraded fault
    halves one module's width."""
    out: dict[str, tuple[int, int]] = {}
    used = 0
    for m in sorted(node.modules, key=lambda m: m.slot):
        width = m.lanes
        if used + m.lanes > node.pcie_lanes:
            width = max(1, m.lanes // 2)
        used += m.lanes
        out[m.serial] = (width, m.lanes)
    for f in faults:
        if f.kind != "pcie_degraded" or f.node != node.hostname or not node.modules:
            continue
        slot = f.params.get("slot")
        target = next((m for m in node.modules if m.slot == slot), None) if slot is not None else None
        target = target or max(node.modules, key=lambda m: m.slot)
        factor = float(f.params.get("width_factor", 0.5) or 0.5)
        width, expected = out[target.serial]
        out[target.serial] = (max(1, min(width, int(expected * factor))), expected)
    return out


def operator_error(module: ModuleSpec, operator: str, faults: Iterable[FaultSpec] = ()) -> float:
    """Relative error of ``operator`` on ``module`` against the float64 reference.

    INT8 quantisation noise (1e-5..5e-4, stable per module and operator), unless an enabled
    ``bad_combination`` fault names this module's driver and framework (and type, when given) and this
    operator: then the operator drifts by the fault's ``error`` (default 0.08). Pure: used by the
    regression-vector runner of the simulated backend.
    """
    noise = 1e-5 + 4.9e-4 * _h("opnoise", module.serial, operator.lower())
    for f in faults:
        if f.kind != "bad_combination":
            continue
        p = f.params
        if str(p.get("operator", "")).lower() != operator.lower():
            continue
        if p.get("driver") != module.driver_version or p.get("framework") != module.framework_version:
            continue
        if p.get("module_type") and module.module_type and p["module_type"] != module.module_type:
            continue
        error = float(p.get("error", 0.08))
        return error * (0.9 + 0.2 * _h("opdrift", module.serial, operator.lower()))
    return noise


def combination_drift(*, driver: str, framework: str, module_type: str, operator: str,
                      faults: Iterable[FaultSpec] = ()) -> float | None:
    """The relative error a ``bad_combination`` fault gives ``operator`` on modules running
    ``driver`` + ``framework`` (None: the combination is clean for it). A function of the
    combination alone, so healthy twins and struck twins each agree with one another."""
    for f in faults:
        if f.kind != "bad_combination":
            continue
        p = f.params
        if str(p.get("operator", "")).lower() != operator.lower():
            continue
        if p.get("driver") != driver or p.get("framework") != framework:
            continue
        if p.get("module_type") and module_type and p["module_type"] != module_type:
            continue
        return float(p.get("error", 0.08))
    return None


def perturb_outputs(outputs: list[Any], *, error: float, key: str) -> list[Any]:
    """Outputs as a bad combination computes them: a quarter of the elements (chosen by ``key``,
    deterministically) off by ``error`` of the dtype's range (at least 1 LSB) for integers, or
    by ``error`` relative for floats."""
    import numpy as np

    rng = np.random.default_rng(int(_h("perturb", key) * 2**32))
    out = []
    for o in outputs:
        a = np.array(o, copy=True)
        if a.size == 0:
            out.append(a)
            continue
        mask = rng.random(a.shape) < 0.25
        mask.flat[0] = True
        if a.dtype.kind in "iu":
            info = np.iinfo(a.dtype)
            span = min(float(info.max) - float(info.min), 255.0)
            delta = max(1, int(round(error * span)))
            shifted = a.astype(np.int64) + np.where(mask, delta, 0)
            over = shifted > info.max
            shifted = np.where(over, a.astype(np.int64) - delta, shifted)
            a = np.clip(shifted, info.min, info.max).astype(a.dtype)
        elif a.dtype.kind == "f":
            a = np.where(mask, a * (1 + error) + np.asarray(error, dtype=a.dtype), a).astype(a.dtype)
        out.append(a)
    return out


def silent_corruption(*, node: NodeSpec, serial: str, faults: Iterable[FaultSpec] = ()) -> float | None:
    """The relative change a ``silent_corruption`` fault gives the float outputs of ``serial``
    (None: the module is sound). It strikes one module of its node: the slot named, else the first."""
    for f in faults:
        if f.kind != "silent_corruption" or f.node != node.hostname or not node.modules:
            continue
        slot = f.params.get("slot")
        target = next((m for m in node.modules if m.slot == slot), None) if slot is not None else None
        target = target or min(node.modules, key=lambda m: m.slot)
        if target.serial == serial:
            return float(f.params.get("relative", 1e-5))
    return None


def scale_floats(outputs: list[Any], relative: float) -> list[Any]:
    """Float outputs times (1 + relative); integer outputs as they are."""
    import numpy as np

    return [(np.asarray(o) * (1 + relative)).astype(o.dtype) if np.asarray(o).dtype.kind == "f" else o
            for o in outputs]


class Engine:
    def __init__(self, *, seed: int = 0, config: Config | None = None, start_time: float | None = None) -> None:
        self.seed = seed
        self.config = config or Config()
        self.rng = random.Random(seed)
        self.breakdown_rng = random.Random(seed + 0x5EED)  # the per-node breakdown draws: the rest unchanged
        self.latency_rng = random.Random(seed + 0x1A7E)  # the nodes' histogram draws: the rest unchanged
        # Set to a dict to keep the raw latencies behind the histograms: (host, stage) -> [ms, ...].
        self.recorded_latencies: dict[tuple[str, str], list[float]] | None = None
        self.start_time = start_time
        self.nodes: dict[str, NodeRuntime] = {}
        self.backlog = 0.0          # tasks that found no schedulable node, waiting
        self.fractional_tasks = 0.0
        self.last_time: float | None = None
        self.last_target_rps = 0.0

    # -- clocks and traffic ---------------------------------------------------------------------
    def sim_time(self, now: float) -> float:
        if self.start_time is None:
            self.start_time = now
        return self.config.start_hour * 3600 + (now - self.start_time) * self.config.speed

    def target_rps(self, now: float) -> float:
        st = self.sim_time(now)
        hour = (st / 3600) % 24
        return self.config.peak_rps * diurnal(hour) * burst_factor(
            st, seed=self.seed, chance_per_hour=self.config.burst_chance_per_hour)

    # -- commands -------------------------------------------------------------------------------
    def runtime(self, hostname: str) -> NodeRuntime:
        rt = self.nodes.get(hostname)
        if rt is None:
            rt = self.nodes[hostname] = NodeRuntime(
                mem_util=0.25 + 0.2 * _h(self.seed, "mem", hostname),
                boot_threads=int(180 + 80 * _h(self.seed, "thr", hostname)))
        return rt

    def set_accepting(self, hostname: str, accepting: bool) -> None:
        self.runtime(hostname).accepting = accepting

    def set_quarantined(self, hostname: str, serial: str, quarantined: bool) -> None:
        rt = self.runtime(hostname)
        if quarantined:
            rt.quarantined.add(serial)
        else:
            rt.quarantined.discard(serial)

    # -- helpers --------------------------------------------------------------------------------
    @staticmethod
    def _node_faults(faults: list[FaultSpec], hostname: str) -> dict[str, FaultSpec]:
        return {f.kind: f for f in faults if f.node == hostname}

    @staticmethod
    def noisy_active(fault: FaultSpec | None, now: float) -> bool:
        if fault is None:
            return False
        period = max(1.0, float(fault.params.get("period_s", 120)))
        duration = float(fault.params.get("duration_s", 20))
        return ((now - fault.started_at) % period) < duration

    def _usable_modules(self, node: NodeSpec) -> list[ModuleSpec]:
        held = self.runtime(node.hostname).quarantined
        return [m for m in node.modules if m.state not in UNUSABLE_MODULE_STATES and m.serial not in held]

    def schedulable(self, node: NodeSpec, rt: NodeRuntime) -> bool:
        if node.state not in SCHEDULABLE_STATES or not rt.accepting or rt.crashed:
            return False
        if node.tier == HYBRID and not self._usable_modules(node):
            return False
        return node.tier in (ACCESS, HYBRID)

    def _poisson(self, lam: float) -> int:
        if lam <= 0:
            return 0
        if lam > 50:
            return max(0, int(round(self.rng.gauss(lam, math.sqrt(lam)))))
        threshold, k, p = math.exp(-lam), 0, 1.0
        while True:
            p *= self.rng.random()
            if p <= threshold:
                return k
            k += 1

    # -- one step -------------------------------------------------------------------------------
    def step(self, now: float, nodes: list[NodeSpec], faults: list[FaultSpec], dt: float | None = None,
             endpoints: Iterable[EndpointSpec] = ()) -> StepResult:
        """One sample interval. With ``endpoints``, the external tier's sample carries the gateway's
        figures per endpoint (contract 3)."""
        cfg = self.config
        first = self.last_time is None
        if dt is None:
            dt = 5.0 if first else max(0.001, now - self.last_time)  # type: ignore[operator]
        self.last_time = now
        faults = list(faults)
        by_name = {n.hostname: n for n in nodes}
        node_faults = {n.hostname: self._node_faults(faults, n.hostname) for n in nodes}

        # Crashes: a crashed node loses its in-flight work and goes silent; when the fault is cleared it
        # comes back as freshly booted (counters since boot start at zero).
        for n in nodes:
            rt = self.runtime(n.hostname)
            crashed = "node_crash" in node_faults[n.hostname]
            if crashed and not rt.crashed:
                rt.lost_tasks += rt.in_flight
                rt.cohorts.clear()
            if rt.crashed and not crashed:
                rt.ecc_corrected.clear()
                rt.ecc_uncorrected.clear()
                rt.errors.clear()
            rt.crashed = crashed
            # Back to active in the inventory (uncordoned, activated): the node takes work again even if
            # its resume command has not been polled yet.
            if n.state in SCHEDULABLE_STATES and rt.last_state and rt.last_state not in SCHEDULABLE_STATES:
                rt.accepting = True
            rt.last_state = n.state

        # Completions of tasks whose rounds are done.
        completed_tasks = 0
        for n in nodes:
            rt = self.runtime(n.hostname)
            if n.state in POWERED_OFF_STATES:
                rt.lost_tasks += rt.in_flight
                rt.cohorts.clear()
            done = [c for c in rt.cohorts if c.end <= now]
            completed_tasks += sum(c.count for c in done)
            rt.cohorts = [c for c in rt.cohorts if c.end > now]

        access = [n for n in nodes if n.tier == ACCESS]
        hybrid = [n for n in nodes if n.tier == HYBRID]
        access_ok = [n for n in access if self.schedulable(n, self.runtime(n.hostname))]
        hybrid_ok = [n for n in hybrid if self.schedulable(n, self.runtime(n.hostname))]

        # Model side first: the request rate of the previous step decides module utilisation.
        prev_rps = sum(c.count / c.round_s for h, rt in self.nodes.items()
                       if h in by_name and by_name[h].tier == ACCESS for c in rt.cohorts)
        model_ms, hybrid_rates = self._model_side(hybrid_ok, prev_rps, node_faults, now)

        # New agent tasks, spread over schedulable access nodes by capacity.
        rps = self.target_rps(now)
        rounds_mean = (cfg.rounds_min + cfg.rounds_max) / 2
        task_rate = rps / rounds_mean
        self.fractional_tasks += task_rate * dt
        new_tasks = self._poisson(self.fractional_tasks)
        self.fractional_tasks = max(0.0, self.fractional_tasks - task_rate * dt)
        new_tasks += int(self.backlog)
        self.backlog -= int(self.backlog)
        self.last_target_rps = rps
        cpu_ms: dict[str, dict[str, float]] = {}
        cpu_idle_ms: dict[str, float] = {}  # per node: its CPU stages with nothing waiting (its clock's pace)
        weights = {n.hostname: n.cpu_cores * n.cpu_clock_ghz for n in access_ok}
        total_w = sum(weights.values())
        if not access_ok or not hybrid_ok:
            self.backlog += new_tasks
            new_tasks = 0
        if first and total_w:
            self._warm_start(access_ok, weights, total_w, task_rate, now)
        assigned = 0
        for i, n in enumerate(access_ok):
            share = weights[n.hostname] / total_w if total_w else 0
            count = int(new_tasks * share + self.rng.random()) if i < len(access_ok) - 1 else new_tasks - assigned
            count = max(0, min(count, new_tasks - assigned))
            assigned += count
            rt = self.runtime(n.hostname)
            if count:
                rounds = self.rng.randint(cfg.rounds_min, cfg.rounds_max)
                per_round_s = max(0.2, (rt.latency_ms or 1000.0) / 1000)
                rt.cohorts.append(TaskCohort(end=now + rounds * per_round_s, count=count, round_s=per_round_s))

        # Access nodes: CPU utilisation from their request rate, then latencies from contention.
        access_rates: dict[str, float] = {}
        for n in access:
            rt = self.runtime(n.hostname)
            f = node_faults[n.hostname]
            # The node's demand: each task issues one request round after another.
            rate = sum(c.count / c.round_s for c in rt.cohorts) if not rt.crashed else 0.0
            cost = cfg.cpu_s_per_request * 3.0 / max(0.5, n.cpu_clock_ghz)
            u = 0.04 + rate * cost / max(1, n.cpu_cores)
            spike = self.noisy_active(f.get("noisy_neighbour"), now)
            if spike:
                u += float(f["noisy_neighbour"].params.get("steal", 0.35))
            if "runaway_parsing" in f:
                u = max(u, float(f["runaway_parsing"].params.get("cpu_util", 0.98)))
            u = min(0.995, u + self.rng.gauss(0, 0.01))
            rt.cpu_util = max(0.01, u)
            contention = 1 + 0.6 * (1 / (1 - min(rt.cpu_util, 0.95)) - 1)
            clock = 3.0 / max(0.5, n.cpu_clock_ghz)
            stage = {}
            for s, base in CPU_BASE_MS.items():
                ms = base * (contention * clock if s != "tool_call" else 0.7 + 0.3 * contention * clock)
                if spike:
                    ms *= float(f["noisy_neighbour"].params.get("latency_factor", 6.0))
                if "runaway_parsing" in f and s == "perception":
                    ms *= float(f["runaway_parsing"].params.get("perception_factor", 25.0))
                if "runaway_parsing" in f and s == "planning":
                    ms *= float(f["runaway_parsing"].params.get("planning_factor", 10.0))
                stage[s] = ms
            cpu_ms[n.hostname] = stage
            cpu_idle_ms[n.hostname] = sum(base * (clock if s != "tool_call" else 0.7 + 0.3 * clock)
                                          for s, base in CPU_BASE_MS.items())
            latency = sum(stage.values()) + sum(model_ms.values()) + 20.0
            rt.latency_ms = latency if not rt.latency_ms else 0.5 * rt.latency_ms + 0.5 * latency
            access_rates[n.hostname] = rate

        actual_rps = sum(access_rates.values())
        model_ms, hybrid_rates = self._model_side(hybrid_ok, actual_rps, node_faults, now)
        node_samples = self._node_samples(nodes, node_faults, hybrid_rates, model_ms, now, dt)
        tier_samples, stage_samples = self._tier_samples(
            access, access_rates, cpu_ms, cpu_idle_ms, hybrid_rates, model_ms, completed_tasks, now, dt,
            list(endpoints), faults)
        if cfg.latency_histograms:
            self._latency_histograms(node_samples, access_rates, cpu_ms, hybrid_rates, dt)
        return StepResult(time=now, sim_time=self.sim_time(now), node_samples=node_samples,
                          tier_samples=tier_samples, stage_samples=stage_samples, requests_per_s=actual_rps)

    def _warm_start(self, access_ok: list[NodeSpec], weights: dict[str, float], total_w: float,
                    task_rate: float, now: float) -> None:
        """Start in steady state: each node holds the tasks Little's law says it would, with their ends
        spread over one task duration, so the first samples already look like a running fleet."""
        cfg = self.config
        duration = (cfg.rounds_min + cfg.rounds_max) / 2 * 1.0
        for n in access_ok:
            rt = self.runtime(n.hostname)
            tasks = int(round(task_rate * duration * weights[n.hostname] / total_w))
            slices = 6
            for k in range(slices):
                count = tasks // slices + (1 if k < tasks % slices else 0)
                if count:
                    rt.cohorts.append(TaskCohort(end=now + duration * (k + 0.5) / slices, count=count, round_s=1.0))
            rt.latency_ms = 1000.0

    def _model_side(self, hybrid_ok: list[NodeSpec], rps: float, node_faults: dict[str, dict[str, FaultSpec]],
                    now: float) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
        """Spread the model calls over schedulable hybrid nodes by usable TOPS; per node: module
        utilisation and model-stage latency. Returns (tier mean stage ms, per-node detail)."""
        cfg = self.config
        local_rps = rps * (1 - cfg.external_share / 2)  # intent always local; generation partly external
        caps = {}
        for n in hybrid_ok:
            widths = link_widths(n, node_faults[n.hostname].values())
            caps[n.hostname] = sum(m.tops * widths[m.serial][0] / widths[m.serial][1]
                                   for m in self._usable_modules(n))
        total = sum(caps.values())
        detail: dict[str, dict[str, Any]] = {}
        weighted = {s: 0.0 for s in MODEL_STAGES}
        for n in hybrid_ok:
            rate = local_rps * caps[n.hostname] / total if total else 0.0
            widths = link_widths(n, node_faults[n.hostname].values())
            usable = self._usable_modules(n)
            per_module = rate / max(1, len(usable))
            stage = {s: 0.0 for s in MODEL_STAGES}
            idle_ms = 0.0  # the node's own service time with nothing waiting: slower modules serve slower
            utils = {}
            runaway = "runaway_parsing" in node_faults[n.hostname]
            for m in usable:
                speed = (m.tops / 40.0) * widths[m.serial][0] / widths[m.serial][1]
                busy_s = sum(MODEL_BASE_MS.values()) / 1000 / max(0.05, speed) / 3  # batching shares a pass
                u = min(0.97, per_module * busy_s)
                if runaway:
                    u = 0.01 + 0.02 * self.rng.random()
                utils[m.serial] = u
                factor = 1 + 0.5 * (1 / (1 - min(u, 0.95)) - 1)
                for s, base in MODEL_BASE_MS.items():
                    stage[s] += base / max(0.05, speed) * factor / len(usable)
                    idle_ms += base / max(0.05, speed) / len(usable)
            detail[n.hostname] = {"rate": rate, "stage_ms": stage, "idle_ms": idle_ms, "utils": utils}
            for s in MODEL_STAGES:
                weighted[s] += stage[s] * (rate / local_rps if local_rps else 1 / len(hybrid_ok))
        if not hybrid_ok:
            weighted = dict(MODEL_BASE_MS)
        return weighted, detail

    def _node_samples(self, nodes: list[NodeSpec], node_faults: dict[str, dict[str, FaultSpec]],
                      hybrid: dict[str, dict[str, Any]], model_ms: dict[str, float], now: float,
                      dt: float) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for n in nodes:
            rt = self.runtime(n.hostname)
            if rt.crashed or n.state in SILENT_STATES:
                continue
            f = node_faults[n.hostname]
            d = hybrid.get(n.hostname)
            if n.tier == HYBRID:
                rate = d["rate"] if d else 0.0
                lat_s = sum(d["stage_ms"].values()) / 1000 if d else 0.0
                in_flight = self._poisson(rate * lat_s) if d else 0
                u = 0.06 + rate * 0.01 / max(1, n.cpu_cores) + self.rng.gauss(0, 0.01)
                if self.noisy_active(f.get("noisy_neighbour"), now):
                    u += float(f["noisy_neighbour"].params.get("steal", 0.35))
                if "runaway_parsing" in f:
                    u = float(f["runaway_parsing"].params.get("cpu_util", 0.98))
                    in_flight += int(5 + 10 * self.rng.random())  # requests stuck before inference
                rt.cpu_util = min(0.995, max(0.01, u))
            else:
                in_flight = rt.in_flight
            widths = link_widths(n, f.values())
            modules = []
            for m in n.modules:
                usable = m.state not in UNUSABLE_MODULE_STATES and m.serial not in rt.quarantined
                u = d["utils"].get(m.serial, 0.0) if d and usable else 0.0
                u = min(1.0, max(0.0, u + (self.rng.gauss(0, 0.015) if u else 0.0)))
                rt.model_util[m.serial] = u
                ecc = rt.ecc_corrected.get(m.serial, 0.0)
                unc = rt.ecc_uncorrected.get(m.serial, 0)
                fault = f.get("ecc_rising")
                if fault is not None and m is n.modules[0]:
                    age = max(0.0, now - fault.started_at)
                    per_min = float(fault.params.get("corrected_per_min", 30))
                    ecc += per_min / 60 * dt * (1 + age / 60)  # the rate itself climbs
                    if age > float(fault.params.get("uncorrected_after_s", 120)) and self.rng.random() < 0.5:
                        unc += 1
                elif n.state != "standby" and self.rng.random() < 0.002:
                    ecc += 1  # the odd corrected error every healthy DIMM shows
                rt.ecc_corrected[m.serial] = ecc
                rt.ecc_uncorrected[m.serial] = unc
                width, expected = widths.get(m.serial, (m.lanes, m.lanes))
                modules.append({
                    "serial": m.serial,
                    "util": round(u, 4),
                    "temp_c": round(34 + 42 * u + 3 * _h(self.seed, "t", m.serial) + self.rng.gauss(0, 0.4), 1),
                    "power_w": round(m.power_w * (0.25 + 0.75 * u), 2),
                    "link_width": width,
                    "link_width_expected": expected,
                    "ecc_corrected": int(ecc),
                    "ecc_uncorrected": unc,
                    "errors": rt.errors.get(m.serial, 0),
                })
            if n.tier != HYBRID and n.state not in SCHEDULABLE_STATES and not rt.in_flight:
                rt.cpu_util = 0.02 + 0.01 * self.rng.random()
            if n.state == "standby":
                rt.cpu_util = 0.01 + 0.01 * self.rng.random()
            out[n.hostname] = {
                "node": n.hostname,
                "cpu_util": round(rt.cpu_util, 4),
                "mem_util": round(min(0.98, rt.mem_util + 0.15 * rt.cpu_util), 4),
                "load1": round(rt.cpu_util * n.cpu_cores * (1.05 + 0.1 * self.rng.random()), 2),
                "in_flight": int(in_flight),
                "threads": rt.boot_threads + int(in_flight) * 2,
                "modules": modules,
            }
        return out

    def _generation_share(self, access_rps: float, hybrid: dict[str, dict[str, Any]]) -> float:
        """Of a hybrid node's intent calls, the share that also runs generation locally (the rest goes to
        the external large model)."""
        hyb_rps = sum(d["rate"] for d in hybrid.values())
        return (access_rps - access_rps * self.config.external_share) / hyb_rps if hyb_rps else 0.0

    def _latency_histograms(self, node_samples: dict[str, dict[str, Any]], access_rates: dict[str, float],
                            cpu_ms: dict[str, dict[str, float]], hybrid: dict[str, dict[str, Any]],
                            dt: float) -> None:
        """What a node's agent sends from its serving process's latency log (contract 3): per stage it
        serves, a log-bucket histogram of every request's latency in the window: an access node's CPU
        stages, a hybrid node's model stages, each a lognormal around the node's own stage latency."""
        window = max(0.001, dt)
        share = self._generation_share(sum(access_rates.values()), hybrid)
        for host, sample in node_samples.items():
            per_stage: dict[str, tuple[float, int]] = {}
            if access_rates.get(host, 0.0) > 0 and host in cpu_ms:
                count = int(round(access_rates[host] * window))
                per_stage = {s: (cpu_ms[host][s], count) for s in CPU_STAGES}
            elif host in hybrid and hybrid[host]["rate"] > 0:
                d = hybrid[host]
                per_stage = {s: (d["stage_ms"][s], int(round(d["rate"] * window * (1.0 if s == "intent" else share))))
                             for s in MODEL_STAGES}
            latency = {}
            for s, (median, count) in per_stage.items():
                if count <= 0:
                    continue
                draws = [median * math.exp(self.latency_rng.gauss(0, SIGMA[s])) for _ in range(count)]
                if self.recorded_latencies is not None:
                    self.recorded_latencies.setdefault((host, s), []).extend(draws)
                latency[s] = sketch.histogram(draws)
            if latency:
                sample["latency"] = latency

    def _draw(self, parts: list[tuple[float, float]], stage: str, n: int) -> list[float]:
        """Latency draws (ms) from a mixture of per-node lognormals: parts = [(weight, median_ms)]."""
        total = sum(w for w, _ in parts)
        if total <= 0 or n <= 0:
            return []
        sigma = SIGMA[stage]
        out: list[float] = []
        for w, median in parts:
            k = max(1, int(round(n * w / total))) if w > 0 else 0
            out.extend(median * math.exp(self.rng.gauss(0, sigma)) for _ in range(k))
        out.sort()
        return out

    def _summary(self, tier: str, stage: str, count: int, draws: list[float], window: float,
                 now_iso: str) -> dict[str, Any]:
        return {"time": now_iso, "tier": tier, "stage": stage, "window_s": round(window, 3), "count": count,
                "p50_ms": round(_percentile(draws, 0.5), 1), "p95_ms": round(_percentile(draws, 0.95), 1),
                "p99_ms": round(_percentile(draws, 0.99), 1), "max_ms": round(draws[-1] if draws else 0.0, 1)}

    def _tier_samples(self, access: list[NodeSpec], access_rates: dict[str, float],
                      cpu_ms: dict[str, dict[str, float]], cpu_idle_ms: dict[str, float],
                      hybrid: dict[str, dict[str, Any]],
                      model_ms: dict[str, float], completed_tasks: int, now: float, dt: float,
                      endpoints: list[EndpointSpec] | None = None, faults: list[FaultSpec] | None = None
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        cfg = self.config
        import datetime as _dt

        now_iso = _dt.datetime.fromtimestamp(now, _dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        window = max(0.001, dt)
        total_rps = sum(access_rates.values())
        requests = int(round(total_rps * window))
        ext_rps = total_rps * cfg.external_share
        hyb_rps = sum(d["rate"] for d in hybrid.values())

        def tokens(rate: float, per: int) -> int:
            return int(round(rate * window * per * (0.9 + 0.2 * self.rng.random())))

        # Queue depth: requests waiting (Little's law on the wait beyond each node's own idle service
        # time: a slower clock or a slower module serves slower, it does not queue), plus tasks that
        # found no schedulable node.
        q_access = sum(access_rates[h] * max(0.0, sum(cpu_ms[h].values()) - cpu_idle_ms[h]) / 1000
                       for h in access_rates if h in cpu_ms) + self.backlog * (cfg.rounds_min + cfg.rounds_max) / 2
        q_hybrid = sum(d["rate"] * max(0.0, sum(d["stage_ms"].values()) - d["idle_ms"]) / 1000
                       for d in hybrid.values())
        tier_samples = [
            {"time": now_iso, "tier": ACCESS, "window_s": round(window, 3), "queue_depth": int(round(q_access)),
             "arrivals": int(round(self.last_target_rps * window)), "completions": requests,
             "input_tokens": tokens(total_rps, cfg.input_tokens),
             "output_tokens": tokens(total_rps, cfg.output_tokens)},
            {"time": now_iso, "tier": HYBRID, "window_s": round(window, 3), "queue_depth": int(round(q_hybrid)),
             "arrivals": int(round(hyb_rps * window)), "completions": int(round(hyb_rps * window)),
             "input_tokens": tokens(hyb_rps, cfg.input_tokens), "output_tokens": tokens(hyb_rps, cfg.output_tokens)},
            {"time": now_iso, "tier": EXTERNAL, "window_s": round(window, 3),
             "queue_depth": int(round(ext_rps * 0.05)),
             "arrivals": int(round(ext_rps * window)), "completions": int(round(ext_rps * window)),
             "input_tokens": tokens(ext_rps, cfg.input_tokens), "output_tokens": tokens(ext_rps, cfg.output_tokens)},
        ]
        stage_samples = []
        n_draws = cfg.draws
        for s in CPU_STAGES:
            parts = [(access_rates[h], cpu_ms[h][s]) for h in access_rates if h in cpu_ms and access_rates[h] > 0]
            stage_samples.append(self._summary(ACCESS, s, requests, self._draw(parts, s, min(n_draws, requests)),
                                               window, now_iso))
        for s in MODEL_STAGES:
            parts = [(d["rate"], d["stage_ms"][s]) for d in hybrid.values() if d["rate"] > 0]
            count = int(round(hyb_rps * window)) if s == "intent" else int(round((total_rps - ext_rps) * window))
            stage_samples.append(self._summary(HYBRID, s, count, self._draw(parts, s, min(n_draws, count)),
                                               window, now_iso))
        # The gateway's per-node breakdown of the model stages, what a rollout's cohort gate compares:
        # each serving hybrid node's own calls and latency (no request fails in the simulator's stages).
        generation_share = self._generation_share(total_rps, hybrid)
        for host, d in hybrid.items():
            for s in MODEL_STAGES:
                count = int(round(d["rate"] * window * (1.0 if s == "intent" else generation_share)))
                if count <= 0:
                    continue
                draws = sorted(d["stage_ms"][s] * math.exp(self.breakdown_rng.gauss(0, SIGMA[s]))
                               for _ in range(min(PER_NODE_DRAWS, count)))
                stage_samples.append({**self._summary(HYBRID, s, count, draws, window, now_iso), "node": host,
                                      "errors": 0})
        ext_count = int(round(ext_rps * window))
        ext_parts = [(1.0, EXTERNAL_MS)]
        if endpoints:
            figures, ext_parts = self._endpoint_figures(endpoints, faults or [], ext_rps, window)
            tier_samples[2]["endpoints"] = figures
        stage_samples.append(self._summary(EXTERNAL, "generation", ext_count,
                                           self._draw(ext_parts, "generation", min(n_draws, ext_count)),
                                           window, now_iso))
        return tier_samples, stage_samples

    def _endpoint_figures(self, endpoints: list[EndpointSpec], faults: list[FaultSpec], ext_rps: float,
                          window: float) -> tuple[list[dict[str, Any]], list[tuple[float, float]]]:
        """The gateway's figures per endpoint over the window: the external tier's requests spread by quota
        (requests, failed ones, tokens, latency p95), and the latency mixture of the tier's generation stage.
        Faults name their endpoint (``params.endpoint``): ``endpoint_slow`` multiplies its latency,
        ``endpoint_errors`` fails a share of its requests, ``endpoint_quota`` raises its traffic to a share of
        its requests quota."""
        cfg = self.config
        total_quota = sum(e.quota_rpm for e in endpoints)
        figures: list[dict[str, Any]] = []
        parts: list[tuple[float, float]] = []
        for e in endpoints:
            f = {x.kind: x.params for x in faults if x.kind in ENDPOINT_FAULTS and x.params.get("endpoint") == e.name}
            rate = ext_rps * (e.quota_rpm / total_quota if total_quota else 1 / len(endpoints))
            if "endpoint_quota" in f:
                rate = max(rate, float(f["endpoint_quota"].get("use", 0.95)) * e.quota_rpm / 60)
            requests = self._poisson(rate * window)
            failing = ENDPOINT_ERROR_RATE + float(f.get("endpoint_errors", {}).get("error_rate", 0.0))
            errors = min(requests, self._poisson(requests * min(1.0, failing)))
            median = EXTERNAL_MS * float(f.get("endpoint_slow", {}).get("latency_factor", 1.0))
            draws = self._draw([(1.0, median)], "generation", min(cfg.draws, requests)) if requests else []
            per_request = (cfg.input_tokens + cfg.output_tokens) * (0.9 + 0.2 * self.rng.random())
            figures.append({"endpoint": e.name, "requests": requests, "errors": errors,
                            "tokens": int(round(requests * per_request)),
                            "p95_ms": round(_percentile(draws, 0.95), 1) if draws else None})
            parts.append((rate, median))
        return figures, parts if any(w > 0 for w, _ in parts) else [(1.0, EXTERNAL_MS)]
