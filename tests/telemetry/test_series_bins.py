"""Long chart ranges are merged into bins of whole minutes in SQL; the merge is checked against
the rollup rows it covers."""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

import pytest
from rest_framework.renderers import JSONRenderer

import apps.telemetry.selectors.series as telemetry_series
from apps.inventory.choices import TierKind
from apps.inventory.models import Tier
from apps.telemetry.api.serializers import QueueDepthSeriesSerializer, StageLatencySeriesSerializer
from apps.telemetry.choices import Stage
from apps.telemetry.models import StageRollup, TierRollup

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 30, 12, 0, 30, tzinfo=dt.UTC)


def test_the_step_keeps_every_range_under_the_point_budget() -> None:
    assert [telemetry_series.series_step(m) for m in (15, 60, 360, 361, 1440, 7 * 1440)] == [1, 1, 1, 2, 4, 28]
    for minutes in (15, 60, 360, 1440, 7 * 1440):
        assert minutes / telemetry_series.series_step(minutes) <= telemetry_series.MAX_POINTS


def _rows(tier: Tier, minutes: int, end: dt.datetime = NOW) -> tuple[list[TierRollup], list[StageRollup]]:
    rng = random.Random(7)
    end = end.replace(second=0, microsecond=0)
    queue, stages = [], []
    for k in range(minutes):
        minute = end - dt.timedelta(minutes=k)
        if k % 7 == 3:
            continue  # a minute without telemetry
        samples = rng.randint(1, 6)
        queue.append(TierRollup(tier=tier, minute=minute, samples=samples, window_s=10.0 * samples,
                                queue_depth_mean=rng.uniform(0, 50), queue_depth_max=rng.randint(50, 90),
                                queue_depth_last=3, arrivals=rng.randint(0, 900), completions=rng.randint(0, 900),
                                input_tokens=0, output_tokens=0))
        for stage in (Stage.INTENT, Stage.GENERATION):
            p50 = rng.uniform(1, 40)
            stages.append(StageRollup(tier=tier, stage=stage, minute=minute, count=rng.choice([0, 5, 40, 300]),
                                      p50_ms=p50, p95_ms=p50 * 2, p99_ms=p50 * 3, max_ms=p50 * 4))
    TierRollup.objects.bulk_create(queue)
    StageRollup.objects.bulk_create(stages)
    return queue, stages


def _bins(rows: list[Any], since: dt.datetime, step: int) -> dict[dt.datetime, list[Any]]:
    out: dict[dt.datetime, list[Any]] = {}
    for r in rows:
        if r.minute >= since:
            start = since + dt.timedelta(minutes=(r.minute - since) // dt.timedelta(minutes=step) * step)
            out.setdefault(start, []).append(r)
    return dict(sorted(out.items()))


def test_a_24_hour_series_is_merged_into_4_minute_bins_that_match_the_rows() -> None:
    tier = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    queue, stages = _rows(tier, 1440 + 30)  # and rows older than the range, which stay out
    since = NOW.replace(second=0) - dt.timedelta(minutes=1439)

    series = telemetry_series.queue_depth_series(tier=tier, minutes=1440, now=NOW)
    assert series["step_minutes"] == 4
    points = series["tiers"][0]["points"]
    expected = _bins(queue, since, 4)
    assert [p["minute"] for p in points] == list(expected) and len(points) == 360
    for point, rows in zip(points, expected.values(), strict=True):
        samples = sum(r.samples for r in rows)
        assert point["queue_depth_mean"] == pytest.approx(
            sum(r.queue_depth_mean * r.samples for r in rows) / samples, abs=0.006)
        assert point["queue_depth_max"] == max(r.queue_depth_max for r in rows)
        seconds = sum(r.window_s for r in rows)
        assert point["arrivals_per_s"] == pytest.approx(sum(r.arrivals for r in rows) / seconds, abs=0.0006)
        assert point["completions_per_s"] == pytest.approx(sum(r.completions for r in rows) / seconds, abs=0.0006)

    latency = telemetry_series.stage_latency_series(tier=tier, minutes=1440, now=NOW)
    assert latency["step_minutes"] == 4
    by_stage = {s["stage"]: s["points"] for s in latency["tiers"][0]["stages"]}
    assert by_stage[Stage.PLANNING] == []
    for stage in (Stage.INTENT, Stage.GENERATION):
        expected = _bins([r for r in stages if r.stage == stage], since, 4)
        assert [p["minute"] for p in by_stage[stage]] == list(expected)
        for point, rows in zip(by_stage[stage], expected.values(), strict=True):
            count = sum(r.count for r in rows)
            p50 = (sum(r.p50_ms * r.count for r in rows) / count if count
                   else sum(r.p50_ms for r in rows) / len(rows))
            assert point["count"] == count
            assert point["p50_ms"] == pytest.approx(p50, abs=0.006)
            assert point["p95_ms"] == pytest.approx(max(r.p95_ms for r in rows), abs=0.006)
            assert point["max_ms"] == pytest.approx(max(r.max_ms for r in rows), abs=0.006)


def test_an_hour_keeps_one_point_per_minute_with_the_rows_values(viewer_api: Any) -> None:
    tier = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    queue, _ = _rows(tier, 60)
    series = telemetry_series.queue_depth_series(tier=tier, minutes=60, now=NOW)
    assert series["step_minutes"] == 1
    rows = sorted(queue, key=lambda r: r.minute)
    points = series["tiers"][0]["points"]
    assert [p["minute"] for p in points] == [r.minute for r in rows]
    assert [p["queue_depth_mean"] for p in points] == [round(r.queue_depth_mean, 2) for r in rows]


def test_the_api_says_how_many_minutes_a_point_covers(viewer_api: Any) -> None:
    body = viewer_api.get("/api/v1/fleet/series/stage-latency/?minutes=1440").json()
    assert body["minutes"] == 1440 and body["step_minutes"] == 4 and len(body["tiers"]) == 3
    body = viewer_api.get("/api/v1/fleet/series/queue-depth/?minutes=60").json()
    assert body["step_minutes"] == 1


def test_the_series_responses_are_what_their_serializers_describe(viewer_api: Any) -> None:

    tier = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    _rows(tier, 1440, end=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2))  # the requests read up to now
    for url, serializer, selector in [
            ("/api/v1/fleet/series/queue-depth/", QueueDepthSeriesSerializer, telemetry_series.queue_depth_series),
            ("/api/v1/fleet/series/stage-latency/", StageLatencySeriesSerializer,
             telemetry_series.stage_latency_series)]:
        response = viewer_api.get(f"{url}?minutes=1440")
        data = selector(tier=None, minutes=1440)
        assert any(t["points"] if "points" in t else any(s["points"] for s in t["stages"]) for t in data["tiers"])
        # The same values; PostgreSQL writes a whole double without ".0" (80, not 80.0), as JSON allows.
        assert response.json() == json.loads(JSONRenderer().render(serializer(data).data))
