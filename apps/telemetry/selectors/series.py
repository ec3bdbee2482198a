"""Chart series from the per-minute rollups: utilisation, queue depth, stage latency and a node's history,
binned so a series carries at most MAX_POINTS points."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.utils import timezone

from apps.inventory.models import Node, Tier
from apps.telemetry.choices import Stage
from apps.telemetry.models import ModuleRollup, ModuleStatus, NodeRollup, NodeStatus, TierStatus
from apps.telemetry.selectors.common import rounded, sql_rows, window_start
from apps.telemetry.selectors.latency import _BUCKETS, _percentile_rows


def utilisation_series(*, minutes: int, tier_id: int | None = None, now: dt.datetime | None = None
                       ) -> dict[int, dict[str, list[Any]]]:
    """Per tier and minute, from the rollups: mean node CPU and mean module utilisation.
    {tier id: {"cpu": [(minute, value)], "module": [(minute, value)]}}"""
    now = now or timezone.now()
    since = window_start(now, minutes)
    tier = "AND n.tier_id = %s" if tier_id is not None else ""
    params: list[Any] = [since] + ([tier_id] if tier_id is not None else [])
    out: dict[int, dict[str, list[Any]]] = {}
    for tid, minute, value in sql_rows(
            f"""SELECT n.tier_id, r.minute, avg(r.cpu_util_mean) FROM telemetry_noderollup r
                JOIN inventory_node n ON n.id = r.node_id WHERE r.minute >= %s {tier}
                GROUP BY n.tier_id, r.minute ORDER BY r.minute""", params):
        out.setdefault(tid, {"cpu": [], "module": []})["cpu"].append((minute, rounded(value, 3)))
    for tid, minute, value in sql_rows(
            f"""SELECT n.tier_id, r.minute, avg(r.util_mean) FROM telemetry_modulerollup r
                JOIN inventory_node n ON n.id = r.node_id WHERE r.minute >= %s {tier}
                GROUP BY n.tier_id, r.minute ORDER BY r.minute""", params):
        out.setdefault(tid, {"cpu": [], "module": []})["module"].append((minute, rounded(value, 3)))
    return out


def _tier_filter(tier: Tier | None) -> list[Tier]:
    return [tier] if tier is not None else list(Tier.objects.order_by("level"))


# The most points a chart series carries: a longer range is merged into bins of whole minutes in SQL
# (the 24 h range: 4-minute bins), so neither the database nor Python handles a row per minute.
MAX_POINTS = 360


def series_step(minutes: int) -> int:
    """Minutes per point of a series over ``minutes``."""
    return max(1, -(-minutes // MAX_POINTS))


def queue_depth_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per tier, per bin of ``series_step(minutes)`` minutes (aligned on the window's start): queue depth
    mean (weighted by samples) and max, arrivals and completions per second (summed over the bin's
    seconds); and the newest queue depth."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    step = series_step(minutes)
    tiers = list(_tier_filter(tier))
    points: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for tid, minute, mean, mx, arrivals, completions, window_s in sql_rows(
            """SELECT tier_id, date_bin(%s, minute, %s) AS bin,
                      CASE WHEN sum(samples) > 0 THEN sum(queue_depth_mean * samples) / sum(samples)
                           ELSE avg(queue_depth_mean) END,
                      max(queue_depth_max), sum(arrivals), sum(completions), sum(window_s)
               FROM telemetry_tierrollup WHERE minute >= %s AND tier_id = ANY(%s)
               GROUP BY tier_id, bin ORDER BY tier_id, bin""",
            [dt.timedelta(minutes=step), since, since, [t.pk for t in tiers]]):
        points[tid].append(
            {"minute": minute, "queue_depth_mean": rounded(mean, 2), "queue_depth_max": mx,
             "arrivals_per_s": rounded(float(arrivals) / window_s, 3) if window_s else None,
             "completions_per_s": rounded(float(completions) / window_s, 3) if window_s else None})
    statuses = {s.tier_id: s for s in TierStatus.objects.filter(tier__in=tiers)}
    out = []
    for t in tiers:
        status = statuses.get(t.pk)
        latest = {"time": status.time, "queue_depth": status.queue_depth} if status else None
        out.append({"tier": t.kind, "points": points.get(t.pk, []), "latest": latest})
    return {"minutes": minutes, "step_minutes": step, "tiers": out}


def _stage_points(tier_ids: list[int], since: dt.datetime, step: int, *, by_tier: bool
                  ) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """Points per (tier id, or 0 for every tier merged, stage), per bin of ``step`` minutes from
    ``since``: from the histograms' bucket counts where a bin has any (``exact`` true), else from
    the gateway's summaries (``exact`` false). Merged over the tiers, a stage's bin takes the
    histograms only when every tier the summaries report it for sent histograms too (the external
    tier's generation has no nodes to send any: merging only the hybrid tier's buckets would leave
    the large model's calls out of the fleet's generation figure)."""
    width = dt.timedelta(minutes=step)
    key = "tier_id" if by_tier else "0"
    points: dict[tuple[int, str], dict[dt.datetime, dict[str, Any]]] = defaultdict(dict)
    summarised: dict[tuple[str, dt.datetime], set[int]] = {}  # the tiers whose summaries report a stage's bin
    for tid, stage, minute, count, p50, p95, p99, mx, tiers in sql_rows(
            f"""SELECT {key} AS key, stage, date_bin(%s, minute, %s) AS bin, sum(count),
                      CASE WHEN sum(count) > 0 THEN sum(p50_ms * count) / sum(count) ELSE avg(p50_ms) END,
                      max(p95_ms), max(p99_ms), max(max_ms), array_agg(DISTINCT tier_id)
               FROM telemetry_stagerollup WHERE minute >= %s AND tier_id = ANY(%s)
               GROUP BY key, stage, bin""",
            [width, since, since, tier_ids]):
        points[(tid, stage)][minute] = {"minute": minute, "count": int(count), "p50_ms": rounded(p50, 2),
                                        "p95_ms": rounded(p95, 2), "p99_ms": rounded(p99, 2), "max_ms": rounded(mx, 2),
                                        "exact": False}
        summarised[(stage, minute)] = set(tiers)
    sent: dict[tuple[str, dt.datetime], set[int]] = defaultdict(set)  # the tiers whose nodes sent histograms
    if not by_tier:
        for stage, minute, tid in sql_rows(
                """SELECT DISTINCT stage, date_bin(%s, minute, %s), tier_id FROM telemetry_tierlatencyrollup
                   WHERE minute >= %s AND tier_id = ANY(%s)""", [width, since, since, tier_ids]):
            sent[(stage, minute)].add(tid)
    for tid, minute, figures in _percentile_rows(
            _BUCKETS.format(key=f"r.{key}" if by_tier else "0", bin="date_bin(%s, r.minute, %s)",
                            table="telemetry_tierlatencyrollup", where="r.minute >= %s AND r.tier_id = ANY(%s)"),
            [width, since, since, tier_ids]):
        stage = figures.pop("stage")
        if not by_tier and not summarised.get((stage, minute), set()) <= sent[(stage, minute)]:
            continue  # a tier without histograms reports this stage: the summaries' merge covers them all
        points[(tid, stage)][minute] = {"minute": minute, **figures}
    return {k: [p for _, p in sorted(by_minute.items())] for k, by_minute in points.items()}


def stage_latency_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per tier and stage, per bin of ``series_step(minutes)`` minutes: count, p50, p95, p99 and max.
    From the nodes' latency histograms where a bin has any (``exact`` true: the bin's bucket counts
    added in SQL, each percentile within 1 %); else from the gateway's summaries (``exact`` false:
    count summed, p50 the count-weighted mean of the minutes' p50, p95/p99/max the largest of the
    minutes', as a StageRollup merges its windows)."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    step = series_step(minutes)
    tiers = list(_tier_filter(tier))
    points = _stage_points([t.pk for t in tiers], since, step, by_tier=True)
    out = [{"tier": t.kind, "stages": [{"stage": s, "points": points.get((t.pk, s), [])} for s in Stage.values]}
           for t in tiers]
    return {"minutes": minutes, "step_minutes": step, "tiers": out}


def fleet_stage_latency_series(*, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """As ``stage_latency_series``, with every tier merged per stage (a stage may run in more than one
    tier): the histograms' bucket counts of all tiers added (exact) where every tier reporting the
    stage sent them, else the summaries merged."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    step = series_step(minutes)
    points = _stage_points(list(Tier.objects.values_list("pk", flat=True)), since, step, by_tier=False)
    return {"minutes": minutes, "step_minutes": step,
            "stages": [{"stage": s, "points": points.get((0, s), [])} for s in Stage.values]}


