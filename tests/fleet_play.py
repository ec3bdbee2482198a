"""The demo fleet played by the simulator's engine at an hour of its day: ``minutes`` of samples
ending now go through the real ingest, then the rollups run, as the running stack would have them."""

from __future__ import annotations

import datetime as dt
import itertools
import time

from django.utils import timezone

from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.inventory.models import Node
from apps.simulator.engine import Engine
from apps.simulator.runner import CONTRACT
from apps.simulator.selectors import fleet_specs
from apps.simulator.specs import Config
from apps.telemetry.ingest.receive import telemetry_ingest
from apps.telemetry.rollups.rollup import telemetry_rollup

_batch = itertools.count(1)


def play_demo_hour(hour: float, *, minutes: int = 2, step_s: float = 10.0, seed: int = 3,
                   engine: Engine | None = None) -> Engine:
    """The seeded fleet at ``hour`` (no campaign burst); returns the engine that played it."""
    engine = engine or Engine(seed=seed, config=Config(speed=1.0, start_hour=hour, burst_chance_per_hour=0.0))
    keys = {n.hostname: agent_token_issue(kind=AgentKind.NODE, node=n, actor="test")[0]
            for n in Node.objects.all()}
    gateway, _ = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor="test")
    end = time.time()
    steps = int(minutes * 60 / step_s)
    engine.start_time = end - steps * step_s
    specs = fleet_specs()
    for i in range(steps):
        result = engine.step(end - (steps - 1 - i) * step_s, specs, [], dt=step_s)
        when = dt.datetime.fromtimestamp(result.time, dt.UTC).isoformat()
        for host, sample in result.node_samples.items():
            telemetry_ingest(token=keys[host], payload={"batch_id": f"play-node-{next(_batch):06d}",
                                                        "contract": CONTRACT,
                                                        "node_samples": [{"time": when, **sample}]})
        telemetry_ingest(token=gateway, payload={"batch_id": f"play-gw-{next(_batch):06d}",
                                                 "tier_samples": result.tier_samples,
                                                 "stage_samples": result.stage_samples})
    telemetry_rollup(now=timezone.now(), since=timezone.now() - dt.timedelta(minutes=minutes + 1))
    return engine
