"""Stage latency percentiles from the merged log-bucket histograms (contract 3), of a node, a tier or
the fleet."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.utils import timezone

from apps.inventory.models import Node, Tier
from apps.telemetry import sketch
from apps.telemetry.choices import Stage
from apps.telemetry.selectors.common import sql_rows, window_start

# Percentiles of merged log-bucket histograms, all in SQL. ``{source}`` yields (key, bin, stage, bucket,
# c) rows, one per bucket of each histogram merged; the counts are added per (key, bin, stage, bucket), and
# percentile q is the bucket holding the latency of rank floor(q (n - 1)) (0-based) among the n merged,
# as DDSketch answers. The caller maps buckets to ms (sketch.value).
_PERCENTILES = """
    WITH b AS (SELECT key, bin, stage, bucket, sum(c) AS c FROM ({source}) s GROUP BY key, bin, stage, bucket),
    r AS (SELECT key, bin, stage, bucket, sum(c) OVER (PARTITION BY key, bin, stage ORDER BY bucket) AS running,
                 sum(c) OVER (PARTITION BY key, bin, stage) AS total FROM b)
    SELECT key, bin, stage, max(total),
           min(bucket) FILTER (WHERE running > floor(0.5 * (total - 1))),
           min(bucket) FILTER (WHERE running > floor(0.95 * (total - 1))),
           min(bucket) FILTER (WHERE running > floor(0.99 * (total - 1))),
           max(bucket)
    FROM r GROUP BY key, bin, stage ORDER BY key, bin, stage"""


def _ms(bucket: int | None) -> float | None:
    return None if bucket is None else round(sketch.value(bucket), 2)


def _percentile_rows(source: str, params: list[Any]) -> list[tuple[Any, Any, dict[str, Any]]]:
    """(key, bin, figures) per key, bin and stage: count, p50/p95/p99 and max (the top bucket's value),
    each within sketch.RELATIVE_ACCURACY of the exact figure over every latency merged; ``exact`` true."""
    return [(key, bin_, {"stage": stage, "count": int(count), "p50_ms": _ms(p50), "p95_ms": _ms(p95),
                         "p99_ms": _ms(p99), "max_ms": _ms(top), "exact": True})
            for key, bin_, stage, count, p50, p95, p99, top in sql_rows(_PERCENTILES.format(source=source), params)]


def _percentiles(source: str, params: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    """Per key, per stage (in stage order), over the whole range."""
    order = {s: i for i, s in enumerate(Stage.values)}
    out: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for key, _bin, figures in _percentile_rows(source, params):
        out[key].append(figures)
    for items in out.values():
        items.sort(key=lambda d: order.get(d["stage"], 99))
    return out


_BUCKETS = ("SELECT {key} AS key, {bin} AS bin, r.stage, u.bucket, u.c FROM {table} r"
            " CROSS JOIN LATERAL unnest(r.buckets, r.counts) AS u(bucket, c) WHERE {where}")


def latency_percentiles(*, since: dt.datetime, until: dt.datetime, node_id: int | None = None,
                        tier_id: int | None = None) -> list[dict[str, Any]]:
    """Per stage over the minutes in [since, until): count, p50, p95, p99 and max of the latencies
    of one node (``node_id``), one tier (``tier_id``) or the whole fleet (neither), from the log-bucket
    histograms the nodes send: the per-minute bucket counts are added in SQL, so each percentile is
    within 1 % of the exact percentile of every latency in the range (``apps/telemetry/sketch.py``)."""
    where = "r.minute >= %s AND r.minute < %s"
    params: list[Any] = [since, until]
    if node_id is not None:
        table, where = "telemetry_nodelatencyrollup", f"{where} AND r.node_id = %s"
        params.append(node_id)
    elif tier_id is not None:
        table, where = "telemetry_tierlatencyrollup", f"{where} AND r.tier_id = %s"
        params.append(tier_id)
    else:
        table = "telemetry_tierlatencyrollup"
    return _percentiles(_BUCKETS.format(key="0", bin="0", table=table, where=where), params).get(0, [])


def latency_window(*, minutes: int, tier: Tier | None = None, node: Node | None = None,
                   now: dt.datetime | None = None) -> dict[str, Any]:
    """Stage latency percentiles of one node, one tier or the fleet over the last ``minutes`` whole
    minutes up to the current one (``latency_percentiles``)."""
    now = now or timezone.now()
    since = window_start(now, minutes)
    until = since + dt.timedelta(minutes=minutes)
    scope = "node" if node is not None else "tier" if tier is not None else "fleet"
    stages = latency_percentiles(since=since, until=until, node_id=node.pk if node is not None else None,
                                 tier_id=tier.pk if tier is not None else None)
    return {"scope": scope, "tier": tier.kind if tier is not None else None,
            "node": node.pk if node is not None else None, "minutes": minutes, "since": since, "until": until,
            "stages": stages}


def _latency_by_tier(since: dt.datetime, tier_id: int | None) -> dict[int, list[dict[str, Any]]]:
    """Per tier, per stage over the minutes from ``since``: the merged histograms' figures."""
    where = "r.minute >= %s"
    params: list[Any] = [since]
    if tier_id is not None:
        where = f"{where} AND r.tier_id = %s"
        params.append(tier_id)
    return _percentiles(_BUCKETS.format(key="r.tier_id", bin="0", table="telemetry_tierlatencyrollup",
                                        where=where), params)


def _with_histograms(summaries: list[dict[str, Any]], exact: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tier's stages: from the histograms where there are any, else the gateway's summaries
    (``exact`` false: a merge of per-window percentiles, an approximation)."""
    have = {d["stage"]: d for d in exact}
    order = {s: i for i, s in enumerate(Stage.values)}
    out = [*exact, *({**d, "exact": False} for d in summaries if d["stage"] not in have)]
    return sorted(out, key=lambda d: order.get(d["stage"], 99))
