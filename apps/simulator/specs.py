"""What the fleet simulation is given: the nodes, modules, external endpoints and faults as plain
values (``selectors.world`` builds them from the database), the engine's configuration, the
fleet's tiers and stages, and a stable pseudo-random number for choices that must not depend on
call order. Plain Python, no I/O; node and module states are the inventory's."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from apps.inventory.choices import ModuleState, NodeState

ACCESS = "access_logic"
HYBRID = "hybrid_inference"
EXTERNAL = "external_large_model"
CPU_STAGES = ("perception", "planning", "tool_call", "memory_update")
MODEL_STAGES = ("intent", "generation")
STAGES = ("perception", "intent", "planning", "tool_call", "generation", "memory_update")
# The spread (lognormal sigma) of each stage's latency.
SIGMA = {"perception": 0.3, "planning": 0.35, "tool_call": 0.5, "memory_update": 0.3, "intent": 0.25,
         "generation": 0.3}


@dataclass(frozen=True)
class ModuleSpec:
    serial: str
    state: str = ModuleState.HEALTHY.value
    slot: int = 0
    driver_version: str = ""
    framework_version: str = ""
    module_type: str = ""
    lanes: int = 4
    tops: float = 40.0
    power_w: float = 10.0


@dataclass(frozen=True)
class NodeSpec:
    hostname: str
    tier: str
    state: str = NodeState.ACTIVE.value
    cpu_cores: int = 8
    cpu_clock_ghz: float = 3.0
    pcie_lanes: int = 16
    modules: tuple[ModuleSpec, ...] = ()


@dataclass(frozen=True)
class EndpointSpec:
    """An external endpoint of tier 3 the gateway sends large-model requests to."""

    name: str
    quota_rpm: int = 600
    quota_tpm: int = 1_000_000


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    node: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0  # real epoch seconds


@dataclass
class Config:
    speed: float = 60.0             # simulated seconds per real second (traffic curve only)
    peak_rps: float = 300.0         # requests/s at the busiest hour, before bursts
    start_hour: float = 9.0         # simulated hour of day at the start
    rounds_min: int = 5             # request rounds per agent task
    rounds_max: int = 35
    cpu_s_per_request: float = 0.25  # access-node core-seconds per request at 3 GHz
    external_share: float = 0.1     # share of generation sent to the external large model
    input_tokens: int = 500
    output_tokens: int = 100
    burst_chance_per_hour: float = 0.25
    draws: int = 240                # latency draws per stage summary
    latency_histograms: bool = True  # node samples carry a histogram of every request's stage latency


def stable_random(*parts: object) -> float:
    """A stable pseudo-random number in [0, 1) from the parts (no global state)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64
