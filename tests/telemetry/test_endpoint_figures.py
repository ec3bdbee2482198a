"""Contract 3: the gateway's tier samples carry per-endpoint figures (requests, errors, tokens, latency
p95), validated whole (a bad value is a 400 naming the field, nothing written) and merged per minute
as the batch is stored. Batches without them are what they were."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.agents.choices import AgentKind
from apps.agents.models import AgentToken
from apps.inventory.choices import EndpointKind, TierKind
from apps.inventory.models import ExternalEndpoint, Tier
from apps.telemetry.ingest.receive import telemetry_ingest
from apps.telemetry.models import EndpointRollup, IngestBatch, TierSample
from apps.telemetry.rollups.retention import telemetry_retention
from tests.telemetry.conftest import Fleet, stored, tier_sample

URL = "/api/v1/telemetry/"


@pytest.fixture
def endpoint(fleet: Fleet) -> ExternalEndpoint:
    return ExternalEndpoint.objects.create(name="gpu-70b", tier=Tier.objects.get(kind=TierKind.EXTERNAL_LARGE_MODEL),
                                           kind=EndpointKind.GPU_CLUSTER, url="https://gpu.example/v1", model="m70b")


def _figures(**over: Any) -> dict[str, Any]:
    return {"endpoint": "gpu-70b", "requests": 40, "errors": 1, "tokens": 24000, "p95_ms": 1500.0, **over}


def _external(t: dt.datetime, *figures: dict[str, Any], **over: Any) -> dict[str, Any]:
    return tier_sample(t, tier="external_large_model", window_s=5, endpoints=list(figures), **over)


def _batch(batch_id: str, *samples: dict[str, Any], contract: int = 3) -> dict[str, Any]:
    return {"batch_id": batch_id, "contract": contract, "tier_samples": list(samples)}


def _minute() -> dt.datetime:
    """A time early in a minute that has started, so samples a few seconds apart share it."""
    now = timezone.now()
    return now.replace(second=0, microsecond=0) - dt.timedelta(minutes=1) + dt.timedelta(seconds=5)


def test_it_merges_the_figures_of_one_minute_and_counts_a_resend_once(fleet: Fleet, endpoint: ExternalEndpoint
                                                                      ) -> None:
    gateway = fleet.client(fleet.key_gw)
    t = _minute()
    first = _batch("ep-000001", _external(t, _figures()), _external(t + dt.timedelta(seconds=5),
                                                                    _figures(requests=20, errors=0, p95_ms=2100.0)))
    r = gateway.post(URL, first, format="json")
    assert r.status_code == 202, r.content
    assert r.json()["accepted"]["tier_samples"] == 2
    assert gateway.post(URL, first, format="json").json()["duplicate"] is True
    # An idle window: no request, so no latency (null), in the same minute.
    idle = _batch("ep-000002", _external(t + dt.timedelta(seconds=10), _figures(requests=0, errors=0, tokens=0,
                                                                                 p95_ms=None)))
    assert gateway.post(URL, idle, format="json").status_code == 202
    assert stored() == 2
    [row] = EndpointRollup.objects.all()
    assert row.endpoint_id == endpoint.pk and row.minute == t.replace(second=0)
    assert (row.samples, row.window_s, row.requests, row.errors, row.tokens) == (3, 15.0, 60, 1, 48000)
    assert row.p95_ms == 2100.0  # the largest of the windows' p95 (an upper bound)
    # The in-process path (store at once) merges the same way.
    later = _external(t + dt.timedelta(seconds=15), _figures(p95_ms=900.0))
    telemetry_ingest(token=AgentToken.objects.get(kind=AgentKind.GATEWAY), payload=_batch("ep-000003", later))
    row.refresh_from_db()
    assert (row.samples, row.requests, row.errors, row.p95_ms) == (4, 100, 2, 2100.0)
    # Past the rollup retention the rows go with the other rollups.
    telemetry_retention(now=timezone.now() + dt.timedelta(days=31))
    assert not EndpointRollup.objects.exists()


def test_it_still_takes_tier_samples_without_endpoint_figures(fleet: Fleet, endpoint: ExternalEndpoint) -> None:
    gateway = fleet.client(fleet.key_gw)
    for batch_id, contract in (("old-v1-0001", 1), ("old-v2-0001", 2), ("new-v3-0001", 3)):
        r = gateway.post(URL, _batch(batch_id, tier_sample(), contract=contract), format="json")
        assert r.status_code == 202, r.content
    assert stored() == 3 and TierSample.objects.count() == 3 and not EndpointRollup.objects.exists()


@pytest.mark.parametrize(("figures", "path", "message"), [
    (_figures(errors=41), "endpoints[0].errors", "must not be above requests (41 > 40)"),
    (_figures(tokens=-1), "endpoints[0].tokens", "must be at least 0"),
    (_figures(requests="many"), "endpoints[0].requests", "must be an integer"),
    (_figures(p95_ms=-3), "endpoints[0].p95_ms", "must be at least 0"),
    (_figures(p95_ms=None), "endpoints[0].p95_ms", "must be a number: 40 request(s) in the window"),
    ({k: v for k, v in _figures().items() if k != "p95_ms"}, "endpoints[0].p95_ms",
     "is required (null when no request completed in the window)"),
    (_figures(endpoint="nowhere"), "endpoints[0].endpoint", "unknown endpoint nowhere"),
    (_figures(endpoint=""), "endpoints[0].endpoint", "is required: the endpoint's name in the inventory"),
])
def test_it_refuses_a_bad_figure_naming_the_field_and_writes_nothing(
        fleet: Fleet, endpoint: ExternalEndpoint, figures: dict[str, Any], path: str, message: str) -> None:
    good = _external(timezone.now(), _figures())
    bad = _external(timezone.now(), figures)
    r = fleet.client(fleet.key_gw).post(URL, _batch("bad-000001", good, bad), format="json")
    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {f"tier_samples[1].{path}": [message]}
    assert stored() == 0
    assert not IngestBatch.objects.exists() and not TierSample.objects.exists()
    assert not EndpointRollup.objects.exists()


def test_it_refuses_figures_the_batch_may_not_carry(fleet: Fleet, endpoint: ExternalEndpoint) -> None:
    gateway = fleet.client(fleet.key_gw)
    cases = [
        (_batch("v2-ep-0001", _external(timezone.now(), _figures()), contract=2),
         {"tier_samples[0].endpoints": ["needs contract 3 or later (this batch speaks 2)"]}),
        (_batch("twice-0001", _external(timezone.now(), _figures(), _figures())),
         {"tier_samples[0].endpoints[1].endpoint": ["endpoint gpu-70b appears twice in one tier sample"]}),
        (_batch("tier-00001", tier_sample(endpoints=[_figures()])),
         {"tier_samples[0].endpoints[0].endpoint": ["endpoint gpu-70b is not in the tier hybrid_inference"]}),
        (_batch("list-00001", _external(timezone.now()) | {"endpoints": {"gpu-70b": 3}}),
         {"tier_samples[0].endpoints": ["must be a list"]}),
    ]
    for body, errors in cases:
        r = gateway.post(URL, body, format="json")
        assert r.status_code == 400, r.content
        assert r.json()["errors"] == errors
    assert stored() == 0 and not IngestBatch.objects.exists() and not EndpointRollup.objects.exists()


def test_it_describes_the_endpoint_figures_in_the_schema(viewer_api: Any) -> None:
    schema = viewer_api.get("/api/schema/", HTTP_ACCEPT="application/json").json()["components"]["schemas"]
    assert "endpoints" in schema["TierSampleInRequest"]["properties"]
    assert set(schema["EndpointFiguresInRequest"]["required"]) == {"endpoint", "requests", "errors", "tokens",
                                                                  "p95_ms"}
