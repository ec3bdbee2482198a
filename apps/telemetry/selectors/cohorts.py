"""Cohorts of nodes: rollouts compare the nodes they upgraded with the ones not reached yet."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, F, Max, Sum

from apps.telemetry.choices import Stage
from apps.telemetry.models import StageNodeRollup
from apps.telemetry.selectors.common import iso, rounded


def stage_cohorts(*, cohorts: dict[str, list[int]], since: dt.datetime, until: dt.datetime
                  ) -> dict[str, dict[str, dict[str, Any]]]:
    """Per cohort (a name and its node ids) and stage, over the per-node stage rollups of the minutes
    from ``since`` to ``until`` (both included, whole minutes): requests, errors and their rate, p95
    as the request-weighted mean of the node-minutes' p95 (and the worst node-minute's), and how many
    nodes and minutes reported. A stage no node of the cohort reported is absent (one query per cohort)."""
    lo, hi = since.replace(second=0, microsecond=0), until
    out: dict[str, dict[str, dict[str, Any]]] = {}
    order = {st: i for i, st in enumerate(Stage.values)}
    for name, node_ids in cohorts.items():
        rows = (StageNodeRollup.objects.filter(node_id__in=node_ids, minute__gte=lo, minute__lte=hi, count__gt=0)
                .values("stage").annotate(requests=Sum("count"), failed=Sum("errors"),
                                          weighted=Sum(F("p95_ms") * F("count")), worst=Max("p95_ms"),
                                          nodes=Count("node_id", distinct=True),
                                          minutes=Count("minute", distinct=True)))
        stages: dict[str, dict[str, Any]] = {}
        for r in sorted(rows, key=lambda r: order.get(r["stage"], 99)):
            requests = int(r["requests"])
            stages[r["stage"]] = {
                "requests": requests, "errors": int(r["failed"]), "error_rate": rounded(r["failed"] / requests, 6),
                "p95_ms": rounded(r["weighted"] / requests, 2), "p95_max_ms": rounded(r["worst"], 2),
                "nodes": int(r["nodes"]), "minutes": int(r["minutes"])}
        out[name] = stages
    return out


def stage_cohort_series(*, cohorts: dict[str, list[int]], since: dt.datetime, until: dt.datetime
                        ) -> dict[str, list[dict[str, Any]]]:
    """Per cohort, per minute from ``since`` to ``until``: each stage's request-weighted p95 (ms) and
    the cohort's error rate over all stages, oldest first (one query per cohort)."""
    lo = since.replace(second=0, microsecond=0)
    out: dict[str, list[dict[str, Any]]] = {}
    for name, node_ids in cohorts.items():
        points: dict[dt.datetime, dict[str, Any]] = {}
        for r in (StageNodeRollup.objects.filter(node_id__in=node_ids, minute__gte=lo, minute__lte=until,
                                                 count__gt=0)
                  .values("minute", "stage").annotate(requests=Sum("count"), failed=Sum("errors"),
                                                      weighted=Sum(F("p95_ms") * F("count")))
                  .order_by("minute")):
            p = points.setdefault(r["minute"], {"minute": r["minute"], "stages": {}, "requests": 0, "errors": 0})
            p["stages"][r["stage"]] = rounded(r["weighted"] / r["requests"], 2)
            p["requests"] += int(r["requests"])
            p["errors"] += int(r["failed"])
        out[name] = [{"minute": iso(p["minute"]), "p95_ms": p["stages"],
                      "error_rate": rounded(p["errors"] / p["requests"], 6) if p["requests"] else None}
                     for p in points.values()]
    return out
