"""Chart series from the per-minute rollups: utilisation, queue depth, stage latency and a node's history,
binned so a series carries at most MAX_POINTS points."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

import msgspec
from django.utils import timezone

from apps.inventory.models import Node, Tier
from apps.telemetry import sketch
from apps.telemetry.choices import Stage
from apps.telemetry.models import ModuleRollup, ModuleStatus, NodeRollup, NodeStatus
from apps.telemetry.selectors.common import rounded, sql_rows, window_start
from apps.telemetry.selectors.latency import _BUCKETS, _PERCENTILES


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


# A series' points come out of PostgreSQL as JSON text, each figure rounded there: no row is turned into
# Python objects and back (2,160 points of a tier's 24 h stage latency). The text is put together with
# ``||`` rather than json_build_object/json_agg, which cost five times as much here.
_MINUTE = """'"' || to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '"'"""  # as the API writes it


def _round(sql: str, digits: int) -> str:
    """``sql`` (a double) rounded to ``digits`` decimals, half away from zero."""
    return f"round(({sql}) * 1e{digits}) / 1e{digits}"


def _number(sql: str) -> str:
    """A number's JSON text (PostgreSQL writes a double as its shortest exact form), or null."""
    return f"coalesce(({sql})::text, 'null')"


def _object(fields: dict[str, str]) -> str:
    """SQL of a JSON object's text, from each field's JSON text (SQL)."""
    parts = [f"""'{"{" if i == 0 else ","}"{name}":' || {value}""" for i, (name, value) in enumerate(fields.items())]
    return "(" + " || ".join(parts) + " || '}')"


def _array(point: str, order: str) -> str:
    """SQL of an aggregate: the JSON array of ``point`` (JSON text) ordered by ``order``."""
    return f"'[' || string_agg({point}, ',' ORDER BY {order}) || ']'"


def _points(texts: dict[Any, str], key: Any) -> msgspec.Raw:
    return msgspec.Raw(texts.get(key, "[]").encode())


def _decoded(body: bytes) -> dict[str, Any]:
    """A series' JSON as Python values, the points' minutes as datetimes (for the pages' charts)."""
    data: dict[str, Any] = msgspec.json.decode(body)
    for series in _point_lists(data):
        for point in series:
            point["minute"] = dt.datetime.fromisoformat(point["minute"])
    return data


