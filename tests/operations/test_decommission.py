"""Decommission: a node that no longer serves has its agent's keys revoked and is retired, for good; its
history stays and it leaves the fleet's counts. A serving node is drained first; admins only; twice is once."""

from __future__ import annotations

from rest_framework.test import APIClient

from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.telemetry.selectors.snapshot import fleet_snapshot
from tests.operations.conftest import Fleet, state_of


def _total(fleet: Fleet) -> int:
    """The hybrid tier's node count as every page and the capacity guard read it."""
    return int(next(t for t in fleet_snapshot(window_minutes=None)["tiers"] if t["kind"] == fleet.tier.kind)["total"])


def _agent(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


def test_it_revokes_the_keys_and_retires_a_node_that_no_longer_serves(fleet: Fleet, admin_api: APIClient,
                                                                       operator_api: APIClient) -> None:
    node = fleet.node("n-old", state=NodeState.DRAINED)
    fleet.node("n-stays")
    _, key = agent_token_issue(kind=AgentKind.NODE, node=node, actor="test")
    assert _agent(key).get("/api/v1/agent/self/").status_code == 200
    before = _total(fleet)

    assert operator_api.post(f"/api/v1/nodes/{node.pk}/decommission/", {"reason": "end of life"},
                             format="json").status_code == 403
    r = admin_api.post(f"/api/v1/nodes/{node.pk}/decommission/", {}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["reason"]
    r = admin_api.post(f"/api/v1/nodes/{node.pk}/decommission/", {"reason": "end of life"}, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["changed"] and r.json()["node"]["state"] == "retired" and state_of(node) == NodeState.RETIRED
    assert _agent(key).get("/api/v1/agent/self/").status_code == 401
    assert _total(fleet) == before - 1
    assert admin_api.get(f"/api/v1/nodes/{node.pk}/").json()["state"] == "retired"  # the record stays
    actions = list(AuditEvent.objects.filter(target_id__in=[str(node.pk)]).values_list("action", flat=True))
    assert "node.retire" in actions

    again = admin_api.post(f"/api/v1/nodes/{node.pk}/decommission/", {"reason": "end of life"}, format="json")
    assert again.status_code == 200 and not again.json()["changed"]
    assert AuditEvent.objects.filter(action="node.retire").count() == 1


def test_a_serving_node_is_drained_first(fleet: Fleet, admin_api: APIClient) -> None:
    node = fleet.node("n-busy")
    _, key = agent_token_issue(kind=AgentKind.NODE, node=node, actor="test")
    r = admin_api.post(f"/api/v1/nodes/{node.pk}/decommission/", {"reason": "end of life"}, format="json")
    assert r.status_code == 409 and r.json()["detail"] == (
        f"node n-busy is active: drain it first (POST /api/v1/nodes/{node.pk}/drain/), then decommission it")
    assert state_of(node) == NodeState.ACTIVE and _agent(key).get("/api/v1/agent/self/").status_code == 200
