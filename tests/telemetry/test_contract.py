"""The versioned wire contract: which versions the server speaks, what version 2 adds (null for what
an agent does not know, stored as null and shown as null) and what version 4 adds (the processes
holding a node's modules)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.agents.contract import CURRENT, VERSIONS
from apps.telemetry.models import IngestBatch, ModuleSample, ModuleStatus, NodeHolders, NodeSample, NodeStatus
from apps.telemetry.rollups.rollup import telemetry_rollup
from tests.telemetry.conftest import Fleet, node_sample, stored

URL = "/api/v1/telemetry/"
MODULE_METRICS = ["util", "temp_c", "power_w", "link_width", "link_width_expected", "ecc_corrected",
                  "ecc_uncorrected", "errors"]


def _batch(batch_id: str, *samples: dict[str, Any], contract: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"batch_id": batch_id, "node_samples": list(samples)}
    if contract is not None:
        body["contract"] = contract
    return body


def test_it_refuses_an_unknown_contract_version_listing_those_it_speaks(fleet: Fleet) -> None:
    assert VERSIONS == (1, 2, 3, 4) and CURRENT == 4
    for version in (5, 0, 99):
        r = fleet.client(fleet.key_a).post(URL, _batch(f"c-{version:06d}", node_sample("n-a"), contract=version),
                                           format="json")
        assert r.status_code == 400, r.content
        body = r.json()
        assert body["contract_versions"] == [1, 2, 3, 4]
        said = f"version {version} is not one this server speaks: it speaks 1, 2, 3, 4"
        assert body["errors"] == {"contract": [said]} and body["detail"] == f"contract: {said}"
    r = fleet.client(fleet.key_a).post(URL, _batch("c-text-01", node_sample("n-a"), contract="2"), format="json")
    assert r.status_code == 400 and r.json()["contract_versions"] == [1, 2, 3, 4]
    assert not IngestBatch.objects.exists() and not NodeSample.objects.exists()


def test_it_refuses_an_unknown_version_even_for_a_stored_batch_id(fleet: Fleet) -> None:
    agent = fleet.client(fleet.key_a)
    assert agent.post(URL, _batch("c-dup-0001", node_sample("n-a")), format="json").status_code == 202
    r = agent.post(URL, _batch("c-dup-0001", node_sample("n-a"), contract=7), format="json")
    assert r.status_code == 400 and r.json()["contract_versions"] == [1, 2, 3, 4]


def test_it_takes_a_batch_without_a_version_as_version_1(fleet: Fleet) -> None:
    agent = fleet.client(fleet.key_a)
    r = agent.post(URL, _batch("v1-000001", node_sample("n-a", serials=["A-0"])), format="json")
    assert r.status_code == 202, r.content
    assert stored() == 1
    assert NodeStatus.objects.get(node=fleet.node_a).in_flight == 3
    # Version 1 has no null: an unknown in-flight count is refused, as it always was.
    r = agent.post(URL, _batch("v1-000002", node_sample("n-a", in_flight=None)), format="json")
    assert r.status_code == 400
    assert r.json()["errors"] == {"node_samples[0].in_flight": ["is required"]}
    r = agent.post(URL, _batch("v1-000003", node_sample("n-a", in_flight=None), contract=1), format="json")
    assert r.status_code == 400


def test_it_stores_null_for_what_a_version_2_agent_does_not_know(fleet: Fleet, viewer_api: Any) -> None:
    sample = node_sample("n-a", in_flight=None, serials=["A-0", "A-1"])
    sample["modules"][1].update(ecc_uncorrected=None, link_width_expected=None, util=None)
    r = fleet.client(fleet.key_a).post(URL, _batch("v2-000001", sample, contract=2), format="json")
    assert r.status_code == 202, r.content
    assert stored() == 1
    assert NodeSample.objects.get(node_id=fleet.node_a.pk).in_flight is None
    assert NodeStatus.objects.get(node=fleet.node_a).in_flight is None
    known, partial = (ModuleStatus.objects.get(module=m) for m in fleet.mod_a)
    assert known.ecc_uncorrected == 0 and known.util == 0.5
    assert partial.ecc_uncorrected is None and partial.link_width_expected is None and partial.util is None
    assert partial.link_width == 4 and partial.temp_c == 55.0
    assert ModuleSample.objects.filter(module_id=fleet.mod_a[1].pk, ecc_uncorrected__isnull=True).count() == 1

    telemetry_rollup(now=timezone.now())  # nulls roll up to null, not to zero, and do not break the rollup
    history = viewer_api.get(f"/api/v1/fleet/nodes/{fleet.node_a.pk}/history/").json()
    assert history["latest"]["in_flight"] is None
    assert history["points"][-1]["in_flight_max"] is None and history["points"][-1]["in_flight_mean"] is None
    modules = {m["serial"]: m for m in history["modules"]}
    assert modules["A-1"]["latest"]["ecc_uncorrected"] is None
    assert modules["A-1"]["latest"]["util"] is None
    assert modules["A-1"]["points"][-1]["ecc_uncorrected"] is None
    assert modules["A-0"]["latest"]["ecc_uncorrected"] == 0


def test_it_still_requires_every_field_be_present_in_version_2(fleet: Fleet) -> None:
    sample = node_sample("n-a", serials=["A-0"])
    del sample["in_flight"]
    del sample["modules"][0]["temp_c"]
    r = fleet.client(fleet.key_a).post(URL, _batch("v2-000002", sample, contract=2), format="json")
    assert r.status_code == 400
    assert r.json()["errors"] == {"node_samples[0].in_flight": ["is required (null when unknown)"],
                                  "node_samples[0].modules[0].temp_c": ["is required (null when unknown)"]}
    # cpu_util has no unknown: it is measured on the node itself.
    r = fleet.client(fleet.key_a).post(URL, _batch("v2-000003", node_sample("n-a", cpu_util=None), contract=2),
                                       format="json")
    assert r.status_code == 400 and r.json()["errors"] == {"node_samples[0].cpu_util": ["is required"]}


def test_it_describes_the_contract_in_the_schema(viewer_api: Any) -> None:
    schema = viewer_api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    batch = schema["components"]["schemas"]["TelemetryBatchInRequest"]["properties"]
    assert "contract" in batch
    sample = schema["components"]["schemas"]["NodeSampleInRequest"]["properties"]["in_flight"]
    assert sample.get("nullable") is True


def test_a_contract_4_sample_lists_the_processes_holding_its_modules_and_the_newest_list_is_kept(
        fleet: Fleet) -> None:
    agent = fleet.client(fleet.key_a)
    now = timezone.now()
    vllm = {"pid": 4242, "name": "vllm", "module": "A-0"}
    first = {**node_sample("n-a", now - dt.timedelta(seconds=10), ["A-0"]), "holders": [vllm]}
    assert agent.post(URL, _batch("hold-0001", first, contract=4), format="json").status_code == 202
    stored()
    row = NodeHolders.objects.get(node=fleet.node_a)
    assert row.holders == [vllm]
    # An older list arriving late does not replace a newer one; a newer empty one does.
    late = {**node_sample("n-a", now - dt.timedelta(seconds=20), ["A-0"]), "holders": []}
    newer = {**node_sample("n-a", now, ["A-0"]), "holders": []}
    assert agent.post(URL, _batch("hold-0002", late, contract=4), format="json").status_code == 202
    stored()
    assert NodeHolders.objects.get(node=fleet.node_a).holders == [vllm]
    assert agent.post(URL, _batch("hold-0003", newer, contract=4), format="json").status_code == 202
    stored()
    assert NodeHolders.objects.get(node=fleet.node_a).holders == []


@pytest.mark.parametrize(("holders", "contract", "path", "words"), [
    ([{"pid": 1, "name": "x", "module": "A-0"}], 3, "node_samples[0].holders", "need contract 4"),
    ([{"pid": 1, "name": "x", "module": "B-0"}], 4, "node_samples[0].holders[0].module", "one of this node's"),
    ([{"pid": 0, "name": "x", "module": "A-0"}], 4, "node_samples[0].holders[0].pid", "whole number"),
    ([{"pid": 1, "name": "x", "module": "A-0", "user": "root"}], 4, "node_samples[0].holders[0]", "unknown field"),
    ({"pid": 1}, 4, "node_samples[0].holders", "must be a list"),
])
def test_a_bad_holders_list_is_refused_naming_where(fleet: Fleet, holders: Any, contract: int, path: str,
                                                    words: str) -> None:
    sample = {**node_sample("n-a", None, ["A-0"]), "holders": holders}
    r = fleet.client(fleet.key_a).post(URL, _batch("hold-bad-01", sample, contract=contract), format="json")
    assert r.status_code == 400, r.content
    assert words in str(r.json()["errors"].get(path)), r.json()
    assert not NodeHolders.objects.exists() and not IngestBatch.objects.exists()