def _point_lists(data: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Every list of points in a series: per tier, per stage of a tier, or per stage of the fleet."""
    out = []
    for group in [data, *data.get("tiers", [])]:
        if "points" in group:
            out.append(group["points"])
        out.extend(stage["points"] for stage in group.get("stages", []))
    return out


def queue_depth_series_json(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> bytes:
    """``queue_depth_series`` as the API's JSON, its points written by PostgreSQL."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    step = series_step(minutes)
    tiers = list(_tier_filter(tier))
    point = _object({"minute": _MINUTE.format("bin"), "queue_depth_mean": _number(_round("mean", 2)),
                     "queue_depth_max": _number("mx"),
                     "arrivals_per_s": _number(f"CASE WHEN window_s > 0 THEN {_round('arrivals / window_s', 3)} END"),
                     "completions_per_s": _number(
                         f"CASE WHEN window_s > 0 THEN {_round('completions / window_s', 3)} END")})
    ids = [t.pk for t in tiers]
    rows = {tid: (text, time, depth) for tid, text, time, depth in sql_rows(  # the newest queue depth beside
        f"""SELECT t.id, p.points, s.time, s.queue_depth FROM unnest(%s::int[]) AS t(id)
            LEFT JOIN (SELECT tier_id, {_array(point, "bin")} AS points
                       FROM (SELECT tier_id, date_bin(%s, minute, %s) AS bin,
                                    CASE WHEN sum(samples) > 0 THEN sum(queue_depth_mean * samples) / sum(samples)
                                         ELSE avg(queue_depth_mean) END AS mean,
                                    max(queue_depth_max) AS mx, sum(arrivals)::float8 AS arrivals,
                                    sum(completions)::float8 AS completions, sum(window_s) AS window_s
                             FROM telemetry_tierrollup WHERE minute >= %s AND tier_id = ANY(%s)
                             GROUP BY tier_id, bin) b
                       GROUP BY tier_id) p ON p.tier_id = t.id
            LEFT JOIN telemetry_tierstatus s ON s.tier_id = t.id""",
        [ids, dt.timedelta(minutes=step), since, since, ids])}
    out = []
    for t in tiers:
        text, time, depth = rows[t.pk]
        latest = {"time": time, "queue_depth": depth} if time is not None else None
        out.append({"tier": t.kind, "points": msgspec.Raw((text or "[]").encode()), "latest": latest})
    return msgspec.json.encode({"minutes": minutes, "step_minutes": step, "tiers": out})


def queue_depth_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per tier, per bin of ``series_step(minutes)`` minutes (aligned on the window's start): queue depth
    mean (weighted by samples) and max, arrivals and completions per second (summed over the bin's
    seconds); and the newest queue depth."""
    data = _decoded(queue_depth_series_json(tier=tier, minutes=minutes, now=now))
    for t in data["tiers"]:
        if t["latest"] is not None:
            t["latest"]["time"] = dt.datetime.fromisoformat(t["latest"]["time"])
    return data


def _stage_points(tier_ids: list[int], since: dt.datetime, step: int, *, by_tier: bool) -> dict[tuple[int, str], str]:
    """Points (JSON text) per (tier id, or 0 for every tier merged, stage), per bin of ``step`` minutes
    from ``since``: from the histograms' bucket counts where a bin has any (``exact`` true), else from
    the gateway's summaries (``exact`` false). Merged over the tiers, a stage's bin takes the
    histograms only when every tier the summaries report it for sent histograms too (the external
    tier's generation has no nodes to send any: merging only the hybrid tier's buckets would leave
    the large model's calls out of the fleet's generation figure)."""
    width = dt.timedelta(minutes=step)
    key = "tier_id" if by_tier else "0"
    histograms = _PERCENTILES.format(source=_BUCKETS.format(
        key=f"r.{key}" if by_tier else "0", bin="date_bin(%s, r.minute, %s)", table="telemetry_tierlatencyrollup",
        where="r.minute >= %s AND r.tier_id = ANY(%s)"))
    # Merged over the tiers: the tiers whose nodes sent histograms, per stage and bin.
    sent = "" if by_tier else """, sent AS (
        SELECT stage, date_bin(%s, minute, %s) AS bin, array_agg(DISTINCT tier_id) AS tiers
        FROM telemetry_tierlatencyrollup WHERE minute >= %s AND tier_id = ANY(%s) GROUP BY stage, bin)"""
    use_histogram = "h.key IS NOT NULL" + ("" if by_tier else
                                           " AND (s.key IS NULL OR s.tiers <@ coalesce(sent.tiers, '{}'))")
    gamma = sketch.GAMMA

    def ms(bucket: str) -> str:  # a bucket's representative latency (sketch.value), rounded as the API gives it
        return _number(_round(f"2 * power({gamma!r}::float8, {bucket}) / (1 + {gamma!r}::float8)", 2))

    histogram = _object({"minute": _MINUTE.format("h.bin"), "count": _number("h.count"), "p50_ms": ms("h.p50"),
                         "p95_ms": ms("h.p95"), "p99_ms": ms("h.p99"), "max_ms": ms("h.top"), "exact": "'true'"})
    summary = _object({"minute": _MINUTE.format("s.bin"), "count": _number("s.count"),
                       **{f"{name}_ms": _number(_round(f"s.{name}", 2)) for name in ("p50", "p95", "p99")},
                       "max_ms": _number(_round("s.mx", 2)), "exact": "'false'"})
    point = f"CASE WHEN {use_histogram} THEN {histogram} ELSE {summary} END"
    rows = sql_rows(
        f"""WITH s AS (
                SELECT {key} AS key, stage, date_bin(%s, minute, %s) AS bin, sum(count)::bigint AS count,
                       CASE WHEN sum(count) > 0 THEN sum(p50_ms * count) / sum(count) ELSE avg(p50_ms) END AS p50,
                       max(p95_ms) AS p95, max(p99_ms) AS p99, max(max_ms) AS mx, array_agg(DISTINCT tier_id) AS tiers
                FROM telemetry_stagerollup WHERE minute >= %s AND tier_id = ANY(%s)
                GROUP BY 1, stage, bin),
            h (key, bin, stage, count, p50, p95, p99, top) AS ({histograms}){sent},
            p AS (
                SELECT coalesce(h.key, s.key) AS key, coalesce(h.stage, s.stage) AS stage,
                       coalesce(h.bin, s.bin) AS bin, {point} AS point
                FROM s FULL JOIN h ON h.key = s.key AND h.stage = s.stage AND h.bin = s.bin
                {"" if by_tier else "LEFT JOIN sent ON sent.stage = coalesce(h.stage, s.stage) AND "
                                    "sent.bin = coalesce(h.bin, s.bin)"})
            SELECT key, stage, {_array("point", "bin")} FROM p GROUP BY key, stage""",
        [width, since, since, tier_ids] * (2 if by_tier else 3))
    return {(k, stage): text for k, stage, text in rows}


def stage_latency_series_json(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> bytes:
    """``stage_latency_series`` as the API's JSON, its points written by PostgreSQL."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    step = series_step(minutes)
    tiers = list(_tier_filter(tier))
    points = _stage_points([t.pk for t in tiers], since, step, by_tier=True)
    out = [{"tier": t.kind, "stages": [{"stage": s, "points": _points(points, (t.pk, s))} for s in Stage.values]}
           for t in tiers]
    return msgspec.json.encode({"minutes": minutes, "step_minutes": step, "tiers": out})


def stage_latency_series(*, tier: Tier | None, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """Per tier and stage, per bin of ``series_step(minutes)`` minutes: count, p50, p95, p99 and max.
    From the nodes' latency histograms where a bin has any (``exact`` true: the bin's bucket counts
    added in SQL, each percentile within 1 % of the exact one); else from the gateway's summaries (``exact`` false:
    count summed, p50 the count-weighted mean of the minutes' p50, p95/p99/max the largest of the
    minutes', as a StageRollup merges its windows). Figures rounded to 2 decimals in SQL."""
    return _decoded(stage_latency_series_json(tier=tier, minutes=minutes, now=now))


def fleet_stage_latency_series(*, minutes: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """As ``stage_latency_series``, with every tier merged per stage (a stage may run in more than one
    tier): the histograms' bucket counts of all tiers added (exact) where every tier reporting the
    stage sent them, else the summaries merged."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    step = series_step(minutes)
    points = _stage_points(list(Tier.objects.values_list("pk", flat=True)), since, step, by_tier=False)
    return _decoded(msgspec.json.encode({"minutes": minutes, "step_minutes": step, "stages": [
        {"stage": s, "points": _points(points, (0, s))} for s in Stage.values]}))


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
