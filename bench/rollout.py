"""Driver rollout benchmark: a 200-node simulated fleet, a bad rollout and a clean one, on the
real processes. One script past 500 lines on purpose: a bench is read top to bottom as one
measurement (its setup, its processes, its two runs and its report), like a test.

    CONTROLPLANE_VAR_DIR=./var .venv/bin/python bench/rollout.py [--racks 10] [--speed 20]

Starts the engines if DATABASE_URL/REDIS_URL are unset and makes a throwaway database
(bench_rollout): the demo fleet on ``--racks`` racks of 20 nodes (200 nodes: 60 access & logic,
140 hybrid inference, about two thirds of them with Axon AX-40 modules), the tiers' limits
scaled with it, the AX-40 combination 2.4.0 + 1.19.0 validated, and the INT8 QLinearMatMul and
MatMulInteger vectors as the rollout's suite. Then the processes: uvicorn with a telemetry
writer, a Celery worker on every queue, the beat (the rollout controller, the vector sweep and
the drain controller every second, the per-minute rollups), and the fleet simulator playing
every node over HTTP at ``--speed`` simulated seconds per second (its traffic scaled to the
fleet: ``--peak-rps``).

(c) first, a bad rollout: the simulator's ``bad_combination`` fault switched on for the target
    after it was validated (it goes bad in the field). Figure: the nodes the rollout touched
    (cordoned) before it stopped. Goal: the canary only, and the rollout ``rolled_back``.

(b) then, with the fault off and the simulator restarted (its clock at ``--start-hour``), a
    clean rollout of the AX-40 module type through ``POST /api/v1/rollouts/``. Figures:

    * wall time from the request to ``completed``, and the simulated time it spans
      (goal: at least one simulated hour; ``--speed`` sets it);
    * the lowest serving capacity per tier as a fraction of what its traffic needed, from the
      recorded state transitions: the tier's active nodes replayed from the audit trail after
      every node state change during the rollout, against the need the capacity guard
      recorded with the last removal (goal >= 1.0 throughout); and, for information, the same
      per simulator step from the simulator's model (serving nodes against the nodes that keep
      the measured utilisation at the capacity function's target), beside the baseline's;
    * requests that missed their tier's latency SLO, against the baseline (goal <= 1.01 x the
      baseline's misses, per tier).

(a) the baseline: the same simulated period without a rollout. The simulator process records
    every engine step it took (the real time of the step, the simulated time, and per tier
    the requests and the SLO misses); afterwards the same engine (same seed, same
    configuration) is run again in this process over the same step times with the fleet as
    it was when the simulator started (no node taken out). Node-level noise (latency draws,
    utilisation jitter) comes from a second random stream, so both runs see the same traffic
    draw for draw: what differs is what the rollout did.

Where the SLO misses come from: the gateway's telemetry carries per tier and stage only
percentiles of a window (p50/p95/p99/max), which cannot be summed into a count of requests.
So they are counted from the simulator's own model, which the telemetry is drawn from: in
every step each node serves ``rate x dt`` requests whose stage latencies are lognormal around
the node's stage medians (apps/simulator/engine.py), and a request misses its tier's SLO when
one of its stages on that tier is above the stage's target (the ``stage_latency`` health
check's ``p95_ms`` targets, used per request). The expected count is summed exactly (the
lognormal tail), not sampled.

Prints the baseline, the figures and the goals; exits 1 on a miss. Drops the database at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

from apps.simulator.engine import Engine, StepResult  # noqa: E402
from apps.simulator.gateway import EXTERNAL_MS  # noqa: E402
from apps.simulator.specs import (  # noqa: E402
    ACCESS,
    CPU_STAGES,
    EXTERNAL,
    HYBRID,
    MODEL_STAGES,
    SIGMA,
    Config,
    EndpointSpec,
    FaultSpec,
    ModuleSpec,
    NodeSpec,
)
from bench.common import at_least, at_most, bench_database  # noqa: E402

BENCH_DB = "bench_rollout"
TIERS = (ACCESS, HYBRID, EXTERNAL)
GOAL_MISS_RATIO = 1.01
GOAL_CAPACITY = 1.0
GOAL_SIM_SPAN_S = 3600.0
TARGET = ("AX-40", "2.4.0")  # module type model, driver version
TASKS: dict[str, float] = {
    "apps.rollouts.tasks.rollouts_advance": 1, "apps.vectors.tasks.vector_runs_advance": 1,
    "apps.operations.tasks.drains_advance": 1, "apps.telemetry.tasks.telemetry_rollup": 60}


# ---- the simulator's model, metered -------------------------------------------------------------


def _tail(median_ms: float, sigma: float, target_ms: float) -> float:
    """P(latency > target) for a lognormal around ``median_ms`` with ``sigma``."""
    if median_ms <= 0:
        return 0.0
    return 0.5 * math.erfc(math.log(target_ms / median_ms) / (sigma * math.sqrt(2)))


class MeteredEngine(Engine):
    """The simulator's engine, counting each step's requests and the expected number of them that
    missed their tier's latency SLO, and each tier's serving nodes against the nodes its measured
    utilisation needs. Traffic draws (new tasks, rounds, CPU jitter) come from one random stream and
    node-level noise (latency draws, module jitter) from another, so two runs over the same step
    times see the same traffic whatever the nodes do; anything else (the runner's retry backoff)
    draws from a third."""

    def __init__(self, *, seed: int, config: Config, targets: dict[str, float], target_util: float,
                 record: Path | None = None) -> None:
        super().__init__(seed=seed, config=config)
        import random

        self.traffic_rng = random.Random(seed)
        self.noise_rng = random.Random(seed + 7919)
        self.rng = random.Random(seed + 104729)
        self.targets = targets
        self.target_util = target_util
        self.steps: list[dict[str, Any]] = []
        self.record = open(record, "a") if record is not None else None  # noqa: SIM115 - the run holds it

    def _target(self, tier: str, stage: str) -> float:
        return float(self.targets.get(f"{tier}.{stage}", self.targets.get(stage, math.inf)))

    def step(self, now: float, nodes: list[NodeSpec], faults: list[FaultSpec], dt: float | None = None,
             endpoints: Iterable[EndpointSpec] = ()) -> StepResult:
        if self.last_time is None and self.record is not None:
            self._write({"world": [dataclasses.asdict(n) for n in nodes], "seed": self.seed,
                         "config": dataclasses.asdict(self.config)})
        other, self.rng = self.rng, self.traffic_rng
        try:
            return super().step(now, nodes, faults, dt, endpoints)
        finally:
            self.rng = other

    def _node_samples(self, *args: Any, **kwargs: Any) -> Any:
        traffic, self.rng = self.rng, self.noise_rng
        try:
            return super()._node_samples(*args, **kwargs)
        finally:
            self.rng = traffic

    def _tier_samples(self, access: list[NodeSpec], access_rates: dict[str, float],
                      cpu_ms: dict[str, dict[str, float]], cpu_idle_ms: dict[str, float],
                      hybrid: dict[str, dict[str, Any]],
                      model_ms: dict[str, float], completed_tasks: int, now: float, dt: float,
                      endpoints: list[EndpointSpec] | None = None, faults: list[FaultSpec] | None = None
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        window = max(0.001, dt)
        tiers = {t: [0.0, 0.0] for t in TIERS}
        for h, rate in access_rates.items():
            if rate <= 0 or h not in cpu_ms:
                continue
            ok = math.prod(1 - _tail(cpu_ms[h][s], SIGMA[s], self._target(ACCESS, s)) for s in CPU_STAGES)
            tiers[ACCESS][0] += rate * window
            tiers[ACCESS][1] += rate * window * (1 - ok)
        for d in hybrid.values():
            if d["rate"] <= 0:
                continue
            ok = math.prod(1 - _tail(d["stage_ms"][s], SIGMA[s], self._target(HYBRID, s)) for s in MODEL_STAGES)
            tiers[HYBRID][0] += d["rate"] * window
            tiers[HYBRID][1] += d["rate"] * window * (1 - ok)
        external = sum(access_rates.values()) * self.config.external_share * window
        tiers[EXTERNAL][0] = external
        tiers[EXTERNAL][1] = external * _tail(EXTERNAL_MS, SIGMA["generation"], self._target(EXTERNAL, "generation"))
        # Capacity in the model: serving nodes against the nodes that carry the measured work at the target.
        by_name = {n.hostname: n for n in access}
        serving_access = [h for h, n in by_name.items() if self.schedulable(n, self.runtime(h))]
        busy = sum(self.runtime(h).cpu_util for h, r in access_rates.items() if r > 0)
        work = sum(sum(d["utils"].values()) for d in hybrid.values())
        modules = sum(len(d["utils"]) for d in hybrid.values())
        per_node = modules / len(hybrid) if hybrid else 0.0
        capacity = {ACCESS: [len(serving_access), math.ceil(busy / self.target_util)],
                    HYBRID: [len(hybrid), math.ceil(work / self.target_util / per_node) if per_node else 0]}
        row = {"t": now, "sim": self.sim_time(now), "tiers": tiers, "capacity": capacity}
        self.steps.append(row)
        if self.record is not None:
            self._write(row)
        traffic, self.rng = self.rng, self.noise_rng
        try:
            return super()._tier_samples(access, access_rates, cpu_ms, cpu_idle_ms, hybrid, model_ms,
                                         completed_tasks, now, dt, endpoints, faults)
        finally:
            self.rng = traffic

    def _write(self, row: dict[str, Any]) -> None:
        assert self.record is not None
        self.record.write(json.dumps(row) + "\n")
        self.record.flush()


def _slo_targets() -> dict[str, float]:
    from apps.health.checks import CHECKS

    return {k: float(v) for k, v in CHECKS["stage_latency"].defaults["p95_ms"].items()}


def _target_util() -> float:
    from apps.operations.selectors import capacity_params

    return float(capacity_params().target_util)


def simulate_main(args: argparse.Namespace) -> None:
    """The simulator process: ``manage.py simulate``'s loop with the metered engine."""
    import asyncio
    import logging
    import signal

    import django

    django.setup()
    from asgiref.sync import sync_to_async

    from apps.simulator.management.commands.simulate import _world
    from apps.simulator.runner import FleetSimulator, Tokens

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # No latency histograms: the SLO misses are counted from the engine's model, and the stack's load stays
    # what the recorded runs measured (a histogram per node and stage at 1,000 req/s is extra ingest).
    config = Config(speed=args.speed, peak_rps=args.peak_rps, start_hour=args.start_hour, latency_histograms=False)
    engine = MeteredEngine(seed=args.seed, config=config, targets=_slo_targets(), target_util=_target_util(),
                           record=Path(args.record))
    path = Path(args.tokens)
    sim = FleetSimulator(api=args.api, tokens=lambda: Tokens.load(path), engine=engine,
                         load_world=sync_to_async(_world), interval=args.interval,
                         command_interval=args.command_interval)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, sim.stop)
        await sim.run()

    asyncio.run(main())


