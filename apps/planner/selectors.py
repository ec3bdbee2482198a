"""Reads for the what-if: installed capacity from the inventory, traffic from telemetry."""

from __future__ import annotations

import importlib
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count, Prefetch, Q

from apps.common.errors import CONFLICT
from apps.inventory.choices import ModuleState, NodeState, TierKind
from apps.inventory.models import Module, Node, Tier
from apps.operations import capacity
from apps.operations import selectors as operations_selectors
from apps.planner.formulas import Number, exact, fmt
from apps.planner.what_if import (
    AutoscalerView,
    Demand,
    NodeCapacity,
    TierInstalled,
    WhatIfParams,
    WhatIfResult,
    plan_against_installed,
)

# Modules that serve requests; quarantined and failed ones do not count as capacity.
SERVING_MODULE_STATES = (ModuleState.HEALTHY, ModuleState.DEGRADED)


def installed_capacity() -> list[TierInstalled]:
    """Per tier: active and standby nodes (not the gray pool's) with their CPU and serving modules' INT8 TOPS."""
    modules = Prefetch(
        "modules",
        queryset=Module.objects.filter(state__in=SERVING_MODULE_STATES).select_related("module_type"),
        to_attr="serving_modules",
    )
    nodes = (
        Node.objects.filter(state__in=(NodeState.ACTIVE, NodeState.STANDBY), gray=False)  # gray nodes never serve
        .only("hostname", "tier_id", "state", "cpu_cores", "cpu_clock_ghz")
        .prefetch_related(modules)
        .order_by("hostname")
    )
    by_tier: dict[int, dict[str, list[NodeCapacity]]] = {}
    for node in nodes:
        capacity = NodeCapacity(
            hostname=node.hostname,
            cpu_cores=node.cpu_cores,
            cpu_clock_ghz=node.cpu_clock_ghz,
            module_tops=tuple(m.module_type.int8_tops for m in node.serving_modules),  # type: ignore[attr-defined]
        )
        by_tier.setdefault(node.tier_id, {"active": [], "standby": []})[
            "active" if node.state == NodeState.ACTIVE else "standby"].append(capacity)
    out = []
    tiers = Tier.objects.annotate(endpoint_count=Count("endpoints", filter=Q(endpoints__enabled=True)))
    for tier in tiers.order_by("level"):
        groups = by_tier.get(tier.pk, {"active": [], "standby": []})
        out.append(TierInstalled(
            kind=tier.kind, name=tier.name, active=tuple(groups["active"]), standby=tuple(groups["standby"]),
            min_active_nodes=tier.min_active_nodes, max_active_nodes=tier.max_active_nodes,
            endpoints=tier.endpoint_count,  # type: ignore[attr-defined]
        ))
    return out


def observed_traffic(*, window_s: int) -> dict[str, Any] | None:
    """Telemetry's observed traffic, or None while telemetry has none (or is not installed)."""
    try:
        telemetry = importlib.import_module("apps.telemetry.selectors.traffic")
    except ImportError:
        return None
    reader = getattr(telemetry, "observed_traffic", None)
    if reader is None:
        return None
    traffic = reader(window_s=window_s)
    return traffic if isinstance(traffic, dict) else None


NO_TELEMETRY = "no telemetry yet; give your numbers"


def _finite_or_none(value: Any) -> Number | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        exact(value)
    except (ValueError, TypeError):
        return None
    return value if value >= 0 else None


