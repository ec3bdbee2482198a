"""The simulated nodes send what a real node's agent sends from its latency log (contract 3): per
stage they serve, a log-bucket histogram of every request's latency. Played on the demo fleet through
the real ingest path and the rollups, node, tier and fleet percentiles come out within the sketch's
1 % of the exact percentiles of the raw latencies the simulator drew."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pytest
from django.utils import timezone

import apps.telemetry.selectors.latency as telemetry_latency
from apps.inventory.models import Node
from apps.simulator.demo import seed_demo
from apps.simulator.engine import Engine
from apps.simulator.specs import ACCESS, CPU_STAGES, HYBRID, MODEL_STAGES, Config
from tests.fleet_play import play_demo_hour
from tests.simulator.test_engine import T0, fleet
from tests.telemetry.test_latency_histograms import exact, within

QS = (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99))


def test_each_serving_node_sends_a_histogram_of_every_request_of_the_stages_it_serves() -> None:
    on = Engine(seed=4, config=Config(peak_rps=150, burst_chance_per_hour=0))
    off = Engine(seed=4, config=Config(peak_rps=150, burst_chance_per_hour=0, latency_histograms=False))
    on.recorded_latencies = {}
    sent: dict[tuple[str, str], int] = defaultdict(int)
    for k in range(6):
        a, b = on.step(T0 + k * 5.0, fleet(), []), off.step(T0 + k * 5.0, fleet(), [])
        # Their own draws: every other figure is what it was without the histograms.
        assert {h: {f: v for f, v in s.items() if f != "latency"} for h, s in a.node_samples.items()} \
            == b.node_samples and a.stage_samples == b.stage_samples and a.tier_samples == b.tier_samples
        for host, sample in a.node_samples.items():
            for stage, histogram in sample.get("latency", {}).items():
                sent[(host, stage)] += sum(histogram["counts"])
    latency = {h: s["latency"] for h, s in a.node_samples.items()}
    assert set(latency["a-0"]) == set(CPU_STAGES) and set(latency["h-0"]) == set(MODEL_STAGES)
    # A histogram counts every request the simulator drew a latency for, and nothing else.
    assert sent == {k: len(v) for k, v in on.recorded_latencies.items()}
    # The requests are the ones the gateway's summaries count: the access tier's at each CPU stage and
    # the hybrid tier's intent calls (each node's count rounded on its own).
    summaries = {(s["tier"], s["stage"]): s["count"] for s in a.stage_samples if "node" not in s}
    for stage in CPU_STAGES:
        access = sum(sum(latency[h][stage]["counts"]) for h in latency if h.startswith("a-"))
        assert abs(access - summaries[(ACCESS, stage)]) <= 3
    intent = sum(sum(latency[h]["intent"]["counts"]) for h in latency if h.startswith("h-"))
    assert abs(intent - summaries[(HYBRID, "intent")]) <= 4


@pytest.mark.django_db
def test_the_demo_fleets_percentiles_are_within_1pct_of_the_latencies_the_simulator_drew() -> None:
    seed_demo()
    engine = Engine(seed=3, config=Config(speed=1.0, start_hour=15.0, burst_chance_per_hour=0.0))
    engine.recorded_latencies = {}
    play_demo_hour(15.0, engine=engine)
    raw = engine.recorded_latencies
    now = timezone.now()
    since, until = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=10), now + dt.timedelta(minutes=1)
    nodes = {n.hostname: n for n in Node.objects.select_related("tier")}
    by_tier: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    everything: dict[str, list[float]] = defaultdict(list)
    for (host, stage), values in raw.items():
        by_tier[nodes[host].tier_id][stage].extend(values)
        everything[stage].extend(values)
    assert set(everything) == set(CPU_STAGES) | set(MODEL_STAGES) and len(by_tier) == 2

    def check(figures: list[dict], expected: dict[str, list[float]]) -> None:
        got = {f["stage"]: f for f in figures}
        assert set(got) == set(expected)
        for stage, values in expected.items():
            assert got[stage]["exact"] is True and got[stage]["count"] == len(values)
            for key, q in QS:
                assert within(got[stage][key], exact(values, q)), (stage, key, got[stage][key], exact(values, q))

    busiest = {tier: max((h for (h, _s) in raw if nodes[h].tier_id == tier),
                         key=lambda h: sum(len(v) for (n, _s), v in raw.items() if n == h)) for tier in by_tier}
    for host in busiest.values():
        check(telemetry_latency.latency_percentiles(since=since, until=until, node_id=nodes[host].pk),
              {s: v for (h, s), v in raw.items() if h == host})
    for tier_id, stages in by_tier.items():
        check(telemetry_latency.latency_percentiles(since=since, until=until, tier_id=tier_id), dict(stages))
    check(telemetry_latency.latency_percentiles(since=since, until=until), dict(everything))
