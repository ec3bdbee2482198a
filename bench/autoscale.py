"""One compressed spiky day through the fleet simulator, three ways, side by side.

    .venv/bin/python bench/autoscale.py            # ~2 min, no database needed

The simulator's engine (apps/simulator/engine.py) plays the day's traffic:
its diurnal curve (near zero at 04:00, highest mid-afternoon) and its campaign
bursts (1.5-3x for 10-40 simulated minutes), compressed ``--speed`` times.
Agent tasks land on the schedulable access & logic nodes and stay there until
their rounds are done; CPU contention turns load into queueing. Every 10 s
(the autoscaler's schedule) the tier's queue depth is read, as the gateway
would report it, and one of three policies sets the active node count:

  (a) this autoscaler: apps.operations.autoscaler.decide with the policy
      defaults (tolerance 0.1, windows 0 s up / 300 s down, steps +max(4,
      100%) / -25%, cooldown 60 s, scale-down headroom); scale-down by drain:
      a released node takes no new task and returns to standby only when its
      in-flight work is done; scale-up takes back draining nodes first;
  (b) a static fleet sized for the peak: the smallest that meets the SLO in
      at least as many steps as (a) (found by bisection);
  (c) the bare HPA formula, ceil(current x observed / target) with its
      tolerance, and no stabilisation, step limit, headroom or cooldown.

A node activated from standby takes ``--boot`` seconds before it serves.
Node-hours count active, booting and draining nodes (standby is off), in
simulated hours. Queue-wait SLO attainment is the share of 10 s steps whose
mean queue wait (Little's law: queue depth / completions per second) is within
``--slo-ms``. Scale direction reversals count the times a policy scales the
other way from its previous scale action.

Goal (exit 1 on a miss): (a) uses at most half the node-hours of (b). Smallest setting:
``--speed 200`` (a day in about 430 s of engine time, seconds to run).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.operations.autoscaler import Params, decide  # noqa: E402
from apps.simulator.engine import Engine  # noqa: E402
from apps.simulator.specs import ACCESS, HYBRID, Config, ModuleSpec, NodeSpec  # noqa: E402
from bench.common import at_most  # noqa: E402

STEP_S = 10.0
GOAL_RATIO = 0.5  # at most this share of the static fleet's node-hours


@dataclass
class Run:
    name: str
    steps: int = 0
    steps_in_slo: int = 0
    requests: float = 0.0
    requests_in_slo: float = 0.0
    node_seconds: float = 0.0
    reversals: int = 0
    flaps: int = 0
    scale_actions: int = 0
    max_nodes: int = 0
    waits_ms: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def node_hours(self, speed: float) -> float:
        return self.node_seconds * speed / 3600


class Fleet:
    """Access & logic nodes the policy scales (active, booting, draining, standby), plus a fixed hybrid tier."""

    def __init__(self, *, pool: int, active: int, hybrid: int, boot_s: float) -> None:
        self.names = [f"a-{i:02d}" for i in range(pool)]
        self.state = {h: ("active" if i < active else "standby") for i, h in enumerate(self.names)}
        self.ready_at: dict[str, float] = {}
        self.boot_s = boot_s
        self.hybrid = [NodeSpec(hostname=f"h-{i:02d}", tier=HYBRID, cpu_cores=16, cpu_clock_ghz=3.2,
                                modules=tuple(ModuleSpec(serial=f"h-{i:02d}-m{j}", slot=j) for j in range(2)))
                       for i in range(hybrid)]

    def specs(self) -> list[NodeSpec]:
        # "booting" is not schedulable in the engine: it counts as cordoned until ready.
        engine_state = {"active": "active", "booting": "cordoned", "draining": "draining", "standby": "standby"}
        return [NodeSpec(hostname=h, tier=ACCESS, state=engine_state[self.state[h]], cpu_cores=8, cpu_clock_ghz=3.6)
                for h in self.names] + self.hybrid

    def count(self, *states: str) -> int:
        return sum(1 for s in self.state.values() if s in states)

    def tick(self, now: float, engine: Engine) -> None:
        for h, s in self.state.items():
            if s == "booting" and self.ready_at[h] <= now:
                self.state[h] = "active"
            elif s == "draining" and engine.runtime(h).in_flight == 0:
                self.state[h] = "standby"  # released only when empty

    def scale_to(self, desired: int, now: float, engine: Engine) -> None:
        serving = self.count("active", "booting")
        if desired > serving:
            need = desired - serving
            for h in self.names:  # take back draining nodes first (they are warm), then boot standby ones
                if need and self.state[h] == "draining":
                    self.state[h], need = "active", need - 1
            for h in self.names:
                if need and self.state[h] == "standby":
                    self.state[h], self.ready_at[h], need = "booting", now + self.boot_s, need - 1
        elif desired < serving:
            extra = serving - desired
            booting = [h for h in self.names if self.state[h] == "booting"]
            for h in booting[:extra]:
                self.state[h] = "standby"
            extra -= min(extra, len(booting))
            active = sorted((h for h in self.names if self.state[h] == "active"),
                            key=lambda h: engine.runtime(h).in_flight)
            for h in active[:extra]:
                self.state[h] = "draining"  # least busy first; no new tasks from now on


def simulate(name: str, policy: Params | None, args: argparse.Namespace, static: int | None = None) -> Run:
    # No latency histograms: the engine's own figures are what this bench counts (drawing every request's
    # latency over a simulated day would only slow it down).
    cfg = Config(speed=args.speed, peak_rps=args.peak_rps, start_hour=0.0, burst_chance_per_hour=args.bursts,
                 latency_histograms=False)
    engine = Engine(seed=args.seed, config=cfg, start_time=0.0)
    start = static if static is not None else args.min_nodes
    fleet = Fleet(pool=args.max_nodes, active=start, hybrid=args.hybrid, boot_s=args.boot)
    run = Run(name)
    history: list[tuple[float, int]] = []
    last_scale: float | None = None
    last_dir = 0
    steps = int(86400 / args.speed / STEP_S)
    for i in range(steps):
        now = (i + 1) * STEP_S
        fleet.tick(now, engine)
        result = engine.step(now, fleet.specs(), [], dt=STEP_S)
        sample = next(t for t in result.tier_samples if t["tier"] == ACCESS)
        queue, served = sample["queue_depth"], max(1e-9, result.requests_per_s)
        wait_ms = 1000 * queue / served if result.requests_per_s > 0.01 else (0.0 if queue == 0 else 1e9)
        run.steps += 1
        run.requests += served * STEP_S
        if wait_ms <= args.slo_ms:
            run.steps_in_slo += 1
            run.requests_in_slo += served * STEP_S
        run.waits_ms.append(wait_ms)
        run.node_seconds += fleet.count("active", "booting", "draining") * STEP_S
        current = fleet.count("active", "booting")
        run.counts.append(current)
        run.max_nodes = max(run.max_nodes, current)
        if policy is None:
            continue
        d = decide(policy, current=current, queue_depth=queue, now=now, history=history, last_scale_at=last_scale)
        history = [(t, r) for t, r in history if now - t <= max(policy.up_window_s, policy.down_window_s)]
        history.append((now, d.recommendation))
        if d.desired != current:
            direction = 1 if d.desired > current else -1
            if last_dir and direction != last_dir:
                run.reversals += 1
                if last_scale is not None and now - last_scale <= args.flap_s:
                    run.flaps += 1
            last_dir, last_scale = direction, now
            run.scale_actions += 1
            fleet.scale_to(d.desired, now, engine)
    return run


def smallest_static(args: argparse.Namespace, attainment: float, hi: int) -> Run:
    """The smallest static fleet whose queue-wait SLO attainment is at least ``attainment``."""
    lo_n, hi_n = args.min_nodes, hi
    best = simulate("", None, args, static=hi_n)
    while lo_n < hi_n:
        mid = (lo_n + hi_n) // 2
        r = simulate("", None, args, static=mid)
        if r.steps_in_slo / r.steps >= attainment:
            hi_n, best = mid, r
        else:
            lo_n = mid + 1
    best.name = f"(b) static, peak-sized ({hi_n} nodes)"
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--speed", type=float, default=4.0, help="simulated seconds per engine second (day compression)")
    p.add_argument("--peak-rps", type=float, default=600.0, help="requests/s at the busiest hour before bursts")
    p.add_argument("--bursts", type=float, default=0.35, help="chance per simulated hour of a campaign burst")
    p.add_argument("--target", type=float, default=3.0, help="target queue depth per active node")
    p.add_argument("--slo-ms", type=float, default=250.0, help="queue-wait target per step")
    p.add_argument("--boot", type=float, default=10.0, help="seconds from standby to serving")
    p.add_argument("--flap-s", type=float, default=120.0, help="a reversal this soon after the last action is a flap")
    p.add_argument("--min-nodes", type=int, default=2)
    p.add_argument("--max-nodes", type=int, default=60)
    p.add_argument("--hybrid", type=int, default=24, help="fixed hybrid-inference nodes (not scaled here)")
    args = p.parse_args(argv)

    common = dict(target_per_node=args.target, min_nodes=args.min_nodes, max_nodes=args.max_nodes)
    ours = Params(**common)  # the policy defaults: tolerance 0.1, windows 0/300 s, steps, cooldown, headroom
    bare = Params(**common, tolerance=0.1, up_window_s=0, down_window_s=0, max_step=10**6, scale_up_percent=1e6,
                  scale_down_percent=100, down_headroom=False, cooldown_s=0)
    a = simulate("(a) this autoscaler", ours, args)
    b = smallest_static(args, a.steps_in_slo / a.steps, a.max_nodes)
    c = simulate("(c) bare HPA formula", bare, args)

    hours = 86400 / args.speed / 3600
    print(f"One simulated day (seed {args.seed}) compressed {args.speed:g}x into {hours:.1f} h of engine time, "
          f"{a.steps} steps of {STEP_S:g} s; peak {args.peak_rps:g} req/s before bursts (chance {args.bursts:g}/h); "
          f"access & logic tier; queue-wait target {args.slo_ms:g} ms; target queue depth {args.target:g}/node; "
          f"boot {args.boot:g} s.")
    print("(b) is the smallest static fleet that meets the SLO in at least as many steps as (a).")
    print()
    head = (f"{'policy':36} {'SLO steps':>9} {'SLO reqs':>9} {'p99 wait':>9} {'node-h':>8} {'vs (b)':>7} "
            f"{'scales':>7} {'reversals':>9} {'flaps':>6} {'max':>4}")
    print(head)
    print("-" * len(head))
    for r in (a, b, c):
        waits = sorted(r.waits_ms)
        p99 = waits[min(len(waits) - 1, math.ceil(0.99 * len(waits)) - 1)]
        ratio = r.node_hours(args.speed) / b.node_hours(args.speed)
        print(f"{r.name:36} {100 * r.steps_in_slo / r.steps:8.2f}% {100 * r.requests_in_slo / r.requests:8.2f}% "
              f"{min(p99, 99999):7.0f}ms {r.node_hours(args.speed):8.1f} {ratio:7.2f} "
              f"{r.scale_actions:7d} {r.reversals:9d} {r.flaps:6d} {r.max_nodes:4d}")
    print()
    ratio = a.node_hours(args.speed) / b.node_hours(args.speed)
    limit = at_most(GOAL_RATIO)
    goal_hours = ratio <= limit
    print(f"goal: at most {limit:g} x the node-hours of (b) at the same SLO attainment: "
          f"{'yes' if goal_hours else 'NO'} "
          f"({ratio:.2f}); reversals {a.reversals} (flaps within {args.flap_s:g} s: {a.flaps}) vs {c.reversals} "
          f"({c.flaps}) for the bare formula")
    return 0 if goal_hours else 1


if __name__ == "__main__":
    sys.exit(main())
