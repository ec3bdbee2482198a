"""The simulator's sender: what it queues for the gateway each tick."""

from __future__ import annotations

import asyncio
from typing import Any

from apps.simulator.engine import Engine, StepResult
from apps.simulator.runner import FleetSimulator, Tokens
from apps.telemetry.batch import MAX_SAMPLES


class _Engine(Engine):
    def __init__(self, stages: int) -> None:
        super().__init__(seed=1)
        self.stages = stages

    def step(self, now: float, *args: Any, **kwargs: Any) -> StepResult:
        tier = [{"tier": "hybrid_inference", "queue_depth": 0}]
        stages = [{"stage": "intent", "node": f"h-{i}"} for i in range(self.stages)]
        return StepResult(time=now, sim_time=0.0, node_samples={}, tier_samples=tier, stage_samples=stages,
                          requests_per_s=0.0)


def test_a_big_fleets_per_node_breakdown_goes_in_as_many_gateway_batches_as_it_takes() -> None:
    async def world() -> tuple[list[Any], list[Any]]:
        return [], []

    sim = FleetSimulator(api="http://simulated.invalid", tokens=Tokens(gateway="gw-key", nodes={}),
                         engine=_Engine(2 * MAX_SAMPLES + 500), load_world=world)
    sim._spawn = lambda coro: coro.close()  # type: ignore[method-assign]  # nothing is sent here
    asyncio.run(sim.tick(stagger=False))
    batches = [payload for _, payload in sim._outbox("gateway").queue]
    assert [len(b["stage_samples"]) for b in batches] == [MAX_SAMPLES, MAX_SAMPLES, 500]
    assert "tier_samples" in batches[0] and all("tier_samples" not in b for b in batches[1:])
    assert len({b["batch_id"] for b in batches}) == 3
    assert [s["node"] for b in batches for s in b["stage_samples"]] == [f"h-{i}" for i in range(2 * MAX_SAMPLES + 500)]
