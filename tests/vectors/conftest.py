"""Fixtures: the onnx INT8 cases (collected once), a small fleet with agent keys, and an
in-process agent that takes its commands and fetches vectors through the real API."""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from typing import Any

import pytest
from rest_framework.test import APIClient

from agent.cp_agent.vectors import VectorRunner
from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.inventory.choices import CombinationState, FormFactor, NodeState, TierKind
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
from apps.vectors.models import Suite
from apps.vectors.services import suite_import
from apps.vectors.sources import VectorSpec, onnx_node_cases
from tests.browser.conftest import browser_page, chromium_browser, demo_fleet  # noqa: F401  (browser fixtures)


@cache
def int8_specs() -> tuple[VectorSpec, ...]:
    return tuple(onnx_node_cases())


@pytest.fixture
def int8_suite(db: Any) -> Suite:
    suite, _ = suite_import(name="onnx-int8", specs=int8_specs(), actor="test")
    return suite


class Fleet:
    def __init__(self) -> None:
        self.tier, _ = Tier.objects.get_or_create(kind=TierKind.HYBRID_INFERENCE,
                                                  defaults={"name": "Hybrid inference", "level": 2})
        self.rack = Rack.objects.create(name="rack-v", power_budget_w=5000)
        self.mtype = ModuleType.objects.create(vendor="Axon", model="AX-V", form_factor=FormFactor.M2,
                                               int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)
        self.driver = DriverRelease.objects.create(vendor="Axon", version="2.3.1")
        self.framework = FrameworkRelease.objects.create(name="axon-runtime", version="1.18.0")
        self.pinned = VersionCombination.objects.create(module_type=self.mtype, driver=self.driver,
                                                        framework=self.framework, state=CombinationState.PINNED)
        self.new_driver = DriverRelease.objects.create(vendor="Axon", version="2.4.0")
        self.candidate = VersionCombination.objects.create(module_type=self.mtype, driver=self.new_driver,
                                                           framework=self.framework)
        self.keys: dict[str, str] = {}
        self.runners: dict[str, VectorRunner] = {}

    def node(self, hostname: str, *, state: str = NodeState.ACTIVE, modules: int = 1, rack: str = "") -> Node:
        where = Rack.objects.get_or_create(name=rack, defaults={"power_budget_w": 5000})[0] if rack else self.rack
        node = Node.objects.create(hostname=hostname, rack=where, slot=Node.objects.count() + 1, tier=self.tier,
                                   state=state)
        for i in range(modules):
            Module.objects.create(serial=f"{hostname}-m{i}", module_type=self.mtype, node=node, slot=i,
                                  driver_version="2.3.1", framework_version="1.18.0")
        _, self.keys[hostname] = agent_token_issue(kind=AgentKind.NODE, node=node, actor="test")
        return node

    def client(self, hostname: str) -> APIClient:
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Agent {self.keys[hostname]}")
        return c

    def agent_poll(self, hostname: str, *, perturb_for: Any = None, installs: list[dict[str, Any]] | None = None
                   ) -> list[tuple[str, str]]:
        """One pass of the node's agent: take its commands, answer run_vectors (fetching by hash
        through the API) and install_versions, ack each. Returns (kind, status) per command."""
        client = self.client(hostname)
        commands = client.get("/api/v1/agent/commands/", {"wait": 0}).json()
        if isinstance(commands, dict):
            commands = commands.get("results", [])

        def fetch(sha: str) -> dict[str, Any]:
            response = client.get(f"/api/v1/agent/vectors/{sha}/")
            assert response.status_code == 200, response.content
            return dict(response.json())

        runner = self.runners.setdefault(hostname, VectorRunner(fetch))
        done = []
        for command in commands:
            if command["kind"] == "run_vectors":
                status, result = runner.run(command["args"], perturb_for=perturb_for)
            elif command["kind"] == "install_versions":
                if installs is not None:
                    installs.append(command["args"])
                status, result = "succeeded", {"hook": None, "versions": command["args"]}
            else:
                status, result = "succeeded", {"hook": None}
            ack = client.post(f"/api/v1/agent/commands/{command['id']}/ack/", {"status": status, "result": result},
                              format="json")
            assert ack.status_code == 200, ack.content
            done.append((command["kind"], status))
        return done


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return Fleet()
