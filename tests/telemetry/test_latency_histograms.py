"""Stage latency percentiles that merge exactly (contract 3): nodes send log-bucket histograms,
the rollups add bucket counts in SQL per node and per tier, and node, tier and fleet
percentiles over a minute or an hour come out within the sketch's relative accuracy of the
exact percentiles of the raw latencies."""

from __future__ import annotations

import datetime as dt
import math
import random
from typing import Any

import pytest
from django.utils import timezone

import apps.telemetry.selectors.latency as telemetry_latency
import apps.telemetry.selectors.series as telemetry_series
import apps.telemetry.selectors.snapshot as snapshot
from agent.cp_agent import sketch as agent_sketch
from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.inventory.choices import NodeState, TierKind
from apps.inventory.models import Node, Rack, Tier
from apps.telemetry import sketch
from apps.telemetry.models import LatencySample, NodeLatencyRollup, TierLatencyRollup
from apps.telemetry.rollups.rollup import telemetry_rollup
from tests.telemetry.conftest import Fleet, node_sample, stage_sample, stored

URL = "/api/v1/telemetry/"
A = sketch.RELATIVE_ACCURACY
QS = (0.5, 0.95, 0.99)


def exact(values: list[float], q: float) -> float:
    """The percentile the buckets approximate: the latency of rank floor(q (n - 1)) (0-based)."""
    ordered = sorted(values)
    return ordered[math.floor(q * (len(ordered) - 1))]


def within(approx: float | None, truth: float) -> bool:
    # The figures are rounded to 0.01 ms for the API; the rest is the sketch's bound.
    return approx is not None and abs(approx - truth) <= A * truth + 0.005 + 1e-9 * truth


def skewed(rng: random.Random, median_ms: float, sigma: float, n: int) -> list[float]:
    """A lognormal body with a heavy tail: 4 % of the requests 10-20x slower, spread wider."""
    out = []
    for _ in range(n):
        if rng.random() < 0.04:
            out.append(median_ms * rng.uniform(10, 20) * math.exp(rng.gauss(0, 1.2)))
        else:
            out.append(median_ms * math.exp(rng.gauss(0, sigma)))
    return out


def test_the_mapping_keeps_every_value_within_its_relative_accuracy() -> None:
    rng = random.Random(7)
    for _ in range(20000):
        x = math.exp(rng.uniform(math.log(sketch.MIN_MS), math.log(sketch.MAX_MS)))
        i = sketch.index(x)
        assert sketch.GAMMA ** (i - 1) < x * (1 + 1e-12) and x <= sketch.GAMMA**i * (1 + 1e-12)
        assert abs(sketch.value(i) - x) <= A * x * (1 + 1e-9)
    assert sketch.index(0) == sketch.index(sketch.MIN_MS) == sketch.MIN_INDEX
    assert (sketch.histogram([5e9]) or {})["offset"] == sketch.MAX_INDEX
    assert sketch.histogram([]) is None
    h = sketch.histogram([1.0, 1.0, 1.015, 2.0])
    assert h is not None and h["offset"] == 0 and sum(h["counts"]) == 4


def test_the_agent_maps_latencies_to_the_same_buckets() -> None:
    rng = random.Random(3)
    assert (agent_sketch.GAMMA, agent_sketch.MIN_INDEX, agent_sketch.MAX_INDEX) == (
        sketch.GAMMA, sketch.MIN_INDEX, sketch.MAX_INDEX)
    values = [math.exp(rng.uniform(-8, 17)) for _ in range(5000)] + [0.0, sketch.MIN_MS, 1.0, sketch.MAX_MS, 1e9]
    assert [agent_sketch.index(x) for x in values] == [sketch.index(x) for x in values]
    assert agent_sketch.histogram(values) == sketch.histogram(values)


