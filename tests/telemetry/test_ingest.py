"""POST /api/v1/telemetry/: whole-batch validation, per-key permissions, resends."""

from __future__ import annotations

import datetime as dt
import re
import threading
from typing import Any

import msgspec
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.agents.models import AgentToken
from apps.agents.services import agent_token_revoke, identity_of
from apps.telemetry.ingest.receive import telemetry_receive
from apps.telemetry.models import (
    IngestBatch,
    ModuleSample,
    ModuleStatus,
    NodeSample,
    NodeStatus,
    RollupDue,
    StageSample,
    TierSample,
    TierStatus,
)
from apps.telemetry.store import partitions
from tests.telemetry.conftest import Fleet, iso, node_sample, stage_sample, stored, tier_sample

URL = "/api/v1/telemetry/"
TABLES: list[Any] = [IngestBatch, NodeSample, ModuleSample, TierSample, StageSample, NodeStatus, ModuleStatus,
                     TierStatus]


def counts() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in TABLES}


def node_batch(fleet: Fleet, n: int = 20, batch_id: str = "batch-0001") -> dict[str, Any]:
    now = timezone.now()
    return {"batch_id": batch_id, "node_samples": [
        node_sample("n-a", now - dt.timedelta(seconds=10 * (n - i)), ["A-0", "A-1"]) for i in range(n)
    ]}


def test_it_accepts_a_node_batch_and_keeps_latest_state(fleet: Fleet) -> None:
    r = fleet.client(fleet.key_a).post(URL, node_batch(fleet), format="json")
    assert r.status_code == 202, r.content
    assert r.json() == {"batch_id": "batch-0001", "duplicate": False,
                        "accepted": {"node_samples": 20, "module_samples": 40, "tier_samples": 0,
                                     "stage_samples": 0}}
    assert IngestBatch.objects.get().stored_at is None  # durably buffered: the writer stores it
    assert stored() == 1
    assert IngestBatch.objects.get().stored_at is not None and IngestBatch.objects.get().payload is None
    assert NodeSample.objects.filter(node_id=fleet.node_a.pk).count() == 20
    assert ModuleSample.objects.filter(module_id=fleet.mod_a[1].pk).count() == 20
    status = NodeStatus.objects.get(node=fleet.node_a)
    assert status.cpu_util == pytest.approx(0.4)
    assert ModuleStatus.objects.get(module=fleet.mod_a[0]).temp_c == 55.0


def test_it_accepts_gateway_tier_and_stage_samples(fleet: Fleet) -> None:
    body = {"batch_id": "gw-000001", "tier_samples": [tier_sample()],
            "stage_samples": [stage_sample(s) for s in ("perception", "intent", "planning", "tool_call",
                                                        "generation", "memory_update")]}
    r = fleet.client(fleet.key_gw).post(URL, body, format="json")
    assert r.status_code == 202, r.content
    assert r.json()["accepted"]["stage_samples"] == 6
    stored()
    assert TierStatus.objects.get(tier=fleet.tier).queue_depth == 12
    assert StageSample.objects.filter(stage="tool_call").count() == 1


@pytest.mark.parametrize("where", [0, 17, 19])
def test_it_rejects_the_whole_batch_for_one_bad_module_field(fleet: Fleet, where: int) -> None:
    before = counts()
    body = node_batch(fleet)
    body["node_samples"][where]["modules"][1]["temp_c"] = "hot"
    r = fleet.client(fleet.key_a).post(URL, body, format="json")
    assert r.status_code == 400
    assert r.json()["detail"] == f"node_samples[{where}].modules[1].temp_c: must be a number"
    assert r.json()["errors"] == {f"node_samples[{where}].modules[1].temp_c": ["must be a number"]}
    assert counts() == before


def test_it_rejects_a_gateway_batch_with_one_bad_stage_and_writes_nothing(fleet: Fleet) -> None:
    before = counts()
    stages = [stage_sample() for _ in range(30)]
    stages[29]["stage"] = "thinking"
    r = fleet.client(fleet.key_gw).post(URL, {"batch_id": "gw-bad-0001", "tier_samples": [tier_sample()],
                                              "stage_samples": stages}, format="json")
    assert r.status_code == 400
    assert "stage_samples[29].stage" in r.json()["errors"]
    assert counts() == before


