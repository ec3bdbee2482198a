"""A drain against the fleet simulator: the simulated agent takes the drain command
from the command channel, stops taking tasks, its in-flight work finishes, and the
drain completes only once the node reports zero."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from apps.agents.services import node_command_ack, node_command_claim
from apps.inventory.choices import NodeState, TierKind
from apps.inventory.models import Tier
from apps.operations import controllers, lifecycle
from apps.operations.choices import DrainState
from apps.simulator.engine import Engine
from apps.simulator.runner import FleetSimulator, Tokens
from apps.simulator.selectors import fleet_specs
from apps.simulator.specs import Config

from .conftest import state_of

pytestmark = pytest.mark.django_db


def test_it_drains_a_simulated_node_only_when_its_work_is_done(fleet):  # type: ignore[no-untyped-def]
    access, _ = Tier.objects.get_or_create(kind=TierKind.ACCESS_LOGIC, defaults={"name": "Access", "level": 1})
    a1 = fleet.node("a-1", tier=access, modules=0)
    fleet.node("a-2", tier=access, modules=0)
    fleet.node("h-1", modules=2)
    nodes = {n.hostname: n for n in fleet.nodes.values()}
    engine = Engine(seed=7, config=Config(speed=1.0, peak_rps=40.0, start_hour=14.0, rounds_min=3, rounds_max=6,
                                          burst_chance_per_hour=0.0))
    agent = FleetSimulator(api="http://simulated.invalid", tokens=Tokens(gateway="", nodes={}), engine=engine,
                           load_world=lambda: None)

    def tick(at: float) -> dict[str, int]:
        result = engine.step(at, fleet_specs(), [])
        when = dt.datetime.fromtimestamp(at, dt.UTC).isoformat()
        for host, sample in result.node_samples.items():
            fleet.send_sample(nodes[host], {"time": when, **sample})
        for command in node_command_claim(node=a1):  # the simulated agent polls its commands
            status, result_body = agent.handle_command("a-1", {"id": command.pk, "kind": command.kind})
            node_command_ack(node=a1, command_id=command.pk, status=status, result=result_body)
        return {h: s["in_flight"] for h, s in result.node_samples.items()}

    start = time.time()
    for i in range(20):  # warm up: the last 40 s
        seen = tick(start - 40 + 2 * i)
    assert seen["a-1"] > 0

    # Two access nodes at ~60 % CPU: the capacity guard would keep both; the operator overrides.
    drain = lifecycle.node_drain(node=a1, reason="simulated maintenance", actor="alice", deadline_s=600,
                                 override=True).obj
    history = []
    for i in range(1, 91):  # a task runs up to 6 rounds at the node's latency (~4 s here): up to ~30 s
        seen = tick(time.time() + i)
        controllers.drains_advance()
        drain.refresh_from_db()
        history.append((seen["a-1"], seen["a-2"], drain.state))
        if drain.state == DrainState.DRAINED:
            break
    assert engine.runtime("a-1").accepting is False
    assert history[-1][2] == DrainState.DRAINED and history[-1][0] == 0
    # While the node still reported work in flight, the drain waited.
    assert history[0][0] > 0 and history[0][2] == DrainState.DRAINING
    assert all(state == DrainState.DRAINING for flight, _, state in history if flight > 0)
    # The other node kept serving.
    assert all(other > 0 for _, other, _ in history)
    assert state_of(a1) == NodeState.DRAINED
