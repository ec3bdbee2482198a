"""The admin's node and module forms set where a new one starts and refuse a state
change afterwards with a form error naming the action to use (the node lifecycle
owns states)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.inventory.models import Module, Node
from tests.agent.fleet import make_node

pytestmark = pytest.mark.django_db


def _form(client: Client, url: str) -> dict[str, Any]:
    """The change form's current values, as a browser would post them back."""
    page = client.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is None:
            continue
        data[name] = value.pk if hasattr(value, "pk") else value
    data["labels"] = "{}"
    return data


def test_it_refuses_a_node_state_change_in_the_admin_with_a_form_error(admin_user: User) -> None:
    node = make_node("n-adm-01", modules=0)
    client = Client()
    client.force_login(admin_user)
    url = f"/admin/inventory/node/{node.pk}/change/"
    data = _form(client, url)
    data.update({"state": NodeState.DRAINING, "modules-TOTAL_FORMS": 0, "modules-INITIAL_FORMS": 0})
    response = client.post(url, data)
    assert response.status_code == 200  # the form again, with its errors
    errors = response.context["adminform"].form.errors["state"]
    assert errors == [f"the state is read-only here: change it with the node's actions: POST "
                      f"/api/v1/nodes/{node.pk}/cordon/, /drain/, /uncordon/, /maintenance/ or /maintenance/leave/, "
                      f"or scale its tier: POST /api/v1/tiers/{node.tier_id}/scale/"]
    node.refresh_from_db()
    assert node.state == NodeState.ACTIVE
    assert not AuditEvent.objects.filter(action="node.update").exists()


def test_it_adds_a_node_only_in_standby_or_maintenance_in_the_admin(admin_user: User) -> None:
    client = Client()
    client.force_login(admin_user)
    make_node("n-adm-02", modules=0, state="standby")
    template = Node.objects.get(hostname="n-adm-02")
    data = {"hostname": "n-adm-03", "rack": template.rack_id, "slot": 9, "tier": template.tier_id,
            "state": NodeState.ACTIVE, "cpu_model": "x", "cpu_cores": 8, "cpu_clock_ghz": "3.2", "l3_cache_mb": 32,
            "memory_gb": 64, "memory_channels": 8, "ecc_memory": "on", "pcie_lanes": 16, "nic_kind": "roce_v2",
            "nic_speed_gbps": 100, "cpu_power_w": 65, "power_budget_w": 150, "labels": "{}",
            "modules-TOTAL_FORMS": 0, "modules-INITIAL_FORMS": 0}
    response = client.post("/admin/inventory/node/add/", data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["state"] == ["a new one starts standby or maintenance"]
    data["state"] = NodeState.STANDBY
    response = client.post("/admin/inventory/node/add/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Node.objects.get(hostname="n-adm-03").state == NodeState.STANDBY


def test_it_refuses_a_module_state_change_in_the_admin(admin_user: User) -> None:
    node = make_node("n-adm-04", modules=1)
    module = Module.objects.get(node=node)
    client = Client()
    client.force_login(admin_user)
    url = f"/admin/inventory/module/{module.pk}/change/"
    data = _form(client, url)
    data["state"] = "quarantined"
    response = client.post(url, data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["state"] == [
        f"the state is read-only here: change it with POST /api/v1/modules/{module.pk}/quarantine/ or /release/"]
    module.refresh_from_db()
    assert module.state == "healthy"
