"""Inputs of the health sweep (apps/health): a few set-based reads over latest state and rollups."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db.models import Min

from apps.telemetry.models import (
    EndpointRollup,
    ModuleRollup,
    ModuleStatus,
    NodeRollup,
    NodeStatus,
    StageRollup,
    TierRollup,
)


def node_status_rows() -> dict[int, dict[str, Any]]:
    """Every node's latest state: {node id: {last_seen, cpu_util, in_flight}} (one query)."""
    return {r["node_id"]: dict(r) for r in NodeStatus.objects.values("node_id", "last_seen", "cpu_util", "in_flight")}


def module_status_rows() -> dict[int, dict[str, Any]]:
    """Every module's latest state: {module id: {last_seen, util, temp_c, ...}} (one query)."""
    return {r["module_id"]: dict(r) for r in ModuleStatus.objects.values(
        "module_id", "node_id", "last_seen", "util", "temp_c", "power_w", "link_width", "link_width_expected",
        "ecc_corrected", "ecc_uncorrected", "errors")}


def node_cpu_minutes(*, since: dt.datetime) -> dict[int, list[tuple[dt.datetime, float, float]]]:
    """Per node, its minute rollups since ``since``: [(minute, cpu mean, cpu max)] oldest first (one query)."""
    out: dict[int, list[tuple[dt.datetime, float, float]]] = defaultdict(list)
    for node_id, minute, mean, top in (NodeRollup.objects.filter(minute__gte=since).order_by("minute")
                                       .values_list("node_id", "minute", "cpu_util_mean", "cpu_util_max")):
        out[node_id].append((minute, mean, top))
    return dict(out)


def module_counter_baselines(*, since: dt.datetime) -> dict[int, dict[str, Any]]:
    """Per module, the counters at the start of the window: the smallest per-minute maxima since
    ``since`` (counters only grow between reboots) and the first minute that holds them (one query)."""
    rows = ModuleRollup.objects.filter(minute__gte=since).values("module_id").annotate(
        first_minute=Min("minute"), ecc_corrected=Min("ecc_corrected_max"),
        ecc_uncorrected=Min("ecc_uncorrected_max"), errors=Min("errors_max"))
    return {r["module_id"]: dict(r) for r in rows}


def tier_queue_minutes(*, since: dt.datetime) -> dict[int, list[tuple[dt.datetime, float]]]:
    """Per tier, its mean queue depth per minute since ``since``, oldest first (one query)."""
    out: dict[int, list[tuple[dt.datetime, float]]] = defaultdict(list)
    for tier_id, minute, mean in (TierRollup.objects.filter(minute__gte=since).order_by("minute")
                                  .values_list("tier_id", "minute", "queue_depth_mean")):
        out[tier_id].append((minute, mean))
    return dict(out)


def endpoint_minutes(*, since: dt.datetime) -> dict[int, list[dict[str, Any]]]:
    """Per external endpoint, its per-minute figures since ``since`` (minute, window_s, requests, errors,
    tokens, p95_ms), oldest first (one query)."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for endpoint_id, minute, window_s, requests, errors, tokens, p95 in (
            EndpointRollup.objects.filter(minute__gte=since).order_by("minute")
            .values_list("endpoint_id", "minute", "window_s", "requests", "errors", "tokens", "p95_ms")):
        out[endpoint_id].append({"minute": minute, "window_s": window_s, "requests": requests, "errors": errors,
                                 "tokens": tokens, "p95_ms": p95})
    return dict(out)


def stage_p95_minutes(*, since: dt.datetime) -> dict[int, dict[str, list[float]]]:
    """Per tier and stage, the per-minute p95 latencies (ms) since ``since``, oldest first (one query)."""
    out: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for tier_id, stage, p95 in (StageRollup.objects.filter(minute__gte=since, count__gt=0).order_by("minute")
                                .values_list("tier_id", "stage", "p95_ms")):
        out[tier_id][stage].append(p95)
    return {t: dict(s) for t, s in out.items()}
