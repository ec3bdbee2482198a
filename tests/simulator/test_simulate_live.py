"""The simulator against a real API server process: nodes report with their own keys,
the gateway reports tiers and stages, commands are acknowledged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from asgiref.sync import sync_to_async
from django.db import connection

from apps.agents.services import agent_token_issue, node_command_send
from apps.inventory.choices import TierKind
from apps.simulator import selectors, services
from apps.simulator.engine import Engine
from apps.simulator.runner import FleetSimulator, RunStats, Tokens
from apps.simulator.specs import Config
from apps.telemetry.models import IngestBatch, NodeSample, NodeStatus, StageSample, TierStatus
from tests.agent.fleet import make_node
from tests.live.stack import LiveStack


def _world() -> tuple[list, list, list]:
    try:
        return selectors.world()
    finally:
        connection.close()  # the executor thread's connection must not outlive the test database


async def _play_until(sim: FleetSimulator, done: Callable[[RunStats], bool], timeout: float) -> RunStats:
    """Run the simulation until ``done(stats)`` holds (or ``timeout`` passes), then stop it."""
    task = asyncio.ensure_future(sim.run())
    deadline = time.monotonic() + timeout
    while not task.done() and not done(sim.stats) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    sim.stop()
    return await task


def test_it_plays_the_fleet_through_the_agent_endpoints(live_stack: LiveStack) -> None:
    live_stack.web()
    nodes = [
        make_node("n-s-01", tier=TierKind.ACCESS_LOGIC, modules=0, slot=1),
        make_node("n-s-02", tier=TierKind.ACCESS_LOGIC, modules=0, slot=2),
        make_node("n-s-03", modules=2, slot=3),
        make_node("n-s-04", modules=1, slot=4),
    ]
    _, gateway = agent_token_issue(kind="gateway", node=None, actor="test")
    tokens = Tokens(gateway=gateway, nodes={n.hostname: agent_token_issue(kind="node", node=n, actor="test")[1]
                                            for n in nodes})
    drain = node_command_send(node=nodes[0], kind="drain", args={}, actor="test")
    diagnose = node_command_send(node=nodes[2], kind="diagnose", args={}, actor="test")
    services.fault_set(kind="node_crash", node=nodes[3], actor="test")

    sim = FleetSimulator(api=live_stack.url, tokens=tokens, engine=Engine(seed=1, config=Config(peak_rps=40)),
                         load_world=sync_to_async(_world), interval=1.0, command_interval=1.0)
    # Three ticks, and both commands answered (the drain done, the diagnose refused as unknown).
    stats = asyncio.run(_play_until(sim, lambda st: st.ticks >= 3 and st.commands.get("succeeded", 0) >= 1
                                    and st.commands.get("unknown", 0) >= 1, timeout=60))

    assert stats.ticks >= 3 and stats.send_failures == 0 and stats.batches_rejected == 0
    live_stack.wait_stored()
    reporting = set(NodeStatus.objects.values_list("node__hostname", flat=True))
    assert reporting == {"n-s-01", "n-s-02", "n-s-03"}  # the crashed node stays silent
    assert NodeSample.objects.count() == stats.node_samples_sent == 3 * stats.ticks
    assert IngestBatch.objects.filter(scope="gateway").count() == stats.gateway_batches_sent == stats.ticks
    assert set(TierStatus.objects.values_list("tier__kind", flat=True)) == set(TierKind.values)
    # The tiers' own summaries: hybrid + external, every tick (beside the hybrid nodes' breakdown).
    assert StageSample.objects.filter(stage="generation", node=None).count() == 2 * stats.ticks
    assert StageSample.objects.filter(stage="generation", node__isnull=False).exists()
    in_flight = NodeStatus.objects.get(node__hostname="n-s-01").in_flight
    assert in_flight is not None and in_flight >= 0  # the simulated agent always knows its in-flight work

    drain.refresh_from_db()
    diagnose.refresh_from_db()
    assert drain.state == "succeeded" and drain.result["accepting"] is False
    assert sim.engine.runtime("n-s-01").accepting is False
    assert diagnose.state == "unknown" and "diagnose" in diagnose.result["message"]


def test_it_keeps_what_it_could_not_send_and_sends_it_once_the_api_is_back(live_stack: LiveStack) -> None:
    web = live_stack.web()
    nodes = [make_node("n-q-01", tier=TierKind.ACCESS_LOGIC, modules=0, slot=1), make_node("n-q-02", slot=2)]
    _, gateway = agent_token_issue(kind="gateway", node=None, actor="test")
    tokens = Tokens(gateway=gateway, nodes={n.hostname: agent_token_issue(kind="node", node=n, actor="test")[1]
                                            for n in nodes})
    sim = FleetSimulator(api=live_stack.url, tokens=tokens, engine=Engine(seed=2, config=Config(peak_rps=20)),
                         load_world=sync_to_async(_world), interval=0.5, command_interval=0)
    web.kill()
    down = asyncio.run(sim.run(duration=1.6))
    assert down.send_failures > 0 and down.batches_sent == 0
    queued = sim.queued()
    assert queued == 3 * down.ticks  # two nodes and the gateway, every tick
    live_stack.start_web()
    stats = asyncio.run(sim.run(duration=1.6))
    assert sim.queued() == 0
    assert stats.batches_rejected == 0 and stats.batches_dropped == 0
    live_stack.wait_stored()
    assert NodeSample.objects.count() == stats.node_samples_sent == 2 * stats.ticks
    assert IngestBatch.objects.filter(scope="gateway").count() == stats.ticks
    times = list(NodeSample.objects.filter(node=nodes[0]).values_list("time", flat=True))
    assert len(times) == len(set(times)) == stats.ticks  # in order, none twice