def test_it_names_every_bad_field(fleet: Fleet) -> None:
    body = node_batch(fleet, n=3)
    del body["node_samples"][0]["cpu_util"]
    body["node_samples"][1]["mem_util"] = 1.5
    body["node_samples"][2]["time"] = "yesterday"
    body["node_samples"][2]["modules"][0]["serial"] = "NOPE-9"
    errors = fleet.client(fleet.key_a).post(URL, body, format="json").json()["errors"]
    assert errors == {
        "node_samples[0].cpu_util": ["is required"],
        "node_samples[1].mem_util": ["must be at most 1"],
        "node_samples[2].time": ["must be an ISO 8601 date-time string, e.g. 2026-11-29T22:00:00Z"],
        "node_samples[2].modules[0].serial": ["unknown module NOPE-9"],
    }


def test_it_forbids_a_node_key_writing_another_node(fleet: Fleet) -> None:
    before = counts()
    body = node_batch(fleet, n=5)
    body["node_samples"][3] = node_sample("n-b", serials=["B-0"])
    r = fleet.client(fleet.key_a).post(URL, body, format="json")
    assert r.status_code == 403
    assert r.json()["errors"] == {"node_samples[3].node": ["this key belongs to n-a, not n-b"]}
    assert counts() == before


def test_it_rejects_an_unknown_node(fleet: Fleet) -> None:
    body = node_batch(fleet, n=2)
    body["node_samples"][1]["node"] = "n-nowhere"
    r = fleet.client(fleet.key_a).post(URL, body, format="json")
    assert r.status_code == 400
    assert r.json()["errors"] == {"node_samples[1].node": ["unknown node n-nowhere"]}


def test_it_forbids_a_node_key_writing_another_nodes_module(fleet: Fleet) -> None:
    before = counts()
    body = node_batch(fleet, n=2)
    body["node_samples"][1]["modules"][0]["serial"] = "B-0"
    r = fleet.client(fleet.key_a).post(URL, body, format="json")
    assert r.status_code == 403
    assert r.json()["detail"] == "node_samples[1].modules[0].serial: module B-0 is in n-b, not in n-a"
    body["node_samples"][1]["modules"][0]["serial"] = "LOOSE-1"
    assert fleet.client(fleet.key_a).post(URL, body, format="json").status_code == 403
    assert counts() == before


def test_it_forbids_a_node_key_writing_tier_samples(fleet: Fleet) -> None:
    r = fleet.client(fleet.key_a).post(URL, {"batch_id": "batch-0002", "tier_samples": [tier_sample()]},
                                       format="json")
    assert r.status_code == 403
    assert "tier_samples" in r.json()["errors"]
    assert TierSample.objects.count() == 0


def test_it_forbids_the_gateway_writing_node_samples(fleet: Fleet) -> None:
    r = fleet.client(fleet.key_gw).post(URL, node_batch(fleet, n=1), format="json")
    assert r.status_code == 403
    assert NodeSample.objects.count() == 0


def test_it_forbids_users_and_refuses_strangers(fleet: Fleet, admin_api: Any, anon_api: Any) -> None:
    assert admin_api.post(URL, node_batch(fleet, n=1), format="json").status_code == 403
    assert anon_api.post(URL, node_batch(fleet, n=1), format="json").status_code == 401
    assert fleet.client("not-a-key").post(URL, node_batch(fleet, n=1), format="json").status_code == 401
    assert NodeSample.objects.count() == 0


def test_it_refuses_a_revoked_key(fleet: Fleet) -> None:
    agent_token_revoke(token=AgentToken.objects.get(node=fleet.node_a), actor="test")
    assert fleet.client(fleet.key_a).post(URL, node_batch(fleet, n=1), format="json").status_code == 401


