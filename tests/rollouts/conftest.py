"""A fleet to roll out on: the vectors tests' fleet (a pinned and a candidate combination), the
simulator's agent loop answering every node's commands in-process, telemetry through the real
ingest (drains finish on a reported zero in flight), and a driver that runs the controller."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from django.db.models import Q
from django.utils import timezone

from apps.agents.models import AgentToken
from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, Node, Tier, VersionCombination
from apps.operations.controllers import drains_advance
from apps.rollouts import controller
from apps.rollouts.models import Rollout
from apps.telemetry.ingest.receive import telemetry_ingest
from apps.vectors.models import Suite
from apps.vectors.services import suite_import
from apps.vectors.sources import VectorSpec
from tests.browser.conftest import (  # noqa: F401  (browser fixtures)
    browser_page,
    chromium_browser,
    dashboard_stack,
    demo_fleet,
)
from tests.vectors.conftest import Fleet, int8_specs
from tests.vectors.test_validation import SimulatedGrayPool

_batch = itertools.count(1)


@cache
def small_specs() -> tuple[VectorSpec, ...]:
    """The QLinearMatMul cases (what a bad combination breaks) and the MatMulInteger ones."""
    return tuple(s for s in int8_specs() if s.operator in ("QLinearMatMul", "MatMulInteger"))


class RolloutFleet(Fleet):
    def __init__(self) -> None:
        super().__init__()
        Tier.objects.filter(pk=self.tier.pk).update(min_active_nodes=2, max_active_nodes=20)
        self.tier.refresh_from_db()
        VersionCombination.objects.filter(pk=self.candidate.pk).update(state=CombinationState.VALIDATED)
        self.candidate.refresh_from_db()
        self.suite: Suite = suite_import(name="onnx-int8-small", specs=small_specs(), actor="test")[0]
        self._pool: SimulatedGrayPool | None = None

    @property
    def pool(self) -> SimulatedGrayPool:
        if self._pool is None:
            self._pool = SimulatedGrayPool(self)
        return self._pool

    def simulated_agents(self, stack: Any, nodes: list[Node]) -> None:
        """A real cp_agent process per node on ``stack``, its modules simulated (they run the vectors)."""
        for node in nodes:
            serials = Module.objects.filter(node=node).values_list("serial", flat=True)
            stack.agent(node, "--backend", "simulated", *[f"--module={s}" for s in serials],
                        token=self.keys[node.hostname])

    def report_idle(self) -> None:
        """Every serving node reports zero requests in flight now."""
        for token in AgentToken.objects.filter(node__hostname__in=list(self.keys)).select_related("node"):
            assert token.node is not None
            hostname = token.node.hostname
            telemetry_ingest(token=token, payload={
                "batch_id": f"rollout-test-{next(_batch):06d}", "contract": 2,
                "node_samples": [{"time": timezone.now().isoformat(), "node": hostname, "cpu_util": 0.2,
                                  "mem_util": 0.2, "load1": 0.5, "in_flight": 0, "threads": 10, "modules": []}]})

    def tick(self, rollout: Rollout | None = None) -> None:
        """One round: the controller, the agents, the telemetry, the drain controller."""
        if rollout is not None:
            controller.rollout_advance(rollout.pk)
        else:
            controller.rollouts_advance()
        for hostname in list(self.keys):
            self.pool.poll(hostname)
        self.report_idle()
        drains_advance()
        from apps.vectors.advance import runs_advance

        runs_advance()

    def run_until(self, rollout: Rollout, states: tuple[str, ...], *, rounds: int = 200,
                  each: Callable[[int], None] | None = None) -> Rollout:
        for i in range(rounds):
            self.tick(rollout)
            if each is not None:
                each(i)
            rollout.refresh_from_db()
            if rollout.state in states:
                return rollout
        raise AssertionError(f"rollout #{rollout.pk} is {rollout.state} after {rounds} rounds: {rollout.waiting_for}")


def serving_over_time(tier: Tier, *, since_event: int = 0) -> list[int]:
    """The tier's active nodes after each recorded node state change (from the audit trail, in order),
    from audit event ``since_event`` on (the count then, and after each change)."""
    nodes = dict(Node.objects.filter(tier=tier).values_list("pk", "state"))
    events = list(AuditEvent.objects.filter(target_type="node", target_id__in=[str(pk) for pk in nodes])
                  .filter(Q(action__startswith="node.") | Q(action__startswith="drain."))
                  .exclude(changes__state=None).order_by("pk").values_list("pk", "target_id", "changes"))
    # Replay from the states before the first change.
    first: dict[int, str] = {}
    for _, target_id, changes in events:
        state = changes.get("state") if isinstance(changes, dict) else None
        if isinstance(state, list) and len(state) == 2:
            first.setdefault(int(target_id), state[0])
    current = {pk: first.get(pk, s) for pk, s in nodes.items()}
    counts: list[int] = []
    for event_pk, target_id, changes in events:
        if event_pk > since_event and not counts:
            counts.append(sum(1 for s in current.values() if s == NodeState.ACTIVE))
        state = changes.get("state") if isinstance(changes, dict) else None
        if isinstance(state, list) and len(state) == 2:
            current[int(target_id)] = state[1]
            if event_pk > since_event:
                counts.append(sum(1 for s in current.values() if s == NodeState.ACTIVE))
    return counts or [sum(1 for s in current.values() if s == NodeState.ACTIVE)]


@pytest.fixture
def rfleet(db: Any) -> RolloutFleet:
    return RolloutFleet()


