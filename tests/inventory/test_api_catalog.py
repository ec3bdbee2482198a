"""Racks, tiers, module types, releases, version combinations (pins), endpoints and node bulk create."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState
from apps.inventory.models import DriverRelease, FrameworkRelease, Module, Node, Rack, Tier, VersionCombination
from tests.inventory.test_api_nodes import make_fleet, node_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db: Any) -> dict[str, Any]:
    return make_fleet()


def test_it_refuses_to_delete_a_rack_that_holds_nodes(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.delete(f"/api/v1/racks/{fleet['rack'].pk}/")
    assert response.status_code == 409
    assert response.json() == {"detail": "cannot delete: still referenced by 1 object(s)"}
    assert Rack.objects.filter(pk=fleet["rack"].pk).exists()
    assert not AuditEvent.objects.exists()


def test_it_creates_and_deletes_an_empty_rack(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post("/api/v1/racks/", {"name": "r2", "row": "B", "power_budget_w": 4000}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["node_count"] == 0
    assert admin_api.delete(f"/api/v1/racks/{response.json()['id']}/").status_code == 204
    assert [e.action for e in AuditEvent.objects.order_by("id")] == ["rack.create", "rack.delete"]


def test_tiers_can_be_tuned_but_not_created_or_deleted(admin_api, fleet):  # type: ignore[no-untyped-def]
    tier = fleet["hybrid"]
    response = admin_api.patch(f"/api/v1/tiers/{tier.pk}/", {"min_active_nodes": 5, "max_active_nodes": 2},
                               format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["min_active_nodes"] == ["minimum 5 is above the maximum 2"]
    response = admin_api.patch(f"/api/v1/tiers/{tier.pk}/", {"max_active_nodes": 40, "kind": "x"}, format="json")
    assert response.status_code == 200
    assert response.json()["max_active_nodes"] == 40 and response.json()["kind"] == "hybrid_inference"
    assert admin_api.post("/api/v1/tiers/", {"kind": "x"}, format="json").status_code == 405
    assert admin_api.delete(f"/api/v1/tiers/{tier.pk}/").status_code == 405
    assert Tier.objects.count() == 3


def _combination(fleet: dict[str, Any], driver: str, state: str = CombinationState.CANDIDATE) -> VersionCombination:
    return VersionCombination.objects.create(
        module_type=fleet["fast"], driver=DriverRelease.objects.get_or_create(vendor="Axon", version=driver)[0],
        framework=FrameworkRelease.objects.get_or_create(name="axon-runtime", version="1.18.0")[0], state=state)


def test_it_creates_a_candidate_combination_from_releases(admin_api, fleet):  # type: ignore[no-untyped-def]
    driver = admin_api.post("/api/v1/driver-releases/", {"vendor": "Axon", "version": "2.4.0"}, format="json")
    framework = admin_api.post("/api/v1/framework-releases/", {"name": "axon-runtime", "version": "1.19.0"},
                               format="json")
    assert driver.status_code == framework.status_code == 201
    response = admin_api.post("/api/v1/version-combinations/", {
        "module_type": fleet["fast"].pk, "driver": driver.json()["id"], "framework": framework.json()["id"],
        "state": "pinned"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["state"] == "candidate"  # the state moves only through set-state
    assert response.json()["driver_version"] == "2.4.0" and response.json()["framework_version"] == "1.19.0"

    again = admin_api.post("/api/v1/version-combinations/", {
        "module_type": fleet["fast"].pk, "driver": driver.json()["id"], "framework": framework.json()["id"]},
        format="json")
    assert again.status_code == 400
    assert "already exists" in again.json()["detail"]


def test_it_refuses_to_pin_a_combination_that_was_not_validated(admin_api, fleet):  # type: ignore[no-untyped-def]
    combo = _combination(fleet, "2.4.0")
    response = admin_api.post(f"/api/v1/version-combinations/{combo.pk}/set-state/",
                              {"state": "pinned", "reason": "looks fine"}, format="json")
    assert response.status_code == 409
    assert response.json()["detail"] == ("only a validated combination can be pinned or rolled out; "
                                         "this one is candidate")
    assert response.json()["state"] == "candidate"
    combo.refresh_from_db()
    assert combo.state == CombinationState.CANDIDATE
    assert not AuditEvent.objects.exists()


def test_pinning_a_validated_combination_demotes_the_previous_pin(admin_api, admin_user, fleet):  # type: ignore[no-untyped-def]
    old = _combination(fleet, "2.3.1", CombinationState.PINNED)
    new = _combination(fleet, "2.4.0", CombinationState.VALIDATED)

    response = admin_api.post(f"/api/v1/version-combinations/{new.pk}/set-state/",
                              {"state": "pinned", "reason": "vectors passed on canary"}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["state"] == "pinned"
    old.refresh_from_db()
    assert old.state == CombinationState.VALIDATED
    pin = AuditEvent.objects.get(action="versioncombination.pinned")
    assert pin.actor == admin_user and pin.reason == "vectors passed on canary"
    assert pin.changes["state"] == ["validated", "pinned"]
    assert pin.request_id == response["X-Request-ID"]
    assert AuditEvent.objects.filter(action="versioncombination.unpin", target_id=str(old.pk)).exists()


def test_set_state_checks_its_body_and_role(admin_api, viewer_api, fleet):  # type: ignore[no-untyped-def]
    combo = _combination(fleet, "2.4.0")
    url = f"/api/v1/version-combinations/{combo.pk}/set-state/"
    response = admin_api.post(url, {"state": "golden"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["state"] == ['"golden" is not a valid choice.']
    assert viewer_api.post(url, {"state": "blocked"}, format="json").status_code == 403
    assert admin_api.post("/api/v1/version-combinations/99999/set-state/", {"state": "blocked"},
                          format="json").status_code == 404
    assert admin_api.post(url, {"state": "blocked", "reason": "MatMul drifts"}, format="json").status_code == 200
    combo.refresh_from_db()
    assert combo.state == CombinationState.BLOCKED


def test_combination_updates_change_notes_only(admin_api, fleet):  # type: ignore[no-untyped-def]
    combo = _combination(fleet, "2.4.0")
    other = DriverRelease.objects.create(vendor="Axon", version="9.9")
    response = admin_api.patch(f"/api/v1/version-combinations/{combo.pk}/",
                               {"notes": "canary on rack 2", "driver": other.pk}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["notes"] == "canary on rack 2"
    assert response.json()["driver_version"] == "2.4.0"


def test_endpoints_belong_to_the_external_tier(admin_api, fleet):  # type: ignore[no-untyped-def]
    body = {"name": "gpu-70b", "tier": "hybrid_inference", "kind": "gpu_cluster",
            "url": "https://gpu.example/v1", "model": "llm-70b"}
    response = admin_api.post("/api/v1/external-endpoints/", body, format="json")
    assert response.status_code == 400
    assert "endpoints belong to the external large model tier" in response.json()["errors"]["tier"][0]
    response = admin_api.post("/api/v1/external-endpoints/", {**body, "tier": "external_large_model"}, format="json")
    assert response.status_code == 201, response.json()
    assert admin_api.get("/api/v1/external-endpoints/", {"tier": "external_large_model"}).json()["count"] == 1


def test_it_bulk_creates_nodes_all_or_none(admin_api, fleet):  # type: ignore[no-untyped-def]
    items = [node_body(hostname=f"n-{i}", slot=10 + i) for i in range(3)]
    items[2]["rack"] = "nope"
    response = admin_api.post("/api/v1/nodes/bulk/", {"items": items}, format="json")
    assert response.status_code == 404  # well formed: it names a rack that does not exist
    assert response.json()["errors"] == {"items[2].rack": ["unknown rack 'nope': no rack has this id or name"]}
    assert Node.objects.count() == 1

    items[2]["rack"] = "r1"
    items[2]["slot"] = 10  # taken by items[0] earlier in the same batch
    response = admin_api.post("/api/v1/nodes/bulk/", {"items": items}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == {"items[2].__all__": ["Node with this Rack and Slot already exists."]}
    assert Node.objects.count() == 1 and not AuditEvent.objects.exists()

    items[2]["slot"] = 12
    response = admin_api.post("/api/v1/nodes/bulk/", {"items": items}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["created"] == 3
    assert [n["hostname"] for n in response.json()["items"]] == ["n-0", "n-1", "n-2"]
    assert all(n["module_count"] == 0 for n in response.json()["items"])
    assert Node.objects.count() == 4
    assert AuditEvent.objects.filter(action="node.create", request_id=response["X-Request-ID"]).count() == 3


def test_bulk_create_is_for_admins_only(viewer_api, anon_api, fleet):  # type: ignore[no-untyped-def]
    body = {"items": [node_body()]}
    assert viewer_api.post("/api/v1/nodes/bulk/", body, format="json").status_code == 403
    assert anon_api.post("/api/v1/nodes/bulk/", body, format="json").status_code == 401
    assert Node.objects.count() == 1


def test_put_replaces_a_rack_and_module_types_in_use_cannot_go(admin_api, fleet):  # type: ignore[no-untyped-def]
    rack = fleet["rack"]
    response = admin_api.put(f"/api/v1/racks/{rack.pk}/", {"name": "r1-renamed", "row": "Z", "position": 4,
                                                            "power_budget_w": 5000}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["name"] == "r1-renamed" and response.json()["node_count"] == 1
    assert AuditEvent.objects.get(action="rack.update").changes["name"] == ["r1", "r1-renamed"]
    missing = admin_api.put(f"/api/v1/racks/{rack.pk}/", {"row": "Y"}, format="json")
    assert missing.status_code == 400 and missing.json()["errors"]["name"] == ["This field is required."]

    Module.objects.create(serial="m0", module_type=fleet["fast"], node=fleet["node"], slot=0)
    response = admin_api.delete(f"/api/v1/module-types/{fleet['fast'].pk}/")
    assert response.status_code == 409
    assert admin_api.delete(f"/api/v1/module-types/{fleet['slow'].pk}/").status_code == 204
