"""The heartbeat on a running stack (web, a Celery worker, beat on its real schedule,
the simulator): a node whose simulated agent stops is unreachable once the timeout has
passed, by the first sweep that ran after it, and back in its previous state by the first
sweep that could see it reporting again; the operator's hold on it stays as it was
throughout.

Sweeps are counted, not timed: the worker's log says when each sweep was received (its
``now`` is later) and what it did, so "the first sweep after X" holds however late beat
and the worker run on a loaded machine."""

from __future__ import annotations

import ast
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.db.models import F
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
from tests.live.stack import LiveStack, Proc, wait_for

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TIMEOUT_S = 6
SWEEP_S = 2
TASK = "apps.operations.tasks.nodes_heartbeat"
_LINE = re.compile(r"^\[(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): \w+/[^\]]+\] Task "
                   + re.escape(TASK) + r"\[(?P<id>[^\]]+)\] (?P<what>.*)$")
_DONE = re.compile(r"^succeeded in (?P<took>[0-9.e-]+)s: (?P<result>.*)$")


@dataclass
class Sweep:
    """One heartbeat sweep as the worker logged it (local times, truncated to the millisecond)."""

    id: str
    received: dt.datetime  # the sweep's ``now`` is later than this
    done: dt.datetime | None = None
    took: float = 0.0
    result: dict[str, list[int]] | None = None  # None: it failed

    @property
    def started(self) -> dt.datetime:
        assert self.done is not None
        return self.done - dt.timedelta(seconds=self.took)


def _sweeps(worker: Proc) -> list[Sweep]:
    """The heartbeat sweeps the worker received, in order, with what the finished ones did."""
    sweeps: dict[str, Sweep] = {}
    for line in worker.log().splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        at = dt.datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S,%f").astimezone()  # the worker's local time
        if m["what"] == "received":
            sweeps[m["id"]] = Sweep(m["id"], at)
        elif m["id"] in sweeps:
            sweep = sweeps[m["id"]]
            sweep.done = at
            if done := _DONE.match(m["what"]):
                sweep.took, sweep.result = float(done["took"]), ast.literal_eval(done["result"])
    return sorted(sweeps.values(), key=lambda s: s.received)


def _missed(worker: Proc, *, key: str, pk: int, since: dt.datetime) -> tuple[Sweep, list[Sweep]]:
    """The sweep that put ``pk`` in its result's ``key``, and the sweeps that should have done it first:
    received at or after ``since`` (so their ``now`` was later) and finished, without doing it, before
    that sweep began (a sweep running alongside it may find the node locked by it and skip it)."""
    def logged() -> tuple[Sweep, list[Sweep]] | None:  # the worker logs a sweep after its commit
        sweeps = _sweeps(worker)
        by = [s for s in sweeps if s.result is not None and pk in s.result[key]]
        return None if not by else (by[0], sweeps)

    found = wait_for(logged, timeout=30, what=f"the worker to log the sweep that found node {pk} {key}")
    assert found is not None
    by, sweeps = found
    return by, [s for s in sweeps if s.received >= since and s.done is not None and s.done < by.started
                and (s.result is None or pk not in s.result[key])]


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
    worker = live_stack.worker(env=env)
    live_stack.beat(every={TASK: SWEEP_S}, only=[TASK])

    crashed_at = timezone.now()
    simulator.fault_set(kind="node_crash", node=quiet, actor="test")
    wait_for(lambda: _state(quiet) == NodeState.UNREACHABLE, timeout=TIMEOUT_S + SWEEP_S + 30,
             what="the silent node to become unreachable")
    assert not AuditEvent.objects.filter(action="node.unreachable", time__lt=crashed_at).exists()
    marked = AuditEvent.objects.get(action="node.unreachable", target_id=str(quiet.pk))
    last_seen = dt.datetime.fromisoformat(marked.changes["last_seen"])
    silent_for = (marked.time - last_seen).total_seconds()
    deadline = last_seen + dt.timedelta(seconds=TIMEOUT_S)
    by, missed = _missed(worker, key="unreachable", pk=quiet.pk, since=deadline)
    print(f"unreachable after {silent_for:.1f} s of silence (timeout {TIMEOUT_S} s, sweep {SWEEP_S} s), "
          f"by the sweep received {(by.received - deadline).total_seconds():+.1f} s after the deadline")
    assert silent_for >= TIMEOUT_S  # never before the timeout
    # ... and by the first sweep that ran after it: none that came later than the deadline passed it over.
    assert not missed, (deadline, by, missed)
    assert marked.actor_name == "health" and marked.changes["state"] == ["cordoned", "unreachable"]
    assert _hold(quiet) == hold
    # The others kept reporting and kept their state.
    assert {_state(n) for n in nodes if n != quiet} == {NodeState.ACTIVE}

    simulator.fault_set(kind="node_crash", node=quiet, enabled=False, actor="test")
    visible: list[dt.datetime] = []  # when this test first saw the node's new report committed

    def back_in_cordoned() -> bool:
        if not visible and NodeStatus.objects.filter(node=quiet, node__state=NodeState.UNREACHABLE,
                                                     last_seen__gt=F("node__state_changed_at")).exists():
            visible.append(timezone.now())  # every sweep received from now on sees the report
        return _state(quiet) == NodeState.CORDONED

    wait_for(back_in_cordoned, timeout=SWEEP_S + 30, what="the node to return to cordoned", interval=0.05)
    back = AuditEvent.objects.get(action="node.reachable", target_id=str(quiet.pk))
    assert back.changes["state"] == ["unreachable", "cordoned"]
    first = IngestBatch.objects.filter(scope=f"node:{quiet.pk}", received_at__gt=marked.time).earliest("received_at")
    waited = (back.time - first.received_at).total_seconds()
    print(f"back to cordoned {waited:.1f} s after its first report (sweep {SWEEP_S} s)")
    assert waited >= 0  # not before it reported
    # ... and by the first sweep that could see the report (if this test saw it before a sweep acted on it).
    by, missed = _missed(worker, key="reachable", pk=quiet.pk, since=visible[0] if visible else back.time)
    assert not missed, (visible, by, missed)
    assert _hold(quiet) == hold
    assert not AuditEvent.objects.filter(target_id=str(quiet.pk), action__startswith="drain.").exists()
