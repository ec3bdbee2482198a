"""The simulated gateway reports per-endpoint figures of the external tier (contract 3), and the
endpoint faults make one endpoint slow, failing or near its quota while the others stay healthy."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.inventory.choices import EndpointKind, TierKind
from apps.inventory.models import ExternalEndpoint, Tier
from apps.simulator.engine import Engine
from apps.simulator.runner import CONTRACT
from apps.simulator.selectors import endpoint_specs, world
from apps.simulator.specs import EXTERNAL, Config, EndpointSpec, FaultSpec
from apps.telemetry.ingest.receive import telemetry_ingest
from apps.telemetry.models import EndpointRollup
from tests.agent.fleet import make_node
from tests.simulator.test_engine import T0, fleet

URL = "/api/v1/simulator/faults/"
ENDPOINTS = [EndpointSpec("pool-a", quota_rpm=6000, quota_tpm=5_000_000),
             EndpointSpec("pool-b", quota_rpm=3000, quota_tpm=2_500_000)]


def _figures(faults: list[FaultSpec], steps: int = 24) -> dict[str, list[dict[str, Any]]]:
    engine = Engine(seed=3, config=Config(peak_rps=200, burst_chance_per_hour=0, start_hour=14, speed=1))
    out: dict[str, list[dict[str, Any]]] = {"pool-a": [], "pool-b": []}
    for k in range(steps):
        result = engine.step(T0 + k * 5.0, fleet(), faults, endpoints=ENDPOINTS)
        [external] = [t for t in result.tier_samples if t["tier"] == EXTERNAL]
        for f in external["endpoints"]:
            out[f["endpoint"]].append(f)
    return out


def _rpm(figures: list[dict[str, Any]]) -> float:
    return sum(f["requests"] for f in figures) / (5.0 * len(figures)) * 60


def _error_rate(figures: list[dict[str, Any]]) -> float:
    return sum(f["errors"] for f in figures) / max(1, sum(f["requests"] for f in figures))


def _p95(figures: list[dict[str, Any]]) -> float:
    return statistics.median(f["p95_ms"] for f in figures if f["p95_ms"] is not None)


def test_the_gateway_spreads_the_external_tier_over_its_endpoints_by_quota() -> None:
    healthy = _figures([])
    a, b = healthy["pool-a"], healthy["pool-b"]
    assert 1.5 < _rpm(a) / _rpm(b) < 2.6  # twice the quota, about twice the traffic
    assert _rpm(a) < 0.5 * 6000 and _error_rate(a) < 0.02 and 1000 < _p95(a) < 2500
    assert all(f["tokens"] > f["requests"] * 500 for f in a if f["requests"])
    # Without endpoints the tier sample is what contract 2 knew.
    plain = Engine(seed=3).step(T0, fleet(), [])
    assert all("endpoints" not in t for t in plain.tier_samples)


def test_each_endpoint_fault_strikes_its_endpoint_only() -> None:
    healthy = _figures([])
    slow = _figures([FaultSpec("endpoint_slow", params={"endpoint": "pool-b", "latency_factor": 4.0})])
    assert _p95(slow["pool-b"]) > 3 * _p95(healthy["pool-b"]) and _p95(slow["pool-a"]) < 2500
    failing = _figures([FaultSpec("endpoint_errors", params={"endpoint": "pool-b", "error_rate": 0.2})])
    assert 0.15 < _error_rate(failing["pool-b"]) < 0.25 and _error_rate(failing["pool-a"]) < 0.02
    busy = _figures([FaultSpec("endpoint_quota", params={"endpoint": "pool-a", "use": 0.95})])
    assert 0.9 * 6000 < _rpm(busy["pool-a"]) < 6000 and _rpm(busy["pool-b"]) < 0.5 * 3000


@pytest.mark.django_db
def test_the_simulated_gateways_batches_pass_the_contract() -> None:
    tier = Tier.objects.get(kind=TierKind.EXTERNAL_LARGE_MODEL)
    ExternalEndpoint.objects.create(name="gpu-pool-70b", tier=tier, kind=EndpointKind.GPU_CLUSTER,
                                    url="https://gpu.example/v1", model="m70b", quota_requests_per_min=6000)
    ExternalEndpoint.objects.create(name="off", tier=tier, kind=EndpointKind.CLOUD_API, url="https://c.example/v1",
                                    model="m", enabled=False)
    for i in range(4):  # the hybrid nodes the engine's fleet names in the gateway's per-node breakdown
        make_node(f"h-{i}", slot=i + 1, modules=0)
    nodes, faults, endpoints = world()
    assert endpoints == endpoint_specs() == [EndpointSpec("gpu-pool-70b", quota_rpm=6000, quota_tpm=1_000_000)]
    result = Engine(seed=1).step(timezone.now().timestamp(), fleet(), faults, endpoints=endpoints)
    assert {s.get("node") for s in result.stage_samples} == {None, "h-0", "h-1", "h-2", "h-3"}
    gateway, _ = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor="test")
    telemetry_ingest(token=gateway, payload={"batch_id": "sim-gw-000001", "contract": CONTRACT,
                                             "tier_samples": result.tier_samples,
                                             "stage_samples": result.stage_samples})
    [row] = EndpointRollup.objects.all()
    assert row.requests > 0 and row.p95_ms is not None and row.errors <= row.requests


@pytest.mark.django_db
def test_operators_switch_endpoint_faults_on_an_endpoint(operator_api: APIClient) -> None:
    tier = Tier.objects.get(kind=TierKind.EXTERNAL_LARGE_MODEL)
    ExternalEndpoint.objects.create(name="gpu-pool-70b", tier=tier, kind=EndpointKind.GPU_CLUSTER,
                                    url="https://gpu.example/v1", model="m70b")
    on = operator_api.post(URL, {"kind": "endpoint_slow"}, format="json")
    assert on.status_code == 201, on.json()
    assert on.json()["params"] == {"endpoint": "gpu-pool-70b", "latency_factor": 4.0} and on.json()["node"] is None
    r = operator_api.post(URL, {"kind": "endpoint_errors", "params": {"endpoint": "nope"}}, format="json")
    assert r.status_code == 400 and "params.endpoint" in r.json()["errors"]
    r = operator_api.post(URL, {"kind": "endpoint_quota", "params": {"use": 7}}, format="json")
    assert r.status_code == 400 and "params.use" in r.json()["errors"]
    make_node("n-e-01", modules=0)
    r = operator_api.post(URL, {"kind": "endpoint_errors", "node": "n-e-01"}, format="json")
    assert r.status_code == 400 and "strikes an external endpoint" in r.json()["errors"]["node"][0]
