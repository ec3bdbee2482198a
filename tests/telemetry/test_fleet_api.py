"""/api/v1/fleet/: snapshot and series read from rollups and latest state."""

from __future__ import annotations

from typing import Any

import pytest

from apps.telemetry.models import ModuleSample, NodeSample, StageSample, TierSample
from apps.telemetry.selectors import nodes_not_seen, observed_traffic
from apps.telemetry.services import telemetry_rollup
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
    assert hybrid["nodes"]["active"] == 2
    assert hybrid["cpu_util"]["mean"] == pytest.approx(0.5)
    assert hybrid["module_util"]["mean"] == pytest.approx(0.4)
    assert hybrid["queue_depth"]["now"] == 30
    assert hybrid["queue_depth"]["mean"] == pytest.approx(20.0)
    assert hybrid["requests_per_s"] == pytest.approx(5.0)
    intent = next(s for s in hybrid["stages"] if s["stage"] == "intent")
    assert (intent["count"], intent["p50_ms"], intent["p99_ms"]) == (400, 175.0, 450.0)
    assert tiers["access_logic"]["cpu_util"]["mean"] is None


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