# ---- the run ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    nodes: int = 0
    scope_nodes: int = 0
    bad: dict[str, Any] = dataclasses.field(default_factory=dict)
    clean: dict[str, Any] = dataclasses.field(default_factory=dict)
    transitions: dict[str, Any] = dataclasses.field(default_factory=dict)
    record: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    header: dict[str, Any] = dataclasses.field(default_factory=dict)
    window: tuple[float, float] = (0.0, 0.0)


def _seed(racks: int) -> tuple[Any, Any, Any]:
    from apps.inventory import services as inventory_services
    from apps.inventory.choices import CombinationState, TierKind
    from apps.inventory.models import ModuleType, Tier, VersionCombination
    from apps.simulator.demo import seed_demo
    from apps.vectors.services import suite_import
    from apps.vectors.sources import onnx_node_cases

    scale = racks / 3  # the demo's limits are for its 3 racks
    for kind, lo, hi in [(TierKind.ACCESS_LOGIC, 6, 18), (TierKind.HYBRID_INFERENCE, 10, 42)]:
        Tier.objects.filter(kind=kind).update(min_active_nodes=round(lo * scale), max_active_nodes=round(hi * scale))
    seed_demo(racks=racks)
    ax = ModuleType.objects.get(model=TARGET[0])
    target = VersionCombination.objects.select_related("driver", "framework").get(module_type=ax,
                                                                                  driver__version=TARGET[1])
    inventory_services.combination_set_state(combination=target, state=CombinationState.VALIDATED, actor="bench",
                                             reason="validated on the gray pool", by_validation=True)
    specs = [s for s in onnx_node_cases() if s.operator in ("QLinearMatMul", "MatMulInteger")]
    suite, _ = suite_import(name="onnx-int8-rollout", specs=specs, actor="bench")
    return ax, target, suite


