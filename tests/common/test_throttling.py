"""Abuse limits: writes per user (token or session) counted in Redis across processes, agents'
telemetry per key on both ingest paths; over the limit a 429 says the limit and when to retry."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.accounts.services import user_ensure
from apps.common.throttling import LocalWindow, parse_rate
from tests.telemetry.conftest import Fleet, node_sample
from tests.telemetry.test_ingest_asgi import AsgiClient

ARRAY = "/api/v1/planner/array/"
WORKED = {"concurrent_users": 1000, "request_interval_s": 2, "input_tokens": 500, "output_tokens": 100,
          "gflops_per_token": 6, "module_tops": 30, "modules_per_node": 2, "instructions_per_request": 500000,
          "cpu_count": 1, "cores_per_cpu": 8, "core_ips": 1e9, "usable_fraction": 0.25}
_ids = itertools.count(1)


def test_rates_parse_and_bad_ones_are_named() -> None:
    assert parse_rate("300/min") == (300, 60) and parse_rate("2/hour") == (2, 3600)
    assert parse_rate("") is None and parse_rate("0/min") is None
    with pytest.raises(ValueError, match="bad rate '5/fortnight'"):
        parse_rate("5/fortnight")


def test_a_local_window_counts_per_key_and_says_when_to_retry() -> None:
    w = LocalWindow()
    assert w.hit("a", "2/min", now=120.0) is None and w.hit("a", "2/min", now=130.0) is None
    assert w.hit("a", "2/min", now=150.0) == pytest.approx(30.0)
    assert w.hit("b", "2/min", now=150.0) is None  # another key
    assert w.hit("a", "2/min", now=180.0) is None  # the next window


def _api(role: str) -> APIClient:
    """A user of its own (Redis outlives the test database, whose ids start again each run)."""
    user, _ = user_ensure(username=f"rate-{role}-{uuid.uuid4().hex[:8]}", password="pw", role=role)
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.mark.django_db
def test_a_user_over_the_write_limit_gets_429_with_retry_after(settings: Any) -> None:
    settings.API_WRITE_RATE = "3/day"
    operator_api, viewer_api = _api("operator"), _api("viewer")
    for _ in range(3):
        assert operator_api.post(ARRAY, WORKED, format="json").status_code == 200
    r = operator_api.post(ARRAY, WORKED, format="json")
    assert r.status_code == 429, r.json()
    assert int(r["Retry-After"]) > 0
    assert "write limit of 3 per day reached for" in r.json()["detail"]
    assert operator_api.get("/api/v1/nodes/").status_code == 200  # reads are not limited
    assert viewer_api.post(ARRAY, WORKED, format="json").status_code == 200  # another user's writes are


def _batch() -> dict[str, Any]:
    return {"batch_id": f"rate-{next(_ids):05d}", "node_samples": [node_sample("n-a")]}


@pytest.mark.django_db
def test_an_agent_key_over_its_telemetry_rate_gets_429_on_the_view(settings: Any) -> None:
    settings.TELEMETRY_RATE = "2/day"
    fleet = Fleet()
    client = fleet.client(fleet.key_a)
    assert [client.post("/api/v1/telemetry/", _batch(), format="json").status_code for _ in range(2)] == [202, 202]
    r = client.post("/api/v1/telemetry/", _batch(), format="json")
    assert r.status_code == 429 and int(r["Retry-After"]) > 0
    assert "telemetry limit of 2/day reached for this agent key" in r.json()["detail"]
    assert fleet.client(fleet.key_b).post("/api/v1/telemetry/", {
        "batch_id": "rate-b-1", "node_samples": [node_sample("n-b")]}, format="json").status_code == 202


@pytest.mark.django_db(transaction=True)
def test_an_agent_key_over_its_telemetry_rate_gets_429_on_the_lean_path(settings: Any) -> None:
    settings.TELEMETRY_RATE = "2/day"
    fleet = Fleet()
    asgi = AsgiClient()
    try:
        assert [asgi.post(_batch(), key=fleet.key_a).status_code for _ in range(2)] == [202, 202]
        r = asgi.post(_batch(), key=fleet.key_a)
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0, r.text
        assert "telemetry limit of 2/day" in r.json()["detail"]
    finally:
        asgi.close()
