"""The heartbeat on a running stack (web, a Celery worker, beat on its real schedule,
the simulator): a node whose simulated agent stops is unreachable within the timeout
plus one sweep, and back in its previous state within one sweep of reporting again;
the operator's hold on it stays as it was throughout."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState, TierKind
from apps.inventory.models import Node
from apps.operations import lifecycle
from apps.operations.choices import DrainState
from apps.operations.models import Drain
from apps.simulator import services as simulator
from apps.telemetry.models import IngestBatch, NodeStatus
from tests.agent.fleet import make_node
from tests.live.stack import LiveStack, wait_for

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TIMEOUT_S = 6
SWEEP_S = 2
SLACK_S = 3  # beat's tick, the queue and the worker: seconds, not sweeps


def _state(node: Node) -> str:
    return str(Node.objects.values_list("state", flat=True).get(pk=node.pk))


def _hold(node: Node) -> tuple[Any, ...]:
    return tuple(Drain.objects.filter(node=node, state__in=[DrainState.CORDONED]).values_list(
        "pk", "owner", "state", "reason").get())


def test_it_marks_a_silent_node_unreachable_and_brings_it_back_with_its_hold(live_stack: LiveStack) -> None:
    nodes = [make_node(f"n-h-{i:02d}", slot=i + 1, tier=TierKind.ACCESS_LOGIC, modules=0) for i in range(4)]
    quiet = nodes[1]
    lifecycle.node_cordon(node=quiet, reason="watching its fans", actor="alice")
    hold = _hold(quiet)
    env = {"NODE_HEARTBEAT_TIMEOUT_S": str(TIMEOUT_S)}
    live_stack.web(env=env)
    live_stack.simulator(interval=1.0, command_interval=0)
    wait_for(lambda: NodeStatus.objects.filter(node__in=nodes).count() == len(nodes), timeout=60,
             what="every node to report")
    live_stack.worker(env=env)
    live_stack.beat(every={"apps.operations.tasks.nodes_heartbeat": SWEEP_S},
                    only=["apps.operations.tasks.nodes_heartbeat"])

    crashed_at = timezone.now()
    simulator.fault_set(kind="node_crash", node=quiet, actor="test")
    wait_for(lambda: _state(quiet) == NodeState.UNREACHABLE, timeout=TIMEOUT_S + SWEEP_S + 30,
             what="the silent node to become unreachable")
    assert not AuditEvent.objects.filter(action="node.unreachable", time__lt=crashed_at).exists()
    marked = AuditEvent.objects.get(action="node.unreachable", target_id=str(quiet.pk))
    last_seen = dt.datetime.fromisoformat(marked.changes["last_seen"])
    silent_for = (marked.time - last_seen).total_seconds()
    print(f"unreachable after {silent_for:.1f} s of silence (timeout {TIMEOUT_S} s, sweep {SWEEP_S} s)")
    assert TIMEOUT_S <= silent_for <= TIMEOUT_S + SWEEP_S + SLACK_S
    assert marked.actor_name == "health" and marked.changes["state"] == ["cordoned", "unreachable"]
    assert _hold(quiet) == hold
    # The others kept reporting and kept their state.
    assert {_state(n) for n in nodes if n != quiet} == {NodeState.ACTIVE}

    simulator.fault_set(kind="node_crash", node=quiet, enabled=False, actor="test")
    wait_for(lambda: _state(quiet) == NodeState.CORDONED, timeout=SWEEP_S + 30,
             what="the node to return to cordoned")
    back = AuditEvent.objects.get(action="node.reachable", target_id=str(quiet.pk))
    assert back.changes["state"] == ["unreachable", "cordoned"]
    first = IngestBatch.objects.filter(scope=f"node:{quiet.pk}", received_at__gt=marked.time).earliest("received_at")
    waited = (back.time - first.received_at).total_seconds()
    print(f"back to cordoned {waited:.1f} s after its first report (sweep {SWEEP_S} s)")
    assert 0 <= waited <= SWEEP_S + SLACK_S
    assert _hold(quiet) == hold
    assert not AuditEvent.objects.filter(target_id=str(quiet.pk), action__startswith="drain.").exists()
