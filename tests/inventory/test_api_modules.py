"""/api/v1/modules/: slots, the four-module limit, bulk create all-or-none, version drift."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState, Enforcement, RuleCode
from apps.inventory.models import (
    AdmissionRule,
    DriverRelease,
    FrameworkRelease,
    Module,
    Node,
    VersionCombination,
)
from tests.inventory.test_api_nodes import make_fleet

pytestmark = pytest.mark.django_db

MODULES = "/api/v1/modules/"


@pytest.fixture
def fleet(db: Any) -> dict[str, Any]:
    return make_fleet()


def module_body(fleet: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"serial": "AX-0001", "module_type": fleet["fast"].pk, "node": "n-r1-01", "slot": 0,
                            "driver_version": "2.3.1", "framework_version": "1.18.0"}
    body.update(overrides)
    return body


def test_it_installs_a_module_in_a_node_slot(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(MODULES, module_body(fleet), format="json")

    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["node"] == fleet["node"].pk and data["node_hostname"] == "n-r1-01"
    assert data["pinned_driver"] is None and data["drift"] is False
    assert admin_api.get(f"/api/v1/nodes/{fleet['node'].pk}/").json()["module_count"] == 1
    event = AuditEvent.objects.get(action="module.create")
    assert event.changes["serial"] == [None, "AX-0001"]
    assert event.request_id == response["X-Request-ID"]


def test_it_keeps_a_spare_module_outside_any_node(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(MODULES, module_body(fleet, node=None, slot=None), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["node"] is None and response.json()["node_hostname"] is None
    spares = admin_api.get(MODULES, {"unassigned": "true"}).json()["results"]
    assert [m["serial"] for m in spares] == ["AX-0001"]


def test_it_rejects_a_taken_slot_and_a_duplicate_serial(admin_api, fleet):  # type: ignore[no-untyped-def]
    assert admin_api.post(MODULES, module_body(fleet), format="json").status_code == 201

    response = admin_api.post(MODULES, module_body(fleet, serial="AX-0002"), format="json")
    assert response.status_code == 400
    assert "slot 0 of node n-r1-01 is taken by module AX-0001" in response.json()["errors"]["slot"]

    response = admin_api.post(MODULES, module_body(fleet, slot=1), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["serial"] == ["module with this serial already exists."]
    assert Module.objects.count() == 1


def test_it_rejects_a_fifth_module(admin_api, fleet):  # type: ignore[no-untyped-def]
    Node.objects.filter(pk=fleet["node"].pk).update(pcie_lanes=64, power_budget_w=500)
    for slot in range(4):
        response = admin_api.post(MODULES, module_body(fleet, serial=f"AX-{slot}", slot=slot), format="json")
        assert response.status_code == 201, response.json()

    response = admin_api.post(MODULES, module_body(fleet, serial="AX-5", slot=3), format="json")

    assert response.status_code == 400
    assert response.json()["errors"]["node"] == ["node n-r1-01 already holds 4 modules; the maximum is 4"]
    assert Module.objects.count() == 4


def test_it_rejects_a_slot_above_three(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(MODULES, module_body(fleet, slot=4), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["slot"] == ["Ensure this value is less than or equal to 3."]


def test_it_warns_when_a_slow_module_joins_the_hybrid_tier(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(MODULES, module_body(fleet, module_type=fleet["slow"].pk), format="json")
    assert response.status_code == 201
    node = admin_api.get(f"/api/v1/nodes/{fleet['node'].pk}/").json()
    assert node["warnings"] == [{
        "rule": "module_tops", "field": "tier",
        "message": "module type Axon AX-20 in slot 0 gives 20 INT8 TOPS; the hybrid tier needs at least 30"}]


def test_it_rejects_a_slow_module_when_the_rule_is_made_hard(admin_api, fleet):  # type: ignore[no-untyped-def]
    AdmissionRule.objects.filter(code=RuleCode.MODULE_TOPS).update(enforcement=Enforcement.REJECT)
    response = admin_api.post(MODULES, module_body(fleet, module_type=fleet["slow"].pk), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["node"] == [
        "module type Axon AX-20 in slot 0 gives 20 INT8 TOPS; the hybrid tier needs at least 30"]
    assert not Module.objects.exists()


def test_it_names_an_unknown_module_type_and_node(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(MODULES, module_body(fleet, module_type="AX-40", node="nope"), format="json")
    assert response.status_code == 404
    errors = response.json()["errors"]
    assert errors["module_type"] == ["unknown module type 'AX-40': no module type has this id"]
    assert errors["node"] == ["unknown node 'nope': no node has this id or hostname"]


def test_it_bulk_creates_modules_in_one_request(admin_api, fleet):  # type: ignore[no-untyped-def]
    items = [module_body(fleet, serial=f"AX-{i}", slot=i) for i in range(3)]
    response = admin_api.post(f"{MODULES}bulk/", {"items": items}, format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["created"] == 3
    assert [m["serial"] for m in response.json()["items"]] == ["AX-0", "AX-1", "AX-2"]
    assert AuditEvent.objects.filter(action="module.create").count() == 3
    assert set(AuditEvent.objects.values_list("request_id", flat=True)) == {response["X-Request-ID"]}


def test_bulk_create_rejects_the_whole_batch_when_one_item_breaks_a_rule(admin_api, fleet):  # type: ignore[no-untyped-def]
    items = [module_body(fleet, serial=f"AX-{i}", slot=i) for i in range(3)]
    items.append(module_body(fleet, serial="AX-3", slot=1))  # slot 1 is taken by items[1]

    response = admin_api.post(f"{MODULES}bulk/", {"items": items}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == {"items[3].slot": ["slot 1 of node n-r1-01 is taken by module AX-1"]}
    assert Module.objects.count() == 0
    assert not AuditEvent.objects.exists()


def test_bulk_create_names_the_item_with_a_wrong_type(admin_api, fleet):  # type: ignore[no-untyped-def]
    items = [module_body(fleet, serial="AX-0"), module_body(fleet, serial="AX-1", slot="one")]
    response = admin_api.post(f"{MODULES}bulk/", {"items": items}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == {"items[1].slot": ["A valid integer is required."]}
    assert Module.objects.count() == 0


def test_bulk_create_needs_a_list_of_items(admin_api, fleet):  # type: ignore[no-untyped-def]
    bodies: list[dict[str, Any]] = [{}, {"items": []}, {"items": {"serial": "x"}}]
    for body in bodies:
        response = admin_api.post(f"{MODULES}bulk/", body, format="json")
        assert response.status_code == 400, body
        assert "items" in response.json()["errors"]


def _pin(fleet: dict[str, Any], driver: str, framework: str) -> VersionCombination:
    combo = VersionCombination.objects.create(
        module_type=fleet["fast"], driver=DriverRelease.objects.create(vendor="Axon", version=driver),
        framework=FrameworkRelease.objects.create(name="axon-runtime", version=framework),
        state=CombinationState.PINNED)
    return combo


def test_it_reports_version_drift_from_the_pinned_combination(admin_api, fleet):  # type: ignore[no-untyped-def]
    _pin(fleet, "2.3.1", "1.18.0")
    Module.objects.create(serial="ok", module_type=fleet["fast"], node=fleet["node"], slot=0,
                          driver_version="2.3.1", framework_version="1.18.0")
    Module.objects.create(serial="old-driver", module_type=fleet["fast"], node=fleet["node"], slot=1,
                          driver_version="2.2.9", framework_version="1.18.0")
    Module.objects.create(serial="old-fw", module_type=fleet["fast"], node=fleet["node"], slot=2,
                          driver_version="2.3.1", framework_version="1.17.0")
    Module.objects.create(serial="unpinned-type", module_type=fleet["slow"], node=fleet["node"], slot=3,
                          driver_version="0.1", framework_version="0.1")

    drift = admin_api.get(f"{MODULES}drift/").json()
    assert [m["serial"] for m in drift["results"]] == ["old-driver", "old-fw"]
    assert drift["results"][0]["pinned_driver"] == "2.3.1" and drift["results"][0]["drift"] is True
    filtered = admin_api.get(MODULES, {"drift": "true"}).json()["results"]
    assert [m["serial"] for m in filtered] == ["old-driver", "old-fw"]
    in_line = admin_api.get(MODULES, {"drift": "false"}).json()["results"]
    assert [(m["serial"], m["drift"]) for m in in_line] == [("ok", False), ("unpinned-type", False)]
    by_driver = admin_api.get(MODULES, {"driver_version": "2.2.9", "node": "n-r1-01"}).json()["results"]
    assert [m["serial"] for m in by_driver] == ["old-driver"]


def test_a_list_item_equals_the_detail_of_the_same_module(admin_api, fleet):  # type: ignore[no-untyped-def]
    _pin(fleet, "2.3.1", "1.18.0")
    Module.objects.create(serial="a", module_type=fleet["fast"], node=fleet["node"], slot=0, driver_version="1")
    Module.objects.create(serial="b", module_type=fleet["slow"])
    for item in admin_api.get(MODULES).json()["results"]:
        assert admin_api.get(f"{MODULES}{item['id']}/").json() == item


def test_it_moves_a_module_to_another_slot_and_refreshes_warnings(admin_api, fleet):  # type: ignore[no-untyped-def]
    module = Module.objects.create(serial="a", module_type=fleet["fast"], node=fleet["node"], slot=0)
    response = admin_api.patch(f"{MODULES}{module.pk}/", {"slot": 2}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["slot"] == 2
    event = AuditEvent.objects.get(action="module.update")
    assert event.changes == {"slot": [0, 2]}
