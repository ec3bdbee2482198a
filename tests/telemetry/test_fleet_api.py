"""/api/v1/fleet/: snapshot and series read from rollups and latest state."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

import apps.telemetry.selectors.common as telemetry_common
import apps.telemetry.selectors.snapshot as telemetry_snapshot
from apps.inventory.models import Tier
from apps.telemetry.models import ModuleSample, NodeRollup, NodeSample, StageSample, TierSample, WindowSummary
from apps.telemetry.rollups.rollup import telemetry_rollup
from apps.telemetry.selectors.snapshot import nodes_not_seen
from apps.telemetry.selectors.traffic import observed_traffic
from tests.telemetry.conftest import Fleet
from tests.telemetry.test_rollups import ingest_minute, minute_ago


@pytest.fixture
def rolled(fleet: Fleet) -> Fleet:
    ingest_minute(fleet, minute_ago(2))
    telemetry_rollup()
    # Dashboards never read raw samples: with them gone the numbers stay.
    for model in (NodeSample, ModuleSample, TierSample, StageSample):
        model.objects.all().delete()
    return fleet


def test_it_shows_the_fleet_snapshot(rolled: Fleet, viewer_api: Any) -> None:
    r = viewer_api.get("/api/v1/fleet/snapshot/?minutes=5")
    assert r.status_code == 200
    tiers = {t["kind"]: t for t in r.json()["tiers"]}
    hybrid = tiers["hybrid_inference"]
    assert hybrid["active"] == 2 and hybrid["by_state"] == {"active": 2} and hybrid["total"] == 2
    window = hybrid["window"]
    assert window["minutes"] == 5
    assert window["cpu_util_mean"] == pytest.approx(0.5)
    assert window["module_util_mean"] == pytest.approx(0.4)
    assert window["queue_depth_mean"] == pytest.approx(20.0)
    assert window["requests_per_s"] == pytest.approx(5.0)
    intent = next(s for s in window["stages"] if s["stage"] == "intent")
    assert (intent["count"], intent["p50_ms"], intent["p99_ms"]) == (400, 175.0, 450.0)
    # the minute is two minutes old: the gateway's newest sample is not fresh "now" figures only when older
    # than fresh_s; the latest-state rows survive the raw samples' deletion
    assert hybrid["queue_depth"] == 30
    assert tiers["access_logic"]["window"]["cpu_util_mean"] is None
    assert "nodes" not in r.json()
    with_nodes = viewer_api.get("/api/v1/fleet/snapshot/?nodes=true").json()
    rows = [dict(zip(with_nodes["node_fields"], row, strict=True)) for row in with_nodes["nodes"]]
    assert sorted(row["hostname"] for row in rows) == ["n-a", "n-b"]


def test_it_serves_queue_depth_and_stage_latency_series(rolled: Fleet, viewer_api: Any) -> None:
    r = viewer_api.get("/api/v1/fleet/series/queue-depth/?tier=hybrid_inference&minutes=10")
    assert r.status_code == 200
    [tier] = r.json()["tiers"]
    assert [(p["queue_depth_mean"], p["queue_depth_max"], p["arrivals_per_s"]) for p in tier["points"]] == [
        (20.0, 30, 5.0)]
    assert tier["latest"]["queue_depth"] == 30
    r = viewer_api.get("/api/v1/fleet/series/stage-latency/?tier=hybrid_inference&minutes=10")
    stages = {s["stage"]: s["points"] for s in r.json()["tiers"][0]["stages"]}
    assert len(stages) == 6
    assert [p["p50_ms"] for p in stages["intent"]] == [175.0]
    assert stages["planning"] == []


def test_it_serves_a_nodes_history(rolled: Fleet, viewer_api: Any) -> None:
    r = viewer_api.get(f"/api/v1/fleet/nodes/{rolled.node_a.pk}/history/?minutes=10")
    assert r.status_code == 200
    body = r.json()
    assert body["latest"]["cpu_util"] == pytest.approx(0.9)
    assert [p["cpu_util_max"] for p in body["points"]] == [pytest.approx(0.9)]
    a0 = next(m for m in body["modules"] if m["serial"] == "A-0")
    assert a0["points"][0]["link_width_min"] == 2
    assert a0["latest"]["temp_c"] == 70.0


@pytest.mark.parametrize("query", ["minutes=0", "minutes=abc", "tier=gpu", "minutes=99999"])
def test_it_rejects_bad_series_parameters(fleet: Fleet, viewer_api: Any, query: str) -> None:
    assert viewer_api.get(f"/api/v1/fleet/series/queue-depth/?{query}").status_code == 400


def test_it_keeps_the_fleet_views_from_strangers(fleet: Fleet, anon_api: Any) -> None:
    assert anon_api.get("/api/v1/fleet/snapshot/").status_code in (401, 403)
    assert fleet.client(fleet.key_a).get("/api/v1/fleet/snapshot/").status_code in (401, 403)


def test_it_reports_observed_traffic_for_the_planner(rolled: Fleet) -> None:
    traffic = observed_traffic(window_s=900)
    assert traffic is not None
    assert traffic["requests_per_s"] == pytest.approx(5.0)
    assert traffic["input_tokens_per_request"] == pytest.approx(10.0)
    assert traffic["output_tokens_per_request"] == pytest.approx(2.0)
    assert traffic["per_tier"]["hybrid_inference"]["requests_per_s"] == pytest.approx(5.0)


def test_it_has_no_observed_traffic_without_data(fleet: Fleet) -> None:
    assert observed_traffic(window_s=900) is None


def test_it_lists_nodes_not_seen(rolled: Fleet) -> None:
    silent = {n.hostname for n in nodes_not_seen(seconds=60)}
    assert "n-b" in silent and "n-a" not in silent


def test_the_default_window_is_computed_by_the_rollup_run_and_read_while_fresh(fleet: Fleet) -> None:
    ingest_minute(fleet, minute_ago(2))
    now = timezone.now()
    telemetry_rollup(now=now)
    summary = WindowSummary.objects.get(minutes=15)
    assert summary.computed_at == now and summary.since == telemetry_common.window_start(now, 15)
    hybrid = Tier.objects.get(kind="hybrid_inference")

    def window(at: dt.datetime, tier_id: int | None = None) -> dict[str, Any]:
        snap = telemetry_snapshot.fleet_snapshot(now=at, tier_id=tier_id)
        return next(t for t in snap["tiers"] if t["id"] == hybrid.pk)["window"]

    live = telemetry_snapshot._window_figures(telemetry_common.window_start(now, 15), None)[hybrid.pk]
    read = window(now + dt.timedelta(seconds=30))
    assert read["cpu_util_mean"] == pytest.approx(0.5) and read["since"] == summary.since.isoformat()
    assert {k: read[k] for k in live} == live
    assert window(now, tier_id=hybrid.pk)["cpu_util_mean"] == pytest.approx(0.5)
    # A rollup written since is seen at the next run; a stale summary is not read at all.
    NodeRollup.objects.filter(node__tier=hybrid).update(cpu_util_mean=0.9)
    assert window(now + dt.timedelta(seconds=30))["cpu_util_mean"] == pytest.approx(0.5)
    later = now + telemetry_snapshot.SUMMARY_MAX_AGE + dt.timedelta(seconds=1)
    assert window(later)["cpu_util_mean"] == pytest.approx(0.9)
    telemetry_rollup(now=later)
    assert window(later)["cpu_util_mean"] == pytest.approx(0.9)
    assert WindowSummary.objects.count() == 1
