"""The fleet simulation's traffic engine, as plain Python (no I/O). What the gateway reports of it
is in ``gateway.py``, the model of faulty vector outputs in ``vector_faults.py``, its inputs in
``specs.py``.

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

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apps.inventory.choices import ModuleState, NodeState
from apps.simulator.gateway import GatewayReports, poisson
from apps.simulator.specs import (
    ACCESS,
    HYBRID,
    MODEL_STAGES,
    Config,
    EndpointSpec,
    FaultSpec,
    ModuleSpec,
    NodeSpec,
    stable_random,
)

# Stage base latency (ms) on an idle 3 GHz core / an idle 40-TOPS module.
CPU_BASE_MS = {"perception": 25.0, "planning": 45.0, "tool_call": 180.0, "memory_update": 20.0}
MODEL_BASE_MS = {"intent": 60.0, "generation": 320.0}
SCHEDULABLE_STATES = frozenset({NodeState.ACTIVE})
SILENT_STATES = frozenset({NodeState.RETIRED, NodeState.FAILED})
POWERED_OFF_STATES = SILENT_STATES
UNUSABLE_MODULE_STATES = frozenset({ModuleState.QUARANTINED, ModuleState.FAILED})


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


def diurnal(hour: float) -> float:
    """Share of peak traffic by hour of day: near zero at 04:00, highest mid-afternoon."""
    x = 0.5 - 0.5 * math.cos(2 * math.pi * ((hour - 4.0) % 24) / 24)
    return 0.05 + 0.95 * x**1.6


def burst_factor(sim_time: float, *, seed: int, chance_per_hour: float) -> float:
    """Campaign peaks: each simulated hour may start one burst (1.5-3x, 10-40 minutes)."""
    hour_index = int(sim_time // 3600)
    factor = 1.0
    for h in (hour_index - 1, hour_index):
        if stable_random(seed, "burst", h) >= chance_per_hour:
            continue
        start = h * 3600 + stable_random(seed, "start", h) * 3600
        length = 600 + stable_random(seed, "len", h) * 1800
        amp = 1.5 + 1.5 * stable_random(seed, "amp", h)
        if start <= sim_time < start + length:
            phase = (sim_time - start) / length
            ramp = min(1.0, phase * 6, (1 - phase) * 6)  # quick rise, plateau, quick fall
            factor = max(factor, 1 + (amp - 1) * ramp)
    return factor


def link_widths(node: NodeSpec, faults: Iterable[FaultSpec] = ()) -> dict[str, tuple[int, int]]:
    """(trained, expected) PCIe width per module. Modules past the board's lane budget train at half
    width (docs/domain.md: 4 modules where lanes suffice for 2: two run at half speed); a pcie_degraded fault
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


class Engine(GatewayReports):
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
                mem_util=0.25 + 0.2 * stable_random(self.seed, "mem", hostname),
                boot_threads=int(180 + 80 * stable_random(self.seed, "thr", hostname)))
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
        return poisson(self.rng, lam)

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
        # Systematic rounding: one random offset over the running total, so every node gets the floor or
        # the ceiling of its share and the counts add up (a remainder left to the last node made it the
        # one node whose load jumped about, read as a noisy neighbour).
        offset, cumulative, assigned = self.rng.random(), 0.0, 0
        for i, n in enumerate(access_ok):
            cumulative += new_tasks * (weights[n.hostname] / total_w if total_w else 0)
            upto = new_tasks if i == len(access_ok) - 1 else min(new_tasks, int(cumulative + offset))
            count = max(0, upto - assigned)
            assigned += count
            rt = self.runtime(n.hostname)
            per_round_s = max(0.2, (rt.latency_ms or 1000.0) / 1000)
            for _ in range(count):  # each task its own number of rounds: a step's tasks do not all end at once
                rounds = self.rng.randint(cfg.rounds_min, cfg.rounds_max)
                rt.cohorts.append(TaskCohort(end=now + rounds * per_round_s, count=1, round_s=per_round_s))

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
                elif n.state != NodeState.STANDBY and self.rng.random() < 0.002:
                    ecc += 1  # the odd corrected error every healthy DIMM shows
                rt.ecc_corrected[m.serial] = ecc
                rt.ecc_uncorrected[m.serial] = unc
                width, expected = widths.get(m.serial, (m.lanes, m.lanes))
                modules.append({
                    "serial": m.serial,
                    "util": round(u, 4),
                    "temp_c": round(34 + 42 * u + 3 * stable_random(self.seed, "t", m.serial)
                                    + self.rng.gauss(0, 0.4), 1),
                    "power_w": round(m.power_w * (0.25 + 0.75 * u), 2),
                    "link_width": width,
                    "link_width_expected": expected,
                    "ecc_corrected": int(ecc),
                    "ecc_uncorrected": unc,
                    "errors": rt.errors.get(m.serial, 0),
                })
            if n.tier != HYBRID and n.state not in SCHEDULABLE_STATES and not rt.in_flight:
                rt.cpu_util = 0.02 + 0.01 * self.rng.random()
            if n.state == NodeState.STANDBY:
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
