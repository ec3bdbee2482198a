"""The rollouts API: preview (nothing written), create with its 400/409s naming the field, the
controls with Idempotency-Key, the nodes' steps; viewers read and cannot act."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, Node, VersionCombination
from apps.operations.choices import ACTIVE_DRAIN_STATES, Owner
from apps.operations.models import Drain
from apps.rollouts.choices import RolloutState, Step
from apps.rollouts.models import Rollout, RolloutNode
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.django_db


def _fleet(rfleet: RolloutFleet) -> list[Node]:
    return [rfleet.node(f"n-{i}") for i in range(1, 6)]


def _body(rfleet: RolloutFleet, **kw: Any) -> dict[str, Any]:
    return {"combination": rfleet.candidate.pk, "module_type": rfleet.mtype.pk, "suite": rfleet.suite.pk,
            "wave_size": 2, "max_unavailable": "2", "bake_s": 0, "reason": "new driver", **kw}


def _written() -> tuple[int, int]:
    return Rollout.objects.count(), RolloutNode.objects.count()


def test_preview_shows_waves_node_by_node_and_each_tiers_capacity_and_writes_nothing(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    _fleet(rfleet)
    audits = AuditEvent.objects.count()
    response = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet), format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert [len(w["nodes"]) for w in body["waves"]] == [1, 2, 2]
    assert body["waves"][0]["canary"] is True
    first = body["waves"][0]["nodes"][0]
    assert first["hostname"] == "n-1" and first["from"][0]["driver"] == "2.3.1" and first["to"]["driver"] == "2.4.0"
    cap = body["waves"][1]["capacity"][0]
    assert cap == {**cap, "active_before": 5, "out": 2, "active_during": 3, "floor": 2, "ok": True}
    health = body["gates"]["health"]  # evaluated now, as a dry run: no finding on the nodes in scope
    assert health["ok"] is True and health["findings"] == [] and body["failing"] == [], health
    assert _written() == (0, 0) and AuditEvent.objects.count() == audits


def test_create_refuses_bad_input_naming_the_field_and_writes_nothing(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    _fleet(rfleet)
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"wave_size": 0}, 400, "wave_size"),
        ({"max_unavailable": "120%"}, 400, "max_unavailable"),
        ({"module_type": rfleet.mtype.pk + 999}, 404, "module_type"),  # well formed, no such object
        ({"reason": ""}, 400, "reason"),
        ({"nodes": [999999]}, 404, "nodes"),
    ]
    for change, code, name in cases:
        response = operator_api.post("/api/v1/rollouts/", _body(rfleet, **change), format="json")
        assert response.status_code == code, (change, response.json())
        assert name in response.json()["errors"], response.json()
    # A module type the combination is not for.
    other = type(rfleet.mtype).objects.create(vendor="Other", model="O-1", form_factor="m2", int8_tops=10,
                                              power_w=5, pcie_lanes=4)
    response = operator_api.post("/api/v1/rollouts/", _body(rfleet, module_type=other.pk), format="json")
    assert response.status_code == 400 and "module_type" in response.json()["errors"], response.json()
    # A candidate (or blocked) combination: 409 naming its state.
    for state in (CombinationState.CANDIDATE, CombinationState.BLOCKED):
        VersionCombination.objects.filter(pk=rfleet.candidate.pk).update(state=state)
        response = operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json")
        assert response.status_code == 409 and response.json()["state"] == state, response.json()
        assert state in response.json()["detail"]
    VersionCombination.objects.filter(pk=rfleet.candidate.pk).update(state=CombinationState.VALIDATED)
    # A scope with no node of the type.
    empty = rfleet.node("empty", modules=0)
    response = operator_api.post("/api/v1/rollouts/", _body(rfleet, nodes=[empty.pk]), format="json")
    assert response.status_code == 400 and "nodes" in response.json()["errors"], response.json()
    assert _written() == (0, 0)


def test_one_active_rollout_per_module_type_and_viewers_cannot_act(
        rfleet: RolloutFleet, operator_api: APIClient, viewer_api: APIClient) -> None:
    _fleet(rfleet)
    assert viewer_api.post("/api/v1/rollouts/", _body(rfleet), format="json").status_code == 403
    first = operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json")
    assert first.status_code == 201, first.json()
    second = operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json")
    assert second.status_code == 409 and second.json()["field"] == "module_type", second.json()
    assert f"rollout #{first.json()['id']}" in second.json()["detail"]
    rid = first.json()["id"]
    assert viewer_api.get(f"/api/v1/rollouts/{rid}/").status_code == 200
    assert viewer_api.get(f"/api/v1/rollouts/{rid}/nodes/").status_code == 200
    assert viewer_api.post(f"/api/v1/rollouts/{rid}/pause/", {}, format="json").status_code == 403


def test_pause_resume_and_abort_through_the_api_with_idempotency_keys(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    _fleet(rfleet)
    created = operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json", HTTP_IDEMPOTENCY_KEY="c-1")
    assert created.status_code == 201, created.json()
    replay = operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json", HTTP_IDEMPOTENCY_KEY="c-1")
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    assert replay.json()["id"] == created.json()["id"] and Rollout.objects.count() == 1
    rollout = Rollout.objects.get()
    rfleet.tick(rollout)  # the canary starts
    paused = operator_api.post(f"/api/v1/rollouts/{rollout.pk}/pause/", {"reason": "look first"}, format="json",
                               HTTP_IDEMPOTENCY_KEY="p-1")
    assert paused.status_code == 200 and paused.json()["state"] == "paused", paused.json()
    again = operator_api.post(f"/api/v1/rollouts/{rollout.pk}/pause/", {"reason": "look first"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="p-1")
    assert again["Idempotent-Replayed"] == "true"
    for _ in range(30):  # the canary finishes its steps; nothing else starts
        rfleet.tick(rollout)
    assert set(RolloutNode.objects.filter(rollout=rollout, wave__gt=0).values_list("step", flat=True)) == {"pending"}
    assert RolloutNode.objects.get(rollout=rollout, wave=0).step == Step.DONE
    resumed = operator_api.post(f"/api/v1/rollouts/{rollout.pk}/resume/", {}, format="json")
    assert resumed.status_code == 200 and resumed.json()["state"] == "canary", resumed.json()
    rfleet.run_until(rollout, (RolloutState.WAVES,))
    rfleet.tick(rollout)  # wave 1 under way
    aborted = operator_api.post(f"/api/v1/rollouts/{rollout.pk}/abort/", {"reason": "stop here"}, format="json")
    assert aborted.status_code == 200 and aborted.json()["state"] == "aborted", aborted.json()
    assert operator_api.post(f"/api/v1/rollouts/{rollout.pk}/pause/", {}, format="json").status_code == 409
    for _ in range(30):
        rfleet.tick()
    steps = dict(RolloutNode.objects.filter(rollout=rollout).values_list("node__hostname", "step"))
    assert steps["n-1"] == Step.DONE and steps["n-4"] == Step.SKIPPED and steps["n-5"] == Step.SKIPPED
    assert {steps["n-2"], steps["n-3"]} == {Step.DONE}  # in progress at the abort: finished
    versions = dict(Module.objects.values_list("node__hostname", "driver_version"))
    assert versions == {"n-1": "2.4.0", "n-2": "2.4.0", "n-3": "2.4.0", "n-4": "2.3.1", "n-5": "2.3.1"}  # mixed
    assert not Drain.objects.filter(owner=Owner.ROLLOUT, state__in=ACTIVE_DRAIN_STATES).exists()
    nodes = operator_api.get(f"/api/v1/rollouts/{rollout.pk}/nodes/").json()
    rows = nodes["results"] if isinstance(nodes, dict) else nodes
    assert {r["hostname"]: r["reason"] for r in rows}["n-4"] == "the rollout was aborted before its turn"
    actions = set(AuditEvent.objects.filter(target_type="rollout", target_id=str(rollout.pk))
                  .values_list("action", flat=True))
    assert {"rollout.create", "rollout.pause", "rollout.resume", "rollout.abort"} <= actions


def test_rollback_through_the_api_puts_every_upgraded_node_back(rfleet: RolloutFleet,
                                                                operator_api: APIClient) -> None:
    _fleet(rfleet)
    created = operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json")
    rollout = Rollout.objects.get(pk=created.json()["id"])
    rfleet.run_until(rollout, (RolloutState.WAVES,))
    response = operator_api.post(f"/api/v1/rollouts/{rollout.pk}/rollback/", {"reason": "changed my mind"},
                                 format="json", HTTP_IDEMPOTENCY_KEY="rb-1")
    assert response.status_code == 200 and response.json()["state"] == "rolling_back", response.json()
    rollout = rfleet.run_until(rollout, (RolloutState.ROLLED_BACK,))
    assert "changed my mind" in rollout.message
    assert set(Module.objects.values_list("driver_version", flat=True)) == {"2.3.1"}
    assert set(Node.objects.values_list("state", flat=True)) == {NodeState.ACTIVE}
    assert not Drain.objects.filter(owner=Owner.ROLLOUT, state__in=ACTIVE_DRAIN_STATES).exists()
    rfleet.candidate.refresh_from_db()
    assert rfleet.candidate.state == CombinationState.VALIDATED


def test_the_preview_names_the_findings_active_on_the_nodes_in_scope(operator_api: APIClient,
                                                                     rfleet: RolloutFleet) -> None:
    from django.utils import timezone

    from apps.health.models import Finding

    node = _fleet(rfleet)[0]
    Finding.objects.create(check_name="ecc", subject_kind="node", subject_key=f"node:{node.pk}", node=node,
                           severity="warning", summary="corrected ECC errors rising", first_seen=timezone.now(),
                           last_seen=timezone.now())
    r = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet), format="json")
    assert r.status_code == 200, r.json()
    gate = r.json()["gates"]["health"]
    assert gate["ok"] is False and f"ecc on {node.hostname}" in gate["detail"], gate


def test_the_canary_is_a_number_of_nodes_or_a_percentage_and_anything_else_is_a_400_naming_it(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    _fleet(rfleet)
    for bad, says in ((0, "at least 1 node per tier"), ("0%", "above 0 and at most 100"),
                      ("150%", "above 0 and at most 100"), ("a few", "a number of nodes per tier (like 1) or a "
                                                                     "percentage"),
                      (2.5, "a number of nodes per tier"), (True, "a number of nodes per tier"), ("-2", "at least 1")):
        for url in ("/api/v1/rollouts/preview/", "/api/v1/rollouts/"):
            response = operator_api.post(url, _body(rfleet, canary=bad), format="json")
            assert response.status_code == 400, (bad, response.json())
            assert list(response.json()["errors"]) == ["canary"], response.json()
            assert says in response.json()["errors"]["canary"][0], (bad, response.json())
    assert _written() == (0, 0)
    preview = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet, canary="40%"), format="json").json()
    assert [n["hostname"] for n in preview["waves"][0]["nodes"]] == ["n-1", "n-2"]  # 40 % of 5
    created = operator_api.post("/api/v1/rollouts/", _body(rfleet, canary="40%"), format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["canary"] == "40%"
    assert RolloutNode.objects.filter(rollout_id=created.json()["id"], wave=0).count() == 2
    by_number = operator_api.get(f"/api/v1/rollouts/{created.json()['id']}/").json()
    assert by_number["canary"] == "40%"
    Rollout.objects.filter(pk=created.json()["id"]).update(state=RolloutState.ABORTED)
    again = operator_api.post("/api/v1/rollouts/", _body(rfleet, canary=3), format="json")
    assert again.status_code == 201 and again.json()["canary"] == 3, again.json()