def node_history(*, node: Node, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """A node's per-minute history and latest state, with its modules'."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    status = NodeStatus.objects.filter(node=node).first()
    points = [
        {"minute": r.minute, "cpu_util_mean": rounded(r.cpu_util_mean), "cpu_util_max": rounded(r.cpu_util_max),
         "mem_util_mean": rounded(r.mem_util_mean), "load1_mean": rounded(r.load1_mean, 2),
         "in_flight_mean": rounded(r.in_flight_mean, 2), "in_flight_max": r.in_flight_max}
        for r in NodeRollup.objects.filter(node_id=node.pk, minute__gte=since).order_by("minute")
    ]
    module_points: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for m in ModuleRollup.objects.filter(node_id=node.pk, minute__gte=since).order_by("minute"):
        module_points[m.module_id].append(
            {"minute": m.minute, "util_mean": rounded(m.util_mean), "temp_c_max": rounded(m.temp_c_max, 1),
             "power_w_mean": rounded(m.power_w_mean, 2), "link_width_min": m.link_width_min,
             "link_width_expected": m.link_width_expected, "ecc_corrected": m.ecc_corrected_max,
             "ecc_uncorrected": m.ecc_uncorrected_max, "errors": m.errors_max})
    module_status = {s.module_id: s for s in ModuleStatus.objects.filter(node=node)}
    modules = []
    for module in node.modules.order_by("slot"):
        ms = module_status.get(module.pk)
        modules.append({
            "id": module.pk, "serial": module.serial, "slot": module.slot,
            "latest": None if ms is None else {
                "time": ms.time, "util": ms.util, "temp_c": ms.temp_c, "power_w": ms.power_w,
                "link_width": ms.link_width, "link_width_expected": ms.link_width_expected,
                "ecc_corrected": ms.ecc_corrected, "ecc_uncorrected": ms.ecc_uncorrected, "errors": ms.errors},
            "points": module_points.get(module.pk, []),
        })
    return {
        "node": {"id": node.pk, "hostname": node.hostname, "tier": node.tier.kind, "state": node.state},
        "minutes": minutes,
        "latest": None if status is None else {
            "time": status.time, "last_seen": status.last_seen, "cpu_util": status.cpu_util,
            "mem_util": status.mem_util, "load1": status.load1, "in_flight": status.in_flight,
            "threads": status.threads},
        "points": points,
        "modules": modules,
    }