def _final(api: Any, rollout_id: int, *, timeout: float) -> dict[str, Any]:
    from tests.live.stack import wait_for

    def ended() -> dict[str, Any]:
        body = dict(api.get(f"/api/v1/rollouts/{rollout_id}/").json())
        return body if body["state"] in ("completed", "rolled_back", "failed", "paused", "aborted") else {}

    return wait_for(ended, timeout=timeout, what=f"rollout #{rollout_id} to end", interval=1.0)


def _simulator(stack: Any, args: argparse.Namespace, record: Path, start_hour: float) -> Any:
    from tests.live.stack import Proc

    cmd = [sys.executable, str(Path(__file__).resolve()), "--simulate", "--api", stack.url,
           "--tokens", str(stack.tokens_file()), "--record", str(record), "--speed", str(args.speed),
           "--peak-rps", str(args.peak_rps), "--start-hour", str(start_hour), "--seed", str(args.seed),
           "--interval", str(args.interval), "--command-interval", str(args.command_interval)]
    n = sum(1 for p in stack.procs if p.name.startswith("simulator"))
    proc = Proc(f"simulator{n + 1}", cmd, stack.dir / f"simulator{n + 1}.log", dict(stack.env))
    stack.procs.append(proc)
    proc.start().wait_log("simulating", timeout=120)
    return proc


