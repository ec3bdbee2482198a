"""One owner never clears another owner's hold; an operator may override, with a reason, audited."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.common.errors import Conflict
from apps.inventory.choices import NodeState
from apps.operations import lifecycle
from apps.operations.choices import DrainState, Owner

from .conftest import state_of

pytestmark = pytest.mark.django_db


def test_it_stops_the_health_owner_clearing_an_operators_drain(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    lifecycle.node_drain(node=node, reason="replace NIC", actor="alice")
    with pytest.raises(Conflict) as exc:
        lifecycle.node_uncordon(node=node, owner=Owner.HEALTH, reason="node healthy again", actor="health")
    assert "held by operator (alice: 'replace NIC')" in str(exc.value.detail)
    assert state_of(node) == NodeState.DRAINING


def test_it_stops_the_health_owner_clearing_it_over_the_api(fleet, operator_api, admin_api):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    assert operator_api.post(f"/api/v1/nodes/{node.pk}/drain/", {"reason": "replace NIC"},
                             format="json").status_code == 202
    r = operator_api.post(f"/api/v1/nodes/{node.pk}/uncordon/", {"owner": "health", "reason": "healthy"},
                          format="json")
    assert r.status_code == 403 and r.json()["detail"] == "owner: only admins may act as the health owner"
    r = admin_api.post(f"/api/v1/nodes/{node.pk}/uncordon/", {"owner": "health", "reason": "healthy"},
                       format="json")
    assert r.status_code == 409
    assert "the health owner cannot change or clear it" in r.json()["detail"]
    assert r.json()["holder"] == {"owner": "operator", "by": "test-operator", "reason": "replace NIC"}
    assert state_of(node) == NodeState.DRAINING


def test_it_lets_an_operator_override_with_a_reason_and_audits_it(fleet, operator_api):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    lifecycle.node_drain(node=node, owner=Owner.HEALTH, reason="ECC errors rising", actor="health")
    r = operator_api.post(f"/api/v1/nodes/{node.pk}/uncordon/", {"override": True}, format="json")
    assert r.status_code == 400 and "an override needs a reason" in r.json()["detail"]
    r = operator_api.post(f"/api/v1/nodes/{node.pk}/uncordon/", {"reason": "false alarm"}, format="json")
    assert r.status_code == 409 and "override" in r.json()["detail"]

    r = operator_api.post(f"/api/v1/nodes/{node.pk}/uncordon/", {"override": True, "reason": "false alarm: "
                          "counters reset after DIMM swap"}, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["drain"]["state"] == DrainState.RELEASED and r.json()["drain"]["overridden"] is True
    assert state_of(node) == NodeState.ACTIVE
    event = AuditEvent.objects.get(action="node.uncordon")  # one record for the action, the override in it
    assert event.actor_name == "test-operator" and "counters reset" in event.reason
    assert event.changes["override"] == {"holder": "health", "by": "operator"}
    assert event.changes["state"] == ["draining", "active"]


def test_it_refuses_a_second_owners_drain_with_the_reason(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    lifecycle.node_cordon(node=node, reason="looking at fans", actor="alice")
    with pytest.raises(Conflict) as exc:
        lifecycle.node_drain(node=node, owner=Owner.ROLLOUT, reason="driver 2.4.0", actor="rollout")
    assert "looking at fans" in str(exc.value.detail)
    assert state_of(node) == NodeState.CORDONED


def test_it_keeps_quarantine_owners_apart(fleet, operator_api):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    module = node.modules.get(slot=0)
    lifecycle.module_quarantine(module=module, owner=Owner.HEALTH, reason="temp 95 C", actor="health")
    r = operator_api.post(f"/api/v1/modules/{module.pk}/release/", {"reason": "ok"}, format="json")
    assert r.status_code == 409
    r = operator_api.post(f"/api/v1/modules/{module.pk}/release/", {"reason": "fan replaced", "override": True},
                          format="json")
    assert r.status_code == 200 and r.json()["module"]["state"] == "healthy"
    event = AuditEvent.objects.get(action="module.release")
    assert event.changes["override"] == {"holder": "health", "by": "operator"} and event.reason == "fan replaced"
