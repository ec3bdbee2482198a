"""The API: roles, Idempotency-Key, the schedulable set, the schema."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.agents.models import NodeCommand
from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.operations.models import Drain, IdempotencyRecord

from .conftest import state_of

pytestmark = pytest.mark.django_db


def test_it_needs_the_operator_role_for_actions(fleet, viewer_api, anon_api, operator_api):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    url = f"/api/v1/nodes/{node.pk}/cordon/"
    r = viewer_api.post(url, {"reason": "x"}, format="json")
    assert r.status_code == 403 and "operator role" in r.json()["detail"]
    assert anon_api.post(url, {"reason": "x"}, format="json").status_code in (401, 403)
    assert state_of(node) == NodeState.ACTIVE
    assert viewer_api.get("/api/v1/drains/").status_code == 200
    assert viewer_api.post(f"/api/v1/tiers/{fleet.tier.pk}/scale/", {"desired": 1}, format="json").status_code == 403
    r = operator_api.post(url, {"reason": "x"}, format="json")
    assert r.status_code == 200 and r.json()["node"]["state"] == NodeState.CORDONED


def test_it_replays_an_idempotency_key_with_one_effect(fleet, operator_api):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    url = f"/api/v1/nodes/{node.pk}/drain/"
    body = {"reason": "rack move", "deadline_s": 600}
    first = operator_api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    second = operator_api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert first.status_code == second.status_code == 202
    assert first.json() == second.json()
    assert second["Idempotent-Replayed"] == "true"
    assert Drain.objects.count() == 1
    assert AuditEvent.objects.filter(action="node.drain").count() == 1
    assert NodeCommand.objects.filter(kind="drain").count() == 1

    other = operator_api.post(url, {"reason": "something else"}, format="json", HTTP_IDEMPOTENCY_KEY="k-123")
    assert other.status_code == 422 and "was used for another request" in other.json()["detail"]


def test_it_answers_the_same_drain_again_without_a_key(fleet, operator_api):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    url = f"/api/v1/nodes/{node.pk}/drain/"
    assert operator_api.post(url, {"reason": "a"}, format="json").status_code == 202
    r = operator_api.post(url, {"reason": "a"}, format="json")
    assert r.status_code == 200 and r.json()["changed"] is False
    assert Drain.objects.count() == 1


def test_it_does_not_store_a_failed_request_under_its_key(fleet, operator_api):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1", state=NodeState.STANDBY)
    url = f"/api/v1/nodes/{node.pk}/drain/"
    assert operator_api.post(url, {"reason": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k-9").status_code == 409
    assert not IdempotencyRecord.objects.exists()


def test_it_leaves_cordoned_nodes_and_quarantined_modules_out_of_the_schedulable_set(  # type: ignore[no-untyped-def]
        fleet, operator_api, viewer_api):
    a, b, c = fleet.node("n-a"), fleet.node("n-b"), fleet.node("n-c")
    fleet.node("n-s", state=NodeState.STANDBY)
    operator_api.post(f"/api/v1/nodes/{b.pk}/cordon/", {"reason": "x"}, format="json")
    operator_api.post(f"/api/v1/nodes/{c.pk}/drain/", {"reason": "x"}, format="json")
    module = a.modules.get(slot=1)
    r = operator_api.post(f"/api/v1/modules/{module.pk}/quarantine/", {"reason": "drifting Gelu"}, format="json")
    assert r.status_code == 200 and r.json()["module"]["state"] == "quarantined"
    body = viewer_api.get("/api/v1/schedulable/").json()
    hybrid = body["tiers"][fleet.tier.kind]
    assert [n["hostname"] for n in hybrid] == ["n-a"]
    assert [m["serial"] for m in hybrid[0]["modules"]] == ["n-a-m0"]

    gateway = APIClient()
    gateway.credentials(HTTP_AUTHORIZATION=f"Agent {fleet.gateway_key()}")
    assert gateway.get("/api/v1/schedulable/").json()["tiers"] == body["tiers"]


def test_it_publishes_the_actions_in_the_schema(admin_api):  # type: ignore[no-untyped-def]
    paths = admin_api.get("/api/schema/?format=json").json()["paths"]
    for p in ["/api/v1/nodes/{id}/cordon/", "/api/v1/nodes/{id}/drain/", "/api/v1/nodes/{id}/uncordon/",
              "/api/v1/modules/{id}/quarantine/", "/api/v1/tiers/{id}/scale/", "/api/v1/schedulable/",
              "/api/v1/autoscaler-policies/", "/api/v1/autoscaler-decisions/", "/api/v1/drains/"]:
        assert p in paths, p
    params = [x["name"] for x in paths["/api/v1/nodes/{id}/drain/"]["post"]["parameters"]]
    assert "Idempotency-Key" in params


def test_it_forgets_idempotency_keys_after_a_day(fleet, operator_api):  # type: ignore[no-untyped-def]
    import datetime as dt

    from django.utils import timezone

    from apps.operations.retention import operations_retention

    node = fleet.node("n-1")
    url = f"/api/v1/nodes/{node.pk}/cordon/"
    operator_api.post(url, {"reason": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="old-key")
    assert operations_retention(now=timezone.now() + dt.timedelta(hours=1))["idempotency_keys"] == 0
    assert operations_retention(now=timezone.now() + dt.timedelta(hours=25))["idempotency_keys"] == 1
    assert not IdempotencyRecord.objects.exists()


def test_it_seeds_dry_run_policies_for_the_demo(db):  # type: ignore[no-untyped-def]
    from apps.operations.demo import seed_operations_demo
    from apps.operations.models import AutoscalerPolicy

    assert seed_operations_demo() == {"nodes_activated": 0, "autoscaler_policies_created": 2}
    assert seed_operations_demo() == {"nodes_activated": 0, "autoscaler_policies_created": 0}
    assert set(AutoscalerPolicy.objects.values_list("dry_run", "enabled")) == {(True, True)}


def test_it_lists_drains_with_what_they_wait_for_in_few_queries(  # type: ignore[no-untyped-def]
        fleet, viewer_api, django_assert_max_num_queries):
    from apps.operations import lifecycle

    for i in range(6):
        node = fleet.node(f"n-{i}")
        lifecycle.node_drain(node=node, reason="batch", actor="alice")
        if i % 2:
            fleet.report(node, in_flight=i)
    with django_assert_max_num_queries(8):
        body = viewer_api.get("/api/v1/drains/?active=true").json()
    texts = sorted(d["waiting_for"].split(";")[0] for d in body["results"])
    assert texts == ["waiting for 1 in-flight request", "waiting for 3 in-flight requests",
                     "waiting for 5 in-flight requests"] + ["waiting for a report from the node (none yet)"] * 3


def test_it_sends_the_drain_to_the_node_agent(fleet, operator_api):  # type: ignore[no-untyped-def]
    from apps.agents.choices import AgentKind
    from apps.agents.services import agent_token_issue

    node = fleet.node("n-1")
    _, key = agent_token_issue(kind=AgentKind.NODE, node=node, actor="test")
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    assert agent.get("/api/v1/agent/commands/?wait=0").json() == []
    drain = operator_api.post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": "r"}, format="json").json()["drain"]
    commands = agent.get("/api/v1/agent/commands/?wait=0").json()
    assert [(c["kind"], c["args"]["drain"]) for c in commands] == [("drain", drain["id"])]
    ack = agent.post(f"/api/v1/agent/commands/{commands[0]['id']}/ack/",
                     {"status": "succeeded", "result": {"in_flight": 2}}, format="json")
    assert ack.status_code == 200