def test_it_does_not_duplicate_a_resent_batch(fleet: Fleet) -> None:
    client = fleet.client(fleet.key_a)
    body = node_batch(fleet, n=10)
    assert client.post(URL, body, format="json").status_code == 202
    before = counts()
    r = client.post(URL, body, format="json")
    assert r.status_code == 200
    assert r.json() == {"batch_id": "batch-0001", "duplicate": True,
                        "accepted": {"node_samples": 10, "module_samples": 20, "tier_samples": 0,
                                     "stage_samples": 0}}
    assert counts() == before


def test_it_keeps_batch_ids_apart_per_node(fleet: Fleet) -> None:
    """Another node cannot swallow a node's batch by using its id first."""
    now = timezone.now()
    body_b = {"batch_id": "batch-0001", "node_samples": [node_sample("n-b", now, ["B-0"])]}
    assert fleet.client(fleet.key_b).post(URL, body_b, format="json").status_code == 202
    assert fleet.client(fleet.key_a).post(URL, node_batch(fleet, n=2), format="json").status_code == 202
    assert stored() == 2
    assert NodeSample.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_it_writes_a_batch_once_when_two_copies_race(transactional_db: Any) -> None:
    fleet = Fleet()
    body = node_batch(fleet, n=50, batch_id="race-0001")
    barrier = threading.Barrier(2)
    codes: list[int] = []

    def send() -> None:
        try:
            barrier.wait()
            codes.append(fleet.client(fleet.key_a).post(URL, body, format="json").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200, 202]
    assert IngestBatch.objects.count() == 1
    stored()
    assert NodeSample.objects.count() == 50


@pytest.mark.parametrize(("offset_s", "message"), [
    # The server counts the seconds when it reads the batch: a loaded machine may take one or two.
    (120, r"is 1(18|19|20) s in the future \(at most 30 s allowed\)"),
    (-49 * 3600, r"is older than the raw retention of 48 h"),
])
def test_it_rejects_times_out_of_range(fleet: Fleet, offset_s: int, message: str) -> None:
    body = node_batch(fleet, n=3)
    body["node_samples"][2]["time"] = iso(timezone.now() + dt.timedelta(seconds=offset_s))
    r = fleet.client(fleet.key_a).post(URL, body, format="json")
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert list(errors) == ["node_samples[2].time"] and len(errors["node_samples[2].time"]) == 1, errors
    assert re.fullmatch(message, errors["node_samples[2].time"][0]), errors
    assert NodeSample.objects.count() == 0


def test_it_accepts_a_small_clock_skew(fleet: Fleet) -> None:
    body = node_batch(fleet, n=1)
    body["node_samples"][0]["time"] = iso(timezone.now() + dt.timedelta(seconds=10))
    assert fleet.client(fleet.key_a).post(URL, body, format="json").status_code == 202


def test_it_refuses_too_many_samples_with_413(fleet: Fleet) -> None:
    body = {"batch_id": "gw-big-0001", "tier_samples": [tier_sample() for _ in range(1001)]}
    r = fleet.client(fleet.key_gw).post(URL, body, format="json")
    assert r.status_code == 413
    assert r.json()["errors"] == {"tier_samples": ["1001 samples; at most 1000 per batch"]}


def test_it_refuses_an_oversized_body_with_413(fleet: Fleet, settings: Any) -> None:
    settings.MAX_BODY_BYTES = 10_000
    body = node_batch(fleet, n=100)
    r = fleet.client(fleet.key_a).post(URL, body, format="json")
    assert r.status_code == 413
    assert NodeSample.objects.count() == 0


def test_it_does_not_move_latest_state_backwards(fleet: Fleet) -> None:
    client = fleet.client(fleet.key_a)
    now = timezone.now()
    new = {"batch_id": "batch-new1", "node_samples": [node_sample("n-a", now, ["A-0"], cpu_util=0.9)]}
    old = {"batch_id": "batch-old1",
           "node_samples": [node_sample("n-a", now - dt.timedelta(minutes=5), ["A-0"], cpu_util=0.1)]}
    assert client.post(URL, new, format="json").status_code == 202
    stored()
    seen_first = NodeStatus.objects.get(node=fleet.node_a).last_seen
    assert client.post(URL, old, format="json").status_code == 202
    stored()
    status = NodeStatus.objects.get(node=fleet.node_a)
    assert status.cpu_util == pytest.approx(0.9)
    assert status.time == now
    assert status.last_seen >= seen_first
    assert ModuleStatus.objects.get(module=fleet.mod_a[0]).time == status.time
    assert NodeSample.objects.count() == 2