def _steps(record: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header: dict[str, Any] = {}
    rows = []
    for line in record.read_text().splitlines():
        row = json.loads(line)
        if "world" in row:
            header = row
        else:
            rows.append(row)
    return header, rows


def _transitions(tier_id: int, since_event: int, until_event: int) -> dict[str, Any]:
    """The tier's active nodes after every recorded node state change from ``since_event`` to
    ``until_event`` (audit trail, in order), each against the need the capacity guard recorded
    with the latest removal (the first one for changes before it)."""
    from django.db.models import Q

    from apps.audit.models import AuditEvent
    from apps.inventory.choices import NodeState
    from apps.inventory.models import Node, Tier

    tier = Tier.objects.get(pk=tier_id)
    nodes = dict(Node.objects.filter(tier=tier).values_list("pk", "state"))
    events = list(AuditEvent.objects.filter(target_type="node", target_id__in=[str(pk) for pk in nodes],
                                            pk__gt=since_event, pk__lte=until_event)
                  .filter(Q(action__startswith="node.") | Q(action__startswith="drain."))
                  .exclude(changes__state=None).order_by("pk").values_list("action", "target_id", "changes"))
    moves = [(a, int(t), c) for a, t, c in events
             if isinstance(c, dict) and isinstance(c.get("state"), list) and len(c["state"]) == 2]
    first: dict[int, str] = {}
    for _, pk, changes in moves:
        first.setdefault(pk, changes["state"][0])
    current = {pk: first.get(pk, s) for pk, s in nodes.items()}
    guards = [c["capacity"] for a, _, c in moves if a == "node.drain" and isinstance(c.get("capacity"), dict)]
    guard = guards[0] if guards else {"need": 0, "floor": tier.min_active_nodes}
    points = [(sum(1 for s in current.values() if s == NodeState.ACTIVE), guard["need"], guard["floor"])]
    for action, pk, changes in moves:
        if action == "node.drain" and isinstance(changes.get("capacity"), dict):
            guard = changes["capacity"]
        current[pk] = changes["state"][1]
        points.append((sum(1 for s in current.values() if s == NodeState.ACTIVE), guard["need"], guard["floor"]))
    lowest = min(points, key=lambda p: (p[0] / p[1]) if p[1] else math.inf)
    return {"tier": tier.name, "changes": len(moves), "removals": len(guards), "min_active": min(p[0] for p in points),
            "start_active": points[0][0], "lowest": lowest,
            "fraction": (lowest[0] / lowest[1]) if lowest[1] else math.inf,
            "floor_fraction": min(p[0] / p[2] for p in points if p[2]) if any(p[2] for p in points) else math.inf,
            "min_active_nodes": tier.min_active_nodes}


def run(args: argparse.Namespace, work: Path) -> Outcome:
    import httpx
    from rest_framework.authtoken.models import Token

    from apps.accounts.services import user_ensure
    from apps.audit.models import AuditEvent
    from apps.inventory.choices import CombinationState, NodeState
    from apps.inventory.models import Module, Node, Tier
    from apps.operations.choices import ACTIVE_DRAIN_STATES, Owner
    from apps.operations.models import Drain
    from apps.rollouts.models import Rollout, RolloutNode
    from apps.simulator.services import fault_set
    from tests.live.stack import LiveStack, wait_for

    t = time.monotonic()
    ax, target, suite = _seed(args.racks)
    out = Outcome(nodes=Node.objects.count(),
                  scope_nodes=Node.objects.filter(modules__module_type=ax).distinct().count())
    print(f"fleet: {out.nodes} nodes ({out.scope_nodes} with {ax} modules) seeded in {time.monotonic() - t:.0f} s",
          flush=True)
    stack = LiveStack(work)
    try:
        stack.web()
        stack.worker()
        stack.beat(every=TASKS, only=list(TASKS))
        sim = _simulator(stack, args, work / "steps-bad.jsonl", args.start_hour)
        user, _ = user_ensure(username="bench-operator", password="bench-operator-pw", role="operator")
        token, _ = Token.objects.get_or_create(user=user)
        api = httpx.Client(base_url=stack.url, headers={"Authorization": f"Token {token.key}"}, timeout=120)
        wait_for(lambda: AuditEvent.objects.exists() and _reported(out.nodes), timeout=300,
                 what="every serving node to report", interval=2.0)
        body = {"combination": target.pk, "module_type": ax.pk, "suite": suite.pk, "canary": 1,
                "wave_size": args.wave_size, "max_unavailable": args.max_unavailable, "bake_s": args.bake_s,
                "drain_deadline_s": 300, "install_timeout_s": 300, "vectors_timeout_s": 300,
                "reason": "bench: driver 2.4.0"}

        # (c) The combination goes bad in the field after it was validated.
        fault_set(kind="bad_combination", combination=target, actor="bench", reason="bench: bad in the field")
        print("bad rollout: started", flush=True)
        t0 = time.monotonic()
        created = api.post("/api/v1/rollouts/", json=body, headers={"Idempotency-Key": "bench-bad"})
        assert created.status_code == 201, created.text
        bad = _final(api, created.json()["id"], timeout=args.timeout)
        touched = set(AuditEvent.objects.filter(related_type="rollout", related_id=str(bad["id"]),
                                                action="rollout.node.cordoning").values_list("target_id", flat=True))
        canary = {str(pk) for pk in RolloutNode.objects.filter(rollout_id=bad["id"], wave=0)
                  .values_list("node_id", flat=True)}
        planned = RolloutNode.objects.filter(rollout_id=bad["id"], wave__isnull=False).count()
        out.bad = {"state": bad["state"], "message": bad["message"], "touched": len(touched),
                   "canary": len(canary), "only_canary": touched == canary, "planned": planned,
                   "wall_s": time.monotonic() - t0}
        print(f"bad rollout: {bad['state']} after {out.bad['wall_s']:.0f} s; touched {len(touched)} node(s) of "
              f"{planned} planned", flush=True)
        fault_set(kind="bad_combination", combination=target, enabled=False, actor="bench", reason="bench: fixed")
        wait_for(lambda: not RolloutNode.objects.filter(rollout_id=bad["id"]).exclude(
            step__in=["done", "rolled_back", "skipped"]).exists(), timeout=300, what="the bad rollout's nodes settled")

        # (b) The clean rollout, on a simulator started afresh (its steps are the baseline's).
        sim.stop()
        record = work / "steps-clean.jsonl"
        _simulator(stack, args, record, args.start_hour)
        wait_for(lambda: len(_steps(record)[1]) >= args.warm_steps, timeout=300, what="the simulator warm",
                 interval=1.0)
        tiers = {t.kind: t.pk for t in Tier.objects.all()}
        before = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        print("clean rollout: started", flush=True)
        t_start = time.time()
        created = api.post("/api/v1/rollouts/", json=body, headers={"Idempotency-Key": "bench-clean"})
        assert created.status_code == 201, created.text
        clean = _final(api, created.json()["id"], timeout=args.timeout)
        t_end = time.time()
        after = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        rollout = Rollout.objects.get(pk=clean["id"])
        rows = list(RolloutNode.objects.filter(rollout=rollout))
        done = [rn.node_id for rn in rows if rn.step == "done"]
        on_target = Module.objects.filter(node_id__in=done, module_type=ax, driver_version=TARGET[1]).count()
        target.refresh_from_db()
        out.clean = {"state": clean["state"], "message": clean["message"][:300], "waves": rollout.wave_count,
                     "done": len(done), "skipped": sum(1 for rn in rows if rn.step == "skipped"),
                     "modules_on_target": on_target,
                     "modules_upgraded": Module.objects.filter(node_id__in=done, module_type=ax).count(),
                     "pinned": target.state == CombinationState.PINNED,
                     "wall_s": (rollout.finished_at - rollout.created_at).total_seconds()
                     if rollout.finished_at else t_end - t_start,
                     "held_by_rollout": Drain.objects.filter(owner=Owner.ROLLOUT,
                                                             state__in=ACTIVE_DRAIN_STATES).count(),
                     "serving_before": Node.objects.filter(state=NodeState.ACTIVE).count()}
        print(f"clean rollout: {clean['state']} after {out.clean['wall_s']:.0f} s, {rollout.wave_count} waves",
              flush=True)
        wait_for(lambda: _steps(record)[1] and _steps(record)[1][-1]["t"] > t_end, timeout=120,
                 what="the simulator's steps past the end", interval=1.0)
        out.transitions = {kind: _transitions(pk, before, after) for kind, pk in tiers.items()
                           if kind in (ACCESS, HYBRID)}
        out.header, out.record = _steps(record)
        out.window = (t_start, t_end)
    finally:
        stack.stop()
    return out


def _reported(nodes: int) -> bool:
    from apps.inventory.choices import NodeState
    from apps.inventory.models import Node

    serving = Node.objects.filter(state=NodeState.ACTIVE)
    return serving.filter(status__isnull=False).count() >= serving.count() > 0


def baseline(out: Outcome) -> list[dict[str, Any]]:
    """The same engine over the same step times, with the fleet as it was at the simulator's start."""
    h = out.header
    world = [NodeSpec(**{**n, "modules": tuple(ModuleSpec(**m) for m in n["modules"])}) for n in h["world"]]
    engine = MeteredEngine(seed=h["seed"], config=Config(**{**h["config"], "latency_histograms": False}),
                           targets=_slo_targets(),
                           target_util=_target_util())
    for row in out.record:
        engine.step(row["t"], world, [])
    return engine.steps


def _sum(rows: list[dict[str, Any]], window: tuple[float, float]) -> dict[str, list[float]]:
    lo, hi = window
    out = {t: [0.0, 0.0] for t in TIERS}
    for row in rows:
        if lo <= row["t"] <= hi:
            for t in TIERS:
                out[t][0] += row["tiers"][t][0]
                out[t][1] += row["tiers"][t][1]
    return out


def _lowest_model_capacity(rows: list[dict[str, Any]], window: tuple[float, float], tier: str) -> tuple[float, Any]:
    lo, hi = window
    points = [(r["capacity"][tier][0] / r["capacity"][tier][1], r) for r in rows
              if lo <= r["t"] <= hi and r["capacity"][tier][1]]
    if not points:
        return math.inf, None
    return min(points, key=lambda p: p[0])


def report(out: Outcome, base: list[dict[str, Any]], args: argparse.Namespace) -> int:
    lo, hi = out.window
    live = [r for r in out.record if lo <= r["t"] <= hi]
    span = (live[-1]["sim"] - live[0]["sim"]) if len(live) > 1 else 0.0
    start_sim = live[0]["sim"] if live else 0.0
    ok = True
    goal_span, goal_capacity, goal_misses = at_least(GOAL_SIM_SPAN_S), at_least(GOAL_CAPACITY), at_most(GOAL_MISS_RATIO)
    print()
    print(f"driver rollout bench: {out.nodes} nodes ({out.scope_nodes} with the module type), simulator at "
          f"{args.speed:g}x (peak {args.peak_rps:g} req/s, seed {args.seed}, samples every {args.interval:g} s); "
          f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print()
    c = out.clean
    print(f"(b) clean rollout: {c['state']} in {c['wall_s']:.0f} s wall time, {c['waves']} waves (canary + "
          f"{c['waves'] - 1}), {c['done']} nodes upgraded, {c['skipped']} skipped; {c['modules_on_target']}/"
          f"{c['modules_upgraded']} modules of the upgraded nodes on {TARGET[1]}; pinned: {c['pinned']}; "
          f"nodes left held by the rollout: {c['held_by_rollout']}")
    print(f"    simulated period: {span / 3600:.2f} h, from {int(start_sim // 3600 % 24):02d}:"
          f"{int(start_sim // 60 % 60):02d} simulated ({len(live)} simulator steps)")
    met = c["state"] == "completed" and c["pinned"] and not c["held_by_rollout"]
    ok &= met
    print(f"    goal: completed, pinned, nothing left held: {'met' if met else 'MISSED'}")
    met = span >= goal_span
    ok &= met
    print(f"    goal: spans >= {goal_span / 3600:g} simulated hour: {'met' if met else 'MISSED'} ({span / 3600:.2f} h)")
    print()
    print("    lowest serving capacity / need, from the recorded state transitions (audit trail; need from the "
          "capacity guard at each removal):")
    for kind, tr in out.transitions.items():
        active, need, floor = tr["lowest"]
        frac = tr["fraction"]
        base_frac, _ = _lowest_model_capacity(base, out.window, kind)
        live_frac, at = _lowest_model_capacity(out.record, out.window, kind)
        met = frac >= goal_capacity
        ok &= met
        if not tr["changes"]:
            print(f"      {tr['tier']:<22} untouched: {tr['start_active']} active throughout, no state change  "
                  f"goal >= {goal_capacity:.1f}: {'met' if met else 'MISSED'}")
        else:
            print(f"      {tr['tier']:<22} {frac:6.2f}x  ({active} active vs need {need}, floor {floor}; "
                  f"{tr['changes']} state changes, {tr['removals']} guarded removals; active {tr['start_active']} "
                  f"at the start, {tr['min_active']} at the lowest)  goal >= {goal_capacity:.1f}: "
                  f"{'met' if met else 'MISSED'}")
        when = (f" at {int(at['sim'] // 3600 % 24):02d}:{int(at['sim'] // 60 % 60):02d} simulated"
                if at is not None else "")
        print(f"      {'':<22} per simulator step, the model's serving nodes / nodes for "
              f"{_target_util():.0%} utilisation: lowest {live_frac:.2f}x{when} (baseline {base_frac:.2f}x)")
    print()
    live_sum, base_sum = _sum(out.record, out.window), _sum(base, out.window)
    print("    requests that missed their tier's latency SLO (expected counts from the simulator's model):")
    print(f"      {'tier':<22} {'requests':>12} {'missed':>12} {'baseline req':>13} {'baseline miss':>14} "
          f"{'ratio':>8}  goal <= {goal_misses:g}x")
    for tier in TIERS:
        (req, miss), (breq, bmiss) = live_sum[tier], base_sum[tier]
        ratio = miss / bmiss if bmiss > 0 else (1.0 if miss == 0 else math.inf)
        met = miss <= goal_misses * bmiss
        ok &= met
        print(f"      {tier:<22} {req:12,.0f} {miss:12.3f} {breq:13,.0f} {bmiss:14.3f} {ratio:8.4f}  "
              f"{'met' if met else 'MISSED'}")
    print()
    b = out.bad
    met = b["state"] == "rolled_back" and b["only_canary"]
    ok &= met
    print(f"(c) bad rollout (bad_combination on after validation): {b['state']} after {b['wall_s']:.0f} s; nodes "
          f"touched before the stop: {b['touched']} (canary: {b['canary']}, planned: {b['planned']}); goal: the "
          f"canary only, rolled back: {'met' if met else 'MISSED'}")
    print(f"    reason: {b['message'][:240]}")
    print()
    print("(a) baseline: the same engine, seed and step times over the same simulated period, no node taken out")
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--racks", type=int, default=10, help="racks of 20 nodes (default 10: 200 nodes)")
    parser.add_argument("--speed", type=float, default=20.0, help="simulated seconds per real second (default 20)")
    parser.add_argument("--peak-rps", type=float, default=1000.0,
                        help="requests/s at the busiest hour (default 1000: the demo's 300 scaled to 10 racks)")
    parser.add_argument("--start-hour", type=float, default=11.0, help="simulated hour when the simulator starts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--interval", type=float, default=20.0,
                        help="simulator sample interval, s (default 20: 200 nodes on one web process)")
    parser.add_argument("--command-interval", type=float, default=10.0,
                        help="the simulator polls every node's commands once per this, s (default 10)")
    parser.add_argument("--wave-size", type=int, default=12)
    parser.add_argument("--max-unavailable", default="25%")
    parser.add_argument("--bake-s", type=int, default=5)
    parser.add_argument("--warm-steps", type=int, default=3, help="simulator steps before the clean rollout")
    parser.add_argument("--timeout", type=float, default=3600.0, help="longest wait for a rollout to end, s")
    # the simulator process
    parser.add_argument("--simulate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--api", help=argparse.SUPPRESS)
    parser.add_argument("--tokens", help=argparse.SUPPRESS)
    parser.add_argument("--record", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.simulate:
        simulate_main(args)
        return

    with bench_database(BENCH_DB), tempfile.TemporaryDirectory() as tmp:
        out = run(args, Path(tmp))
        base = baseline(out)
        code = report(out, base, args)
    sys.exit(code)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