def demand_resolve(
    *,
    window_s: int,
    requests_per_s: Number | None = None,
    concurrent_users: int | None = None,
    request_interval_s: Number | None = None,
    input_tokens: Number | None = None,
    output_tokens: Number | None = None,
) -> tuple[Demand, int | None]:
    """The demand to plan for: the caller's numbers, the rest from telemetry's observed traffic.

    Its explanation is the one sentence the page prints for the demand: each figure once, with
    where it came from.
    Raises ValidationError naming each missing number when telemetry has nothing to offer.
    """
    rate: Number | None = requests_per_s
    given: list[str] = []
    if concurrent_users is not None and request_interval_s is not None:
        rate = exact(concurrent_users) / exact(request_interval_s)
        given.append(f"{fmt(concurrent_users)} users ÷ {fmt(request_interval_s)} s = {fmt(rate)} req/s")
    elif requests_per_s is not None:
        given.append(f"{fmt(requests_per_s)} req/s given")
    if input_tokens is not None:
        given.append(f"{fmt(input_tokens)} input tokens per request given")
    if output_tokens is not None:
        given.append(f"{fmt(output_tokens)} output tokens per request given")
    if rate is not None and input_tokens is not None and output_tokens is not None:
        return Demand(rate, input_tokens, output_tokens, "user", "; ".join(given)), None

    traffic = observed_traffic(window_s=window_s)
    observed_rate = _finite_or_none((traffic or {}).get("requests_per_s"))
    if traffic is None or observed_rate is None:
        # Well-formed numbers, but the state has none to fill in: a 409 (CONFLICT) naming each.
        missing: dict[str, str] = {}
        if rate is None:
            missing["requests_per_s"] = f"{NO_TELEMETRY}: requests_per_s, or concurrent_users and request_interval_s"
        if input_tokens is None:
            missing["input_tokens"] = f"{NO_TELEMETRY}: input tokens per request"
        if output_tokens is None:
            missing["output_tokens"] = f"{NO_TELEMETRY}: output tokens per request"
        raise ValidationError({name: ValidationError(message, code=CONFLICT) for name, message in missing.items()})
    window = int(traffic.get("window_s") or window_s)
    observed: list[str] = []
    if rate is None:
        rate = observed_rate
        observed.append(f"{fmt(observed_rate)} req/s")

    def _tokens(given_value: Number | None, key: str, label: str) -> Number:
        if given_value is not None:
            return given_value
        value = _finite_or_none(traffic.get(key))
        if value is None:  # no requests in the window: tokens per request are undefined, and irrelevant
            value = 0
        observed.append(f"{fmt(value)} {label} tokens per request")
        return value

    in_tokens = _tokens(input_tokens, "input_tokens_per_request", "input")
    out_tokens = _tokens(output_tokens, "output_tokens_per_request", "output")
    source = "telemetry" if not given else "telemetry+user"
    text = f"observed over the last {window} s: " + ", ".join(observed)
    if given:
        text += "; " + "; ".join(given)
    return Demand(rate, in_tokens, out_tokens, source, text), window


def measured_loads() -> dict[str, capacity.TierLoad]:
    """Each array tier as measured now: the capacity guard's figures (utilisation, queue)."""
    return {tier.kind: operations_selectors.tier_load(tier=tier)
            for tier in Tier.objects.filter(kind__in=(TierKind.ACCESS_LOGIC, TierKind.HYBRID_INFERENCE))}


def autoscaler_views() -> dict[str, AutoscalerView]:
    """Each array tier's latest autoscaler decision that saw a queue (skips saw none)."""
    views = {}
    for kind in (TierKind.ACCESS_LOGIC, TierKind.HYBRID_INFERENCE):
        d = (operations_selectors.decision_list()
             .filter(tier__kind=kind, queue_depth__isnull=False, raw_desired__isnull=False).first())
        if d is not None and d.queue_depth is not None and d.raw_desired is not None:
            views[str(kind)] = AutoscalerView(
                current=d.current, queue_depth=d.queue_depth, target_per_node=d.target_queue_per_node,
                raw=d.raw_desired, desired=d.desired, dry_run=d.dry_run, as_of=(d.until or d.time).isoformat())
    return views


def what_if(*, window_s: int, params: WhatIfParams, **numbers: Any) -> tuple[WhatIfResult, int | None]:
    demand, window = demand_resolve(window_s=window_s, **numbers)
    return plan_against_installed(demand, params, installed_capacity(), measured=measured_loads(),
                                  capacity_params=operations_selectors.capacity_params(),
                                  autoscaler=autoscaler_views()), window
