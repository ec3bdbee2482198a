"""Fixtures: two hybrid nodes with modules, their agent keys and the gateway key."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.inventory.choices import FormFactor, NodeState, TierKind
from apps.inventory.models import Module, ModuleType, Node, Rack, Tier
from apps.telemetry.store.raw import telemetry_store_pending


class Fleet:
    def __init__(self) -> None:
        rack = Rack.objects.create(name="rack-t")
        hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
        mtype = ModuleType.objects.create(vendor="Axon", model="AX-T", form_factor=FormFactor.M2,
                                          int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)
        self.tier = hybrid
        self.node_a = Node.objects.create(hostname="n-a", rack=rack, slot=1, tier=hybrid, state=NodeState.ACTIVE)
        self.node_b = Node.objects.create(hostname="n-b", rack=rack, slot=2, tier=hybrid, state=NodeState.ACTIVE)
        self.mod_a = [Module.objects.create(serial=f"A-{i}", module_type=mtype, node=self.node_a, slot=i)
                      for i in range(2)]
        self.mod_b = [Module.objects.create(serial="B-0", module_type=mtype, node=self.node_b, slot=0)]
        self.loose = Module.objects.create(serial="LOOSE-1", module_type=mtype)
        _, self.key_a = agent_token_issue(kind=AgentKind.NODE, node=self.node_a, actor="test")
        _, self.key_b = agent_token_issue(kind=AgentKind.NODE, node=self.node_b, actor="test")
        _, self.key_gw = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor="test")

    def client(self, key: str) -> APIClient:
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
        return c


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return Fleet()


def stored() -> int:
    """Run the writer's passes until the buffer is empty (what ``manage.py telemetry_writer``
    does continuously); returns the number of batches stored."""
    total = 0
    while (n := telemetry_store_pending().batches):
        total += n
    return total


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def node_sample(node: str, t: dt.datetime | None = None, serials: list[str] | None = None, **over: Any) -> dict:
    sample: dict[str, Any] = {
        "time": iso(t or timezone.now()), "node": node, "cpu_util": 0.4, "mem_util": 0.3, "load1": 2.0,
        "in_flight": 3, "threads": 120,
        "modules": [
            {"serial": s, "util": 0.5, "temp_c": 55.0, "power_w": 9.5, "link_width": 4, "link_width_expected": 4,
             "ecc_corrected": 0, "ecc_uncorrected": 0, "errors": 0}
            for s in (serials or [])
        ],
    }
    sample.update(over)
    return sample


def tier_sample(t: dt.datetime | None = None, **over: Any) -> dict:
    sample = {"time": iso(t or timezone.now()), "tier": "hybrid_inference", "queue_depth": 12, "arrivals": 340,
              "completions": 330, "input_tokens": 170000, "output_tokens": 34000, "window_s": 10}
    sample.update(over)
    return sample


def stage_sample(stage: str = "intent", t: dt.datetime | None = None, **over: Any) -> dict:
    sample = {"time": iso(t or timezone.now()), "tier": "hybrid_inference", "stage": stage, "window_s": 10,
              "count": 100, "p50_ms": 120.0, "p95_ms": 310.0, "p99_ms": 480.0, "max_ms": 610.0}
    sample.update(over)
    return sample
