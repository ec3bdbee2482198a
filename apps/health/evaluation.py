"""What one sweep works on: the subjects a check judges, each judgement (``Evaluation``), and the
sweep's safety limits. The sweep (``sweep.py``) makes them and the actions (``actions.py``) read
them."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from apps.health import hysteresis
from apps.health.inputs import Outcome
from apps.operations import budget

_BUDGET = budget.Limits()


@dataclass(frozen=True)
class Limits:
    """The sweep's safety limits and timings (settings HEALTH_*)."""

    # The remediation budget every automated actor shares (``apps.operations.budget``):
    max_unavailable: float = _BUDGET.max_unavailable  # share of a tier's serving nodes automation may hold at once
    actions_per_hour: float = _BUDGET.actions_per_hour  # new holds per tier per hour: max(3, this share of its nodes)
    fleet_max_unavailable: float = _BUDGET.fleet_max_unavailable  # share of the fleet's serving nodes, at once
    breaker: float = 0.20  # more than this share of a tier failing one check: no action, one fleet finding
    breaker_min_nodes: int = 3  # ... and at least this many nodes (one node of a small tier is not a storm)
    cooldown_s: float = 300  # a resolved finding's hold is released after this
    flap_window_s: float = 1800  # a finding raised again this soon after resolving reopens
    flap_after: int = 2  # reopened this often: flapping (needs flap_clear_factor × K passes to resolve)
    flap_clear_factor: int = 6
    unknown_after: int = 30  # evaluations in a row a check could not judge (not for silence): a finding


def limits() -> Limits:
    return Limits(**{k: type(v)(getattr(settings, f"HEALTH_{k.upper()}", v))
                     for k, v in Limits().__dict__.items()})


def budget_limits(lim: Limits) -> budget.Limits:
    """The budget's share of the sweep's limits (the same settings the other actors read)."""
    return budget.Limits(max_unavailable=lim.max_unavailable, actions_per_hour=lim.actions_per_hour,
                         fleet_max_unavailable=lim.fleet_max_unavailable)


@dataclass
class Subject:
    kind: str
    key: str
    node_id: int | None = None
    module_id: int | None = None
    tier_id: int | None = None
    label: str = ""


@dataclass
class Evaluation:
    check: str
    subject: Subject
    outcome: Outcome
    severity: str
    mem: hysteresis.Memory = field(default_factory=hysteresis.Memory)