class Setup:
    """Three nodes: n-a and n-b in the hybrid tier, n-c in the access tier; each with its own
    skewed latencies for intent (and n-c for perception)."""

    def __init__(self, fleet: Fleet) -> None:
        access = Tier.objects.get(kind=TierKind.ACCESS_LOGIC)
        self.node_c = Node.objects.create(hostname="n-c", rack=Rack.objects.get(name="rack-t"), slot=3,
                                          tier=access, state=NodeState.ACTIVE)
        _, self.key_c = agent_token_issue(kind=AgentKind.NODE, node=self.node_c, actor="test")
        self.fleet, self.access = fleet, access
        self.keys = {"n-a": fleet.key_a, "n-b": fleet.key_b, "n-c": self.key_c}
        # (node, stage) -> minute -> raw latencies
        self.raw: dict[tuple[str, str], dict[dt.datetime, list[float]]] = {}

    def send(self, minutes: list[dt.datetime], shapes: dict[tuple[str, str], tuple[float, float]]) -> None:
        """Per node, per minute: two node samples (at :10 and :40), each with a histogram per stage,
        sent as contract-3 batches through the real ingest path (API, buffer, writer)."""
        rng = random.Random(11)
        for node, key in self.keys.items():
            samples = []
            for minute in minutes:
                for sec in (10, 40):
                    latency = {}
                    for (n, stage), (median, sigma) in shapes.items():
                        if n != node:
                            continue
                        values = skewed(rng, median, sigma, rng.randint(150, 350))
                        self.raw.setdefault((node, stage), {}).setdefault(minute, []).extend(values)
                        latency[stage] = sketch.histogram(values)
                    samples.append(node_sample(node, minute + dt.timedelta(seconds=sec), latency=latency))
            r = self.fleet.client(key).post(URL, {"batch_id": f"lat-{node}-0001", "contract": 3,
                                                  "node_samples": samples}, format="json")
            assert r.status_code == 202, r.content
        stored()

    def values(self, nodes: set[str], stage: str, minutes: set[dt.datetime] | None = None) -> list[float]:
        return [x for (n, s), by_minute in self.raw.items() if n in nodes and s == stage
                for m, xs in by_minute.items() if minutes is None or m in minutes for x in xs]


def _check(figures: list[dict[str, Any]], expected: dict[str, list[float]]) -> None:
    by_stage = {f["stage"]: f for f in figures}
    assert set(by_stage) == set(expected)
    for stage, values in expected.items():
        f = by_stage[stage]
        assert f["exact"] is True and f["count"] == len(values)
        for q, key in zip(QS, ("p50_ms", "p95_ms", "p99_ms"), strict=True):
            assert within(f[key], exact(values, q)), (stage, key, f[key], exact(values, q))
        assert within(f["max_ms"], max(values))


