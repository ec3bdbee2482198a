"""The lean ASGI path of POST /api/v1/telemetry/ answers exactly as the DRF view does
(the same batch, the same status and body), and what it accepts is stored once."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import re
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application
from django.db import connections
from django.utils import timezone
from rest_framework.authtoken.models import Token

from apps.agents.models import AgentToken
from apps.agents.services import agent_token_revoke
from apps.telemetry.ingest.asgi import TelemetryIngestApp
from apps.telemetry.models import IngestBatch, LatencySample, ModuleSample, NodeSample, NodeStatus, StageSample
from tests.conftest import _user
from tests.telemetry.conftest import Fleet, iso, node_sample, stage_sample, stored, tier_sample

URL = "/api/v1/telemetry/"
pytestmark = pytest.mark.django_db(transaction=True)


class AsgiClient:
    """Requests through ``controlplane.asgi``'s HTTP app (the lean path in front of Django)."""

    def __init__(self) -> None:
        self.app = TelemetryIngestApp(get_asgi_application())
        self.loop = asyncio.new_event_loop()

    def post(self, body: Any, *, key: str | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            h["Authorization"] = f"Agent {key}"

        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)  # type: ignore[arg-type]
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                return await client.post(URL, content=content, headers=h)

        return self.loop.run_until_complete(go())

    def close(self) -> None:
        self.loop.run_until_complete(self.app.appender.close())
        self.loop.run_until_complete(sync_to_async(connections.close_all)())
        self.loop.close()


@pytest.fixture
def asgi() -> Any:
    client = AsgiClient()
    yield client
    client.close()


@pytest.fixture
def live_fleet(transactional_db: Any) -> Fleet:
    return Fleet()


def _django(fleet: Fleet, key: str, body: Any) -> Any:
    if isinstance(body, bytes):
        return fleet.client(key).post(URL, body, content_type="application/json")
    return fleet.client(key).post(URL, body, format="json")


def _nodes(n: int, batch_id: str, **over: Any) -> dict[str, Any]:
    now = timezone.now()
    samples = [node_sample("n-a", now - dt.timedelta(seconds=5 * (n - i)), ["A-0", "A-1"]) for i in range(n)]
    for s in samples:
        s.update(over)
    return {"batch_id": batch_id, "node_samples": samples}


LATENCY = {"intent": {"offset": 186, "counts": [3, 0, 7, 12]}, "generation": {"offset": 290, "counts": [2]}}


def _scenarios(fleet: Fleet) -> list[tuple[str, str, Any]]:
    """(name, key, body); bodies that are accepted carry a batch id suffixed per path."""
    bad_field = _nodes(20, "bad-field-01")
    bad_field["node_samples"][17]["modules"][1]["temp_c"] = "hot"
    many = _nodes(3, "many-bad-01")
    del many["node_samples"][0]["cpu_util"]
    many["node_samples"][1]["mem_util"] = 1.5
    many["node_samples"][2]["time"] = "yesterday"
    many["node_samples"][2]["modules"][0]["serial"] = "NOPE-9"
    foreign_node = _nodes(5, "foreign-n-01")
    foreign_node["node_samples"][3] = node_sample("n-b", serials=["B-0"])
    unknown_node = _nodes(2, "unknown-n-01")
    unknown_node["node_samples"][1]["node"] = "n-nowhere"
    foreign_module = _nodes(2, "foreign-m-01")
    foreign_module["node_samples"][1]["modules"][0]["serial"] = "B-0"
    future = _nodes(3, "future-0001")
    future["node_samples"][2]["time"] = iso(timezone.now() + dt.timedelta(seconds=120))
    bad_stage = {"batch_id": "gw-bad-0001", "tier_samples": [tier_sample()],
                 "stage_samples": [stage_sample(), stage_sample(p95_ms=50.0)]}
    return [
        ("bad module field", fleet.key_a, bad_field),
        ("every bad field", fleet.key_a, many),
        ("another node", fleet.key_a, foreign_node),
        ("unknown node", fleet.key_a, unknown_node),
        ("another node's module", fleet.key_a, foreign_module),
        ("node key, tier samples", fleet.key_a, {"batch_id": "tier-by-node", "tier_samples": [tier_sample()]}),
        ("gateway, node samples", fleet.key_gw, _nodes(1, "node-by-gw-1")),
        ("time in the future", fleet.key_a, future),
        ("percentiles out of order", fleet.key_gw, bad_stage),
        ("not JSON", fleet.key_a, b'{"batch_id": "broken-json-1", "node_samples": ['),
        ("not an object", fleet.key_a, b"[1, 2]"),
        ("no batch id", fleet.key_a, {"node_samples": []}),
        ("too many samples", fleet.key_gw, {"batch_id": "gw-big-0001",
                                            "tier_samples": [tier_sample() for _ in range(1001)]}),
        ("unknown key", "not-a-key", _nodes(1, "stranger-01")),
        ("unknown contract version", fleet.key_a, {**_nodes(1, "contract-9"), "contract": 9}),
        ("null in contract 1", fleet.key_a, _nodes(2, "null-in-v1", in_flight=None)),
        ("latency in contract 2", fleet.key_a, {**_nodes(1, "lat-in-v2", latency=LATENCY), "contract": 2}),
        ("histogram past the last bucket", fleet.key_a,
         {**_nodes(1, "lat-far-01", latency={"intent": {"offset": 806, "counts": [1, 1]}}), "contract": 3}),
        ("histogram of an unknown stage", fleet.key_a,
         {**_nodes(1, "lat-warp-1", latency={"warp": {"offset": 0, "counts": [1]}}), "contract": 3}),
        ("holders in contract 3", fleet.key_a,
         {**_nodes(1, "hold-in-v3", holders=[{"pid": 7, "name": "vllm", "module": "A-0"}]), "contract": 3}),
        ("a holder of another node's module", fleet.key_a,
         {**_nodes(1, "hold-foreign", holders=[{"pid": 7, "name": "vllm", "module": "B-0"}]), "contract": 4}),
        ("a holder without a pid", fleet.key_a,
         {**_nodes(1, "hold-no-pid", holders=[{"name": "vllm", "module": "A-0"}]), "contract": 4}),
    ]


