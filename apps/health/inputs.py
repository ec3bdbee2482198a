"""What a health check judges and what it says: the views of one node, module, tier or external
endpoint the sweep gathers (``selectors.sweep_inputs``), the context a check may compare with,
and the ``Outcome`` it returns. Plain data, no Django, no I/O, like the checks (``checks.py``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from apps.health.choices import Status

PASS, WARN, FAIL, UNKNOWN = Status.PASS.value, Status.WARN.value, Status.FAIL.value, Status.UNKNOWN.value

@dataclass(frozen=True)
class Outcome:
    status: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    severity: str | None = None  # overrides the check's severity (e.g. an uncorrected ECC error)
    score: float = 0.0  # how bad: the finding keeps the evidence of its worst evaluation
    stale: bool = False  # unknown because the subject's telemetry stopped (the heartbeat's finding)


@dataclass
class NodeView:
    id: int
    hostname: str
    tier_id: int
    state: str
    age_s: float | None  # seconds since the last report, None: never reported
    cpu: float | None
    in_flight: int | None
    cpu_minutes: list[tuple[dt.datetime, float, float]]  # (minute, mean, max) oldest first
    module_utils: list[float]  # fresh latest utilisation of its serving modules
    modules: int
    overdue_drain: dict[str, Any] | None = None  # its drain, when the deadline passed with work in flight
    agent_version: str = ""  # what its agent says it is ('' : it has not said)
    agent_contract: int | None = None  # the newest contract its agent speaks (None: it does not say)


@dataclass
class ModuleView:
    id: int
    serial: str
    node_id: int
    tier_id: int
    node_state: str
    state: str
    capabilities: frozenset[str]
    rated_power_w: float
    lanes: int  # the module type's expected link width
    driver: str
    framework: str
    pinned: tuple[str, str] | None  # the type's pinned (driver, framework)
    age_s: float | None
    latest: dict[str, Any]  # ModuleStatus figures
    baseline: dict[str, Any] | None  # counters at the start of the window (rollups), with first_minute


@dataclass
class EndpointView:
    """An external endpoint of tier 3 (a GPU cluster or a cloud model API): not a node, never held."""

    id: int
    name: str
    tier_id: int
    quota_rpm: int  # requests per minute it allows
    quota_tpm: int  # tokens per minute it allows
    slo_ms: int  # its latency objective (p95)
    minutes: list[dict[str, Any]]  # the gateway's per-minute figures in the window, oldest first


@dataclass
class TierView:
    id: int
    name: str
    kind: str
    module_util: float | None  # mean latest utilisation of its serving modules
    modules: int
    queue_minutes: list[tuple[dt.datetime, float]]
    stage_p95: dict[str, list[float]]
    endpoints: list[EndpointView] = field(default_factory=list)  # its enabled external endpoints


@dataclass
class Context:
    """What a check may compare a subject with: now, the tier's median node (latest and per minute)."""

    now: dt.datetime
    stale_s: float
    tier_median_cpu: dict[int, float] = field(default_factory=dict)
    tier_median_cpu_max: dict[int, dict[dt.datetime, float]] = field(default_factory=dict)
    tier_median_cpu_mean: dict[int, dict[dt.datetime, float]] = field(default_factory=dict)