def test_node_tier_and_fleet_percentiles_are_within_the_sketch_error(fleet: Fleet, viewer_api: Any) -> None:
    setup = Setup(fleet)
    now = timezone.now()
    top = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=1)
    minutes = [top - dt.timedelta(minutes=m) for m in (0, 7, 19, 33, 48)]
    # Different per node: n-a fast and narrow, n-b five times slower and wide, n-c another tier.
    setup.send(minutes, {("n-a", "intent"): (40.0, 0.35), ("n-b", "intent"): (200.0, 0.9),
                         ("n-c", "intent"): (12.0, 0.5), ("n-c", "perception"): (3.0, 0.6)})
    assert LatencySample.objects.count() == 2 * len(minutes) * 4
    telemetry_rollup()
    assert NodeLatencyRollup.objects.count() == len(minutes) * 4
    assert TierLatencyRollup.objects.count() == len(minutes) * 3  # hybrid intent, access intent + perception

    hybrid, access = fleet.tier, setup.access
    ids = {"n-a": fleet.node_a.pk, "n-b": fleet.node_b.pk, "n-c": setup.node_c.pk}
    hour = (now.replace(second=0, microsecond=0) - dt.timedelta(minutes=59), top + dt.timedelta(minutes=1))
    one = (minutes[2], minutes[2] + dt.timedelta(minutes=1))
    for (since, until), wanted in ((hour, None), (one, {minutes[2]})):
        for node, node_id in ids.items():
            stages = ("intent", "perception") if node == "n-c" else ("intent",)
            _check(telemetry_latency.latency_percentiles(since=since, until=until, node_id=node_id),
                   {s: setup.values({node}, s, wanted) for s in stages})
        _check(telemetry_latency.latency_percentiles(since=since, until=until, tier_id=hybrid.pk),
               {"intent": setup.values({"n-a", "n-b"}, "intent", wanted)})
        _check(telemetry_latency.latency_percentiles(since=since, until=until, tier_id=access.pk),
               {s: setup.values({"n-c"}, s, wanted) for s in ("intent", "perception")})
        _check(telemetry_latency.latency_percentiles(since=since, until=until),
               {"intent": setup.values({"n-a", "n-b", "n-c"}, "intent", wanted),
                "perception": setup.values({"n-c"}, "perception", wanted)})

    # The merge of the two hybrid nodes is not the mean of their p95s: the exact figure is what counts.
    both = setup.values({"n-a", "n-b"}, "intent")
    mean_of_p95 = (exact(setup.values({"n-a"}, "intent"), 0.95) + exact(setup.values({"n-b"}, "intent"), 0.95)) / 2
    assert not within(mean_of_p95, exact(both, 0.95))

    # The dashboard's fleet chart: per minute, every tier's buckets added.
    fleet_series = telemetry_series.fleet_stage_latency_series(minutes=60, now=now)
    intent = next(s["points"] for s in fleet_series["stages"] if s["stage"] == "intent")
    assert [p["minute"] for p in intent] == sorted(minutes)
    point = next(p for p in intent if p["minute"] == minutes[2])
    _check([{"stage": "intent", **point}], {"intent": setup.values({"n-a", "n-b", "n-c"}, "intent", {minutes[2]})})

    # The API: fleet, tier and node over the hour, and a day, as the selector reads them.
    client = viewer_api
    r = client.get("/api/v1/fleet/latency/?minutes=60")
    assert r.status_code == 200, r.content
    assert r.json()["scope"] == "fleet"
    _check(r.json()["stages"], {"intent": setup.values({"n-a", "n-b", "n-c"}, "intent"),
                                "perception": setup.values({"n-c"}, "perception")})
    r = client.get("/api/v1/fleet/latency/?minutes=1440&tier=hybrid_inference")
    _check(r.json()["stages"], {"intent": both})
    r = client.get(f"/api/v1/fleet/latency/?minutes=60&node={fleet.node_b.pk}")
    _check(r.json()["stages"], {"intent": setup.values({"n-b"}, "intent")})
    assert client.get("/api/v1/fleet/latency/?node=999999").status_code == 404  # a well-formed id, no node
    assert client.get("/api/v1/fleet/latency/?node=n-1").status_code == 400
    # With a tier too, the node must be in it: another tier's node is not found there.
    assert client.get(f"/api/v1/fleet/latency/?node={fleet.node_b.pk}&tier=access_logic").status_code == 404
    r = client.get(f"/api/v1/fleet/latency/?minutes=60&node={fleet.node_b.pk}&tier={fleet.node_b.tier.kind}")
    assert r.json()["scope"] == "node" and r.json()["node"] == fleet.node_b.pk


def test_the_snapshot_and_series_use_histograms_where_there_are_any(fleet: Fleet) -> None:
    setup = Setup(fleet)
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=2)
    setup.send([minute], {("n-a", "intent"): (40.0, 0.35), ("n-b", "intent"): (200.0, 0.9)})
    # The gateway's summaries (contract 1/2): the only source for generation, replaced for intent.
    gw = fleet.client(fleet.key_gw)
    r = gw.post(URL, {"batch_id": "lat-gw-00001", "stage_samples": [
        stage_sample("intent", minute + dt.timedelta(seconds=30)),
        stage_sample("generation", minute + dt.timedelta(seconds=30))]}, format="json")
    assert r.status_code == 202, r.content
    stored()
    telemetry_rollup()
    tier = next(t for t in snapshot.fleet_snapshot(now=now, window_minutes=15)["tiers"] if t["id"] == fleet.tier.pk)
    stages = {s["stage"]: s for s in tier["window"]["stages"]}
    values = setup.values({"n-a", "n-b"}, "intent")
    assert stages["intent"]["exact"] is True and stages["intent"]["count"] == len(values)
    assert within(stages["intent"]["p95_ms"], exact(values, 0.95))
    assert stages["generation"]["exact"] is False and stages["generation"]["p95_ms"] == 310.0
    series = telemetry_series.stage_latency_series(tier=fleet.tier, minutes=10, now=now)
    points = {s["stage"]: s["points"] for s in series["tiers"][0]["stages"]}
    assert [p["exact"] for p in points["intent"]] == [True] and [p["exact"] for p in points["generation"]] == [False]
    assert within(points["intent"][0]["p99_ms"], exact(values, 0.99))