def _clockless(data: Any) -> Any:
    return json.loads(re.sub(r"is \d+ s in the future", "is N s in the future", json.dumps(data)))


def test_it_rejects_every_bad_batch_exactly_as_the_view_does(live_fleet: Fleet, asgi: AsgiClient) -> None:
    for name, key, body in _scenarios(live_fleet):
        lean = asgi.post(body, key=key)
        view = _django(live_fleet, key, body)
        assert lean.status_code == view.status_code, (name, lean.text, view.content)
        # How far in the future a time is depends on when each path read the clock: compare the rest.
        assert _clockless(lean.json()) == _clockless(view.json()), name
        assert lean.status_code in (400, 401, 403, 413), name
    assert IngestBatch.objects.count() == 0


def test_it_accepts_like_the_view_and_the_writer_stores_it_once(live_fleet: Fleet, asgi: AsgiClient) -> None:
    for suffix, post in (("lean", lambda k, b: asgi.post(b, key=k)), ("view", lambda k, b: _django(live_fleet, k, b))):
        r = post(live_fleet.key_a, _nodes(10, f"nodes-{suffix}"))
        assert r.status_code == 202, r.content
        assert r.json() == {"batch_id": f"nodes-{suffix}", "duplicate": False,
                            "accepted": {"node_samples": 10, "module_samples": 20, "tier_samples": 0,
                                         "stage_samples": 0}}
        gw = {"batch_id": f"gw-{suffix}-01", "tier_samples": [tier_sample()],
              "stage_samples": [stage_sample(s) for s in ("intent", "generation")]}
        assert post(live_fleet.key_gw, gw).status_code == 202
        # Integers written as 3.0 are integers: the fast path leaves them to the complete check.
        r = post(live_fleet.key_a, _nodes(1, f"floaty-{suffix}", in_flight=3.0))
        assert r.status_code == 202, r.content
        # Contract 2: what the agent does not know is null, and stays null.
        v2 = {**_nodes(2, f"v2-nulls-{suffix}", in_flight=None), "contract": 2}
        v2["node_samples"][1]["modules"][0]["temp_c"] = None
        assert post(live_fleet.key_a, v2).status_code == 202
        # Contract 3: latency histograms.
        v3 = {**_nodes(1, f"v3-latency-{suffix}", latency=LATENCY), "contract": 3}
        assert post(live_fleet.key_a, v3).status_code == 202
        again = post(live_fleet.key_a, _nodes(10, f"nodes-{suffix}"))
        assert again.status_code == 200
        assert again.json()["duplicate"] is True and again.json()["accepted"]["module_samples"] == 20
    # The lean path group-committed its four new batches and the resend; "3.0" took the complete check.
    assert asgi.app.appender.batches == 5
    assert IngestBatch.objects.filter(stored_at__isnull=True).count() == 10
    assert stored() == 10
    assert NodeSample.objects.count() == 28 and ModuleSample.objects.count() == 56
    assert sorted(LatencySample.objects.values_list("stage", "hist_offset", "counts", "count")) == [
        ("generation", 290, [2], 2), ("generation", 290, [2], 2),
        ("intent", 186, [3, 0, 7, 12], 22), ("intent", 186, [3, 0, 7, 12], 22)]
    assert NodeSample.objects.filter(in_flight__isnull=True).count() == 4
    assert ModuleSample.objects.filter(temp_c__isnull=True).count() == 2
    assert StageSample.objects.count() == 4
    assert NodeSample.objects.filter(in_flight=3).count() == 24  # "3.0" stored as the integer 3
    assert NodeStatus.objects.filter(node=live_fleet.node_a).exists()


