"""A small fleet for fleet operations, and telemetry fed through the real ingest service."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.inventory.choices import CombinationState, NodeState, TierKind
from apps.inventory.models import (
    DriverRelease,
    FrameworkRelease,
    Module,
    ModuleType,
    Node,
    Rack,
    Tier,
    VersionCombination,
)
from apps.telemetry.ingest.receive import telemetry_ingest
from tests.browser.conftest import browser_page, chromium_browser, demo_fleet  # noqa: F401  (browser fixtures)

_batch = itertools.count(1)


class Fleet:
    def __init__(self) -> None:
        # get_or_create: transactional tests flush the tiers the migration made.
        self.tier, _ = Tier.objects.get_or_create(kind=TierKind.HYBRID_INFERENCE,
                                                  defaults={"name": "Hybrid inference", "level": 2})
        Tier.objects.filter(pk=self.tier.pk).update(min_active_nodes=0, max_active_nodes=8)
        self.tier.refresh_from_db()
        self.racks = [Rack.objects.create(name=f"rack-{i}", power_budget_w=1000) for i in (1, 2)]
        self.mtype = ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor="m2",
                                               int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)
        driver = DriverRelease.objects.create(vendor="Axon", version="2.3.1")
        framework = FrameworkRelease.objects.create(name="axon-runtime", version="1.18.0")
        VersionCombination.objects.create(module_type=self.mtype, driver=driver, framework=framework,
                                          state=CombinationState.PINNED)
        self.nodes: dict[str, Node] = {}
        self._tokens: dict[int, Any] = {}
        self._gateway: Any = None

    def node(self, hostname: str, *, rack: int = 0, state: str = NodeState.ACTIVE, modules: int = 2,
             tier: Tier | None = None, **fields: Any) -> Node:
        slot = Node.objects.filter(rack=self.racks[rack]).count() + 1
        node = Node.objects.create(hostname=hostname, rack=self.racks[rack], slot=slot, tier=tier or self.tier,
                                   state=state, **fields)
        for i in range(modules):
            Module.objects.create(serial=f"{hostname}-m{i}", module_type=self.mtype, node=node, slot=i,
                                  driver_version="2.3.1", framework_version="1.18.0")
        self.nodes[hostname] = node
        return node

    def report(self, node: Node, in_flight: int | None, *, at: dt.datetime | None = None) -> None:
        """The node agent reports ``in_flight`` (through the telemetry ingest service); None: unknown."""
        when = (at or timezone.now()).isoformat()
        self.send_sample(node, {"time": when, "node": node.hostname, "cpu_util": 0.3, "mem_util": 0.3,
                                "load1": 1.0, "in_flight": in_flight, "threads": 100, "modules": []})

    def report_holders(self, node: Node, in_flight: int | None, holders: list[dict[str, Any]] | None, *,
                       at: dt.datetime | None = None) -> None:
        """As ``report``, from an agent that lists the processes holding its modules (contract 4); None:
        this sample carries no list (the agent's read failed)."""
        sample: dict[str, Any] = {"time": (at or timezone.now()).isoformat(), "node": node.hostname,
                                  "cpu_util": 0.3, "mem_util": 0.3, "load1": 1.0, "in_flight": in_flight,
                                  "threads": 100, "modules": []}
        if holders is not None:
            sample["holders"] = holders
        self.send_sample(node, sample, contract=4)

    def send_sample(self, node: Node, sample: dict[str, Any], *, contract: int = 3) -> None:
        token = self._tokens.get(node.pk)
        if token is None:
            token, _ = agent_token_issue(kind=AgentKind.NODE, node=node, actor="test")
            self._tokens[node.pk] = token
        telemetry_ingest(token=token, payload={"batch_id": f"test-batch-{next(_batch):06d}", "contract": contract,
                                               "node_samples": [sample]})

    def gateway_key(self) -> str:
        _, key = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor="test")
        return key

    def queue(self, depth: int, *, at: dt.datetime | None = None) -> None:
        """The gateway reports the hybrid tier's queue depth."""
        if self._gateway is None:
            self._gateway, _ = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor="test")
        telemetry_ingest(token=self._gateway, payload={
            "batch_id": f"test-gw-{next(_batch):06d}",
            "tier_samples": [{"time": (at or timezone.now()).isoformat(), "tier": self.tier.kind,
                              "queue_depth": depth, "arrivals": 10, "completions": 10, "input_tokens": 100,
                              "output_tokens": 10, "window_s": 10}],
        })


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return Fleet()


def state_of(node: Node) -> str:
    node.refresh_from_db(fields=["state"])
    return node.state