def test_it_writes_a_large_batch_without_a_query_per_sample(fleet: Fleet) -> None:
    """The hot path is COPY: the statements run do not grow with the batch, neither
    when the batch is accepted nor when the writer stores it."""

    client = fleet.client(fleet.key_a)
    # Records the key's first use, and makes the partitions the large batch's hours need.
    client.post(URL, node_batch(fleet, n=1000, batch_id="warm-up-1"), format="json")
    stored()
    with CaptureQueriesContext(connection) as small:
        assert client.post(URL, node_batch(fleet, n=2, batch_id="small-001"), format="json").status_code == 202
        stored()
    with CaptureQueriesContext(connection) as large:
        assert client.post(URL, node_batch(fleet, n=1000, batch_id="large-001"), format="json").status_code == 202
        stored()
    assert len(large.captured_queries) == len(small.captured_queries)
    assert NodeSample.objects.count() == 2002
    assert ModuleSample.objects.count() == 4004


def test_it_keeps_the_receipt_time_as_last_seen_when_stored_later(fleet: Fleet) -> None:
    """A batch stored late (the writer was down) does not make its node look heard from later than it was."""

    received = timezone.now() - dt.timedelta(seconds=90)
    body = {"batch_id": "late-store-1", "node_samples": [node_sample("n-a", received - dt.timedelta(seconds=1),
                                                                    ["A-0"])]}
    telemetry_receive(identity=identity_of(AgentToken.objects.get(node=fleet.node_a)),
                      body=msgspec.json.encode(body), now=received)
    assert stored() == 1
    status = NodeStatus.objects.get(node=fleet.node_a)
    assert status.last_seen == received
    assert ModuleStatus.objects.get(module=fleet.mod_a[0]).last_seen == received


def test_a_batch_spanning_hours_gets_the_partitions_of_its_samples_and_no_others(fleet: Fleet) -> None:
    """The writer checks the partitions from a batch's first sample to its last at once, and works out
    the exact ones only when one is missing: a sample in an hour not seen before lands in a partition
    of its own, rollups are due for every minute sampled, and the empty hours between get nothing."""

    table = "telemetry_nodesample"
    early = timezone.now().replace(minute=10, second=0, microsecond=0) - dt.timedelta(hours=5)
    late = early + dt.timedelta(hours=4)
    hour = dt.timedelta(hours=1)
    name = {t: partitions.partition_name(table, partitions.partition_start(t, 1)) for t in
            (early, early + hour, early + 2 * hour, early + 3 * hour, late)}

    def existing() -> set[str]:
        with connection.cursor() as cur:
            return {n for n, _lo, _hi in partitions.list_partitions(cur, table)}

    between = {name[early + k * hour] for k in (1, 2, 3)}
    assert not between & existing()
    client = fleet.client(fleet.key_a)
    r = client.post(URL, {"batch_id": "span-0001", "node_samples": [node_sample("n-a", early, ["A-0"])]},
                    format="json")
    assert r.status_code == 202, r.content
    assert stored() == 1  # the early hour's partition is known now
    body = {"batch_id": "span-0002", "node_samples": [node_sample("n-a", early + dt.timedelta(seconds=30), ["A-0"]),
                                                     node_sample("n-a", late, ["A-0"])]}
    assert client.post(URL, body, format="json").status_code == 202
    assert stored() == 1
    assert NodeSample.objects.filter(node=fleet.node_a).count() == 3
    assert {name[early], name[late]} <= existing()
    assert not between & existing()
    due = set(RollupDue.objects.filter(kind="node").values_list("minute", flat=True))
    assert {early, late} <= due