def test_it_keeps_the_last_of_duplicated_keys_on_both_paths(live_fleet: Fleet, asgi: AsgiClient) -> None:
    sample = json.dumps(node_sample("n-a", timezone.now(), ["A-0"]))
    last_valid = sample.replace('"cpu_util": 0.4', '"cpu_util": 1.7, "cpu_util": 0.25')
    last_invalid = sample.replace('"cpu_util": 0.4', '"cpu_util": 0.25, "cpu_util": 1.7')
    for suffix, post in (("lean", lambda k, b: asgi.post(b, key=k)), ("view", lambda k, b: _django(live_fleet, k, b))):
        ok = f'{{"batch_id": "dup-keys-{suffix}", "node_samples": [{last_valid}]}}'.encode()
        assert post(live_fleet.key_a, ok).status_code == 202
        bad = f'{{"batch_id": "dup-bad-{suffix}", "node_samples": [{last_invalid}]}}'.encode()
        r = post(live_fleet.key_a, bad)
        assert r.status_code == 400
        assert r.json()["errors"] == {"node_samples[0].cpu_util": ["must be at most 1"]}
        # The batch id too: the last one names the batch.
        ids = f'{{"batch_id": "first-id-{suffix}", "batch_id": "last-id-{suffix}", "node_samples": [{sample}]}}'
        assert post(live_fleet.key_a, ids.encode()).json()["batch_id"] == f"last-id-{suffix}"
    stored()
    assert set(NodeSample.objects.values_list("cpu_util", flat=True)) == {0.25, 0.4}


def test_it_leaves_users_strangers_and_limits_to_the_same_answers(live_fleet: Fleet, asgi: AsgiClient,
                                                                  settings: Any) -> None:

    user_token, _ = Token.objects.get_or_create(user=_user("admin"))
    body = _nodes(1, "users-0001")
    r = asgi.post(body, headers={"Authorization": f"Token {user_token.key}"})
    assert r.status_code == 403 and "node agents" in r.json()["detail"]
    assert asgi.post(body).status_code == 401
    r = asgi.post(body, key=live_fleet.key_b, headers={"X-Request-ID": "trace-me-1"})
    assert r.headers["x-request-id"] == "trace-me-1"
    assert r.status_code == 403  # n-b's key, n-a's samples
    assert r.json()["errors"] == {"node_samples[0].node": ["this key belongs to n-b, not n-a"]}
    agent_token_revoke(token=AgentToken.objects.get(node=live_fleet.node_a), actor="test")
    r = asgi.post(body, key=live_fleet.key_a)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Agent"
    settings.MAX_BODY_BYTES = 1000
    big = copy.deepcopy(_nodes(20, "big-body-01"))
    r = asgi.post(big, key=live_fleet.key_b)
    assert r.status_code == 413
    assert IngestBatch.objects.count() == 0


def test_it_takes_a_batch_once_when_copies_arrive_together(live_fleet: Fleet, asgi: AsgiClient) -> None:
    """Copies of one batch in flight at once (a resend racing the original) land in the same group
    or in two: one 202, the others 200 duplicate, the rows once."""
    body = json.dumps(_nodes(5, "twins-0001")).encode()
    headers = {"Authorization": f"Agent {live_fleet.key_a}", "Content-Type": "application/json"}

    async def send_all() -> list[int]:
        transport = httpx.ASGITransport(app=asgi.app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            answers = await asyncio.gather(*[client.post(URL, content=body, headers=headers) for _ in range(4)])
        return sorted(r.status_code for r in answers)

    assert asgi.loop.run_until_complete(send_all()) == [200, 200, 200, 202]
    assert stored() == 1
    assert NodeSample.objects.count() == 5