def test_the_fleet_chart_merges_histograms_only_where_every_tier_reporting_the_stage_sent_them(fleet: Fleet) -> None:
    setup = Setup(fleet)
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=2)
    setup.send([minute], {("n-a", "intent"): (40.0, 0.35), ("n-b", "intent"): (200.0, 0.9),
                          ("n-a", "generation"): (300.0, 0.4)})
    # The gateway: the hybrid tier's intent and generation, and the external model's generation,
    # which no node sends histograms for.
    at = minute + dt.timedelta(seconds=30)
    r = fleet.client(fleet.key_gw).post(URL, {"batch_id": "lat-gw-00002", "stage_samples": [
        stage_sample("intent", at), stage_sample("generation", at),
        stage_sample("generation", at, tier="external_large_model", count=40, p95_ms=2400.0, p99_ms=3100.0,
                         max_ms=3900.0)]}, format="json")
    assert r.status_code == 202, r.content
    stored()
    telemetry_rollup()
    series = telemetry_series.fleet_stage_latency_series(minutes=10, now=now)
    points = {s["stage"]: s["points"] for s in series["stages"]}
    [intent] = points["intent"]
    values = setup.values({"n-a", "n-b"}, "intent")
    assert intent["exact"] is True and intent["count"] == len(values) and within(intent["p95_ms"], exact(values, 0.95))
    # Generation: the hybrid tier's histograms alone would leave the large model's 40 calls out.
    [generation] = points["generation"]
    assert generation["exact"] is False and generation["count"] == 100 + 40 and generation["p95_ms"] == 2400.0
    # Per tier, the hybrid tier's own generation is its histograms'.
    series = telemetry_series.stage_latency_series(tier=fleet.tier, minutes=10, now=now)
    hybrid = {s["stage"]: s["points"] for s in series["tiers"][0]["stages"]}
    assert hybrid["generation"][0]["exact"] is True
    assert hybrid["generation"][0]["count"] == len(setup.values({"n-a"}, "generation"))


@pytest.mark.parametrize(("latency", "contract", "path", "message"), [
    ({"intent": {"offset": 10, "counts": [1]}}, 2, "node_samples[0].latency",
     "latency histograms need contract 3 or later (this batch speaks 2)"),
    ({"warp": {"offset": 10, "counts": [1]}}, 3, "node_samples[0].latency.warp",
     "unknown stage: one of perception, intent, planning, tool_call, generation, memory_update"),
    ({"intent": {"offset": -400, "counts": [1]}}, 3, "node_samples[0].latency.intent.offset",
     "must be at least -345 (a bucket index)"),
    ({"intent": {"offset": 800, "counts": [1] * 8}}, 3, "node_samples[0].latency.intent.counts",
     "reaches bucket 807; the last is 806"),
    ({"intent": {"offset": 1, "counts": [1, -2]}}, 3, "node_samples[0].latency.intent.counts[1]",
     "must be at least 0"),
    ({"intent": {"offset": 1, "counts": []}}, 3, "node_samples[0].latency.intent.counts",
     "must be a non-empty list of counts"),
    ({"intent": [1, 2]}, 3, "node_samples[0].latency.intent", "must be an object {offset, counts}"),
])
def test_it_refuses_a_bad_histogram_naming_it(fleet: Fleet, latency: Any, contract: int, path: str,
                                              message: str) -> None:
    sample = node_sample("n-a", latency=latency)
    r = fleet.client(fleet.key_a).post(URL, {"batch_id": "lat-bad-0001", "contract": contract,
                                             "node_samples": [sample]}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {path: [message]}
    assert not LatencySample.objects.exists()


def test_a_version_2_batch_without_histograms_is_still_accepted(fleet: Fleet) -> None:
    r = fleet.client(fleet.key_a).post(URL, {"batch_id": "lat-v2-0001", "contract": 2, "node_samples": [
        node_sample("n-a", t=timezone.now() - dt.timedelta(seconds=5), in_flight=None)]}, format="json")
    assert r.status_code == 202, r.content
    assert stored() == 1 and not LatencySample.objects.exists()
