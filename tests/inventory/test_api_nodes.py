"""/api/v1/nodes/: reads, writes through the services, admission rules, errors, roles."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.audit.models import AuditEvent
from apps.inventory.choices import Enforcement, NodeState, RuleCode, TierKind
from apps.inventory.models import AdmissionRule, Module, ModuleType, Node, Rack, Tier

pytestmark = pytest.mark.django_db

NODES = "/api/v1/nodes/"


def make_fleet() -> dict[str, Any]:
    """One rack, a hybrid node with 16 lanes, a 40-TOPS module type and a 20-TOPS one."""
    rack = Rack.objects.create(name="r1")
    hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    access = Tier.objects.get(kind=TierKind.ACCESS_LOGIC)
    fast = ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor="m2", int8_tops=Decimal("40"),
                                     power_w=10, pcie_lanes=4)
    slow = ModuleType.objects.create(vendor="Axon", model="AX-20", form_factor="m2", int8_tops=Decimal("20"),
                                     power_w=8, pcie_lanes=4)
    node = Node.objects.create(hostname="n-r1-01", rack=rack, slot=1, tier=hybrid, pcie_lanes=16)
    return {"rack": rack, "hybrid": hybrid, "access": access, "fast": fast, "slow": slow, "node": node}


def node_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"hostname": "n-r1-02", "rack": "r1", "slot": 2, "tier": "hybrid_inference",
                            "cpu_clock_ghz": "3.20", "labels": {"zone": "row-a"}}
    body.update(overrides)
    return body


@pytest.fixture
def fleet(db: Any) -> dict[str, Any]:
    return make_fleet()


def test_it_creates_a_node_by_natural_keys_and_audits_it(admin_api, admin_user, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(), format="json", HTTP_X_REQUEST_ID="req-create-1")

    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["rack"] == fleet["rack"].pk and data["rack_name"] == "r1"
    assert data["tier"] == fleet["hybrid"].pk and data["tier_kind"] == "hybrid_inference"
    assert data["module_count"] == 0 and data["warnings"] == []
    assert data["state"] == "standby" and data["cpu_clock_ghz"] == "3.20"
    assert response["X-Request-ID"] == "req-create-1"
    event = AuditEvent.objects.get(action="node.create", target_id=str(data["id"]))
    assert event.actor == admin_user and event.actor_name == admin_user.username
    assert event.request_id == "req-create-1" and event.source == "api"
    assert event.changes["hostname"] == [None, "n-r1-02"]
    assert event.changes["rack"] == [None, fleet["rack"].pk]


def test_it_accepts_references_by_id(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(rack=fleet["rack"].pk, tier=str(fleet["hybrid"].pk)), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["tier_kind"] == "hybrid_inference"


def test_it_updates_with_patch_and_records_before_and_after(admin_api, fleet):  # type: ignore[no-untyped-def]
    node = fleet["node"]
    response = admin_api.patch(f"{NODES}{node.pk}/", {"memory_gb": 128, "labels": {"zone": "b"}}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["memory_gb"] == 128
    event = AuditEvent.objects.get(action="node.update", target_id=str(node.pk))
    assert event.changes == {"memory_gb": [64, 128], "labels": [{}, {"zone": "b"}]}
    assert event.request_id == response["X-Request-ID"] != ""


def test_it_deletes_a_node_and_audits_it(admin_api, fleet):  # type: ignore[no-untyped-def]
    node = fleet["node"]
    response = admin_api.delete(f"{NODES}{node.pk}/")
    assert response.status_code == 204
    assert not Node.objects.filter(pk=node.pk).exists()
    event = AuditEvent.objects.get(action="node.delete")
    assert event.changes["hostname"] == ["n-r1-01", None]
    assert event.request_id == response["X-Request-ID"]


def test_it_refuses_to_delete_a_node_that_holds_modules(admin_api, fleet):  # type: ignore[no-untyped-def]
    Module.objects.create(serial="m0", module_type=fleet["fast"], node=fleet["node"], slot=0)
    response = admin_api.delete(f"{NODES}{fleet['node'].pk}/")
    assert response.status_code == 409
    assert "still referenced by 1 object" in response.json()["detail"]
    assert Node.objects.filter(pk=fleet["node"].pk).exists()


def test_it_rejects_malformed_json(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.generic("POST", NODES, '{"hostname": "n-x", ', content_type="application/json")
    assert response.status_code == 400
    assert "the body is not valid JSON" in response.json()["detail"]
    assert Node.objects.count() == 1


def test_it_names_fields_with_wrong_types(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(slot="seven", cpu_cores=[8], ecc_memory="maybe",
                                               labels={"zone": 3}), format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["slot"] == ["A valid integer is required."]
    assert errors["cpu_cores"] == ["A valid integer is required."]
    assert errors["ecc_memory"] == ["Must be a valid boolean."]
    assert "labels must be an object of string keys and string values" in errors["labels"][0]
    assert Node.objects.count() == 1


def test_it_rejects_out_of_range_numbers_without_a_server_error(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(slot=10**30, rack=10**30), format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"slot", "rack"}


def test_it_names_unknown_references(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(rack="r9", tier=999), format="json")
    assert response.status_code == 404
    errors = response.json()["errors"]
    assert errors["rack"] == ["unknown rack 'r9': no rack has this id or name"]
    assert errors["tier"] == ["unknown tier 999: no tier has this id or kind"]
    assert Node.objects.count() == 1


def test_it_rejects_nul_characters_anywhere_without_a_server_error(admin_api, fleet):  # type: ignore[no-untyped-def]
    body = '{"hostname": "n\\u0000", "rack": "r\\u0000", "slot": 2, "tier": "x\\u0000", "labels": {"a": "\\u0000"}}'
    response = admin_api.generic("POST", NODES, body, content_type="application/json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"hostname", "rack", "tier", "labels"}
    assert admin_api.get(NODES, {"search": "\x00"}).status_code == 400
    # A filter's text with a NUL character matches nothing (no stored text holds one): an empty page.
    assert admin_api.get(NODES, {"rack": "\x00"}).json()["count"] == 0
    assert Node.objects.count() == 1


def test_it_rejects_a_taken_rack_slot_and_a_duplicate_hostname(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(slot=1), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["slot"] == ["slot 1 of rack r1 is taken by node n-r1-01"]

    response = admin_api.post(NODES, node_body(hostname="n-r1-01"), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["hostname"] == ["node with this hostname already exists."]
    assert Node.objects.count() == 1


def test_it_refuses_to_activate_a_node_without_ecc(admin_api, fleet):  # type: ignore[no-untyped-def]
    node = fleet["node"]
    Node.objects.filter(pk=node.pk).update(ecc_memory=False)

    response = admin_api.post(f"/api/v1/tiers/{node.tier_id}/scale/", {"desired": 1, "reason": "busy"},
                              format="json")

    assert response.status_code == 202
    assert "n-r1-01: no ECC memory" in response.json()["scale_request"]["note"]
    node.refresh_from_db()
    assert node.state == NodeState.STANDBY


@pytest.mark.parametrize("state", ["active", "draining", "drained", "retired"])
def test_it_refuses_a_state_in_a_patch_naming_the_action_to_use(admin_api, fleet, state):  # type: ignore[no-untyped-def]
    node = fleet["node"]
    response = admin_api.patch(f"{NODES}{node.pk}/", {"state": state}, format="json")
    assert response.status_code == 400
    [message] = response.json()["errors"]["state"]
    assert message.startswith("read-only: change it with the node's actions: ")
    assert f"POST /api/v1/nodes/{node.pk}/cordon/" in message and f"/api/v1/tiers/{node.tier_id}/scale/" in message
    node.refresh_from_db()
    assert node.state == NodeState.STANDBY
    assert not AuditEvent.objects.filter(action="node.update").exists()


def test_it_creates_a_node_in_standby_or_maintenance_only(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(state="active"), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["state"][0].startswith("a new node starts in standby or maintenance, not active")
    response = admin_api.post(NODES, node_body(state="maintenance"), format="json")
    assert response.status_code == 201 and response.json()["state"] == "maintenance"


def test_it_shows_soft_rule_warnings_and_filters_on_them(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.post(NODES, node_body(tier="access_logic", cpu_clock_ghz="2.60"), format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["warnings"] == [{
        "rule": "cpu_clock", "field": "cpu_clock_ghz",
        "message": "access & logic node n-r1-02 runs at 2.6 GHz; at least 3 GHz is recommended"}]
    listed = admin_api.get(NODES, {"has_warnings": "true"}).json()
    assert [n["hostname"] for n in listed["results"]] == ["n-r1-02"]
    clean = admin_api.get(NODES, {"has_warnings": "false"}).json()
    assert [n["hostname"] for n in clean["results"]] == ["n-r1-01"]


def test_it_rejects_a_soft_rule_an_admin_made_hard(admin_api, fleet):  # type: ignore[no-untyped-def]
    AdmissionRule.objects.filter(code=RuleCode.CPU_CLOCK).update(enforcement=Enforcement.REJECT)

    response = admin_api.post(NODES, node_body(tier="access_logic", cpu_clock_ghz="2.60"), format="json")

    assert response.status_code == 400
    assert response.json()["errors"]["cpu_clock_ghz"] == [
        "access & logic node n-r1-02 runs at 2.6 GHz; at least 3 GHz is recommended"]
    assert Node.objects.count() == 1


def test_it_filters_by_tier_rack_state_label_and_module_type(admin_api, fleet):  # type: ignore[no-untyped-def]
    rack2 = Rack.objects.create(name="r2")
    Node.objects.create(hostname="a-1", rack=rack2, slot=1, tier=fleet["access"], state=NodeState.ACTIVE,
                        labels={"zone": "b", "role": "edge"})
    Module.objects.create(serial="m0", module_type=fleet["slow"], node=fleet["node"], slot=0)

    def hosts(**params: Any) -> list[str]:
        response = admin_api.get(NODES, params)
        assert response.status_code == 200, response.json()
        return [n["hostname"] for n in response.json()["results"]]

    assert hosts(tier="access_logic") == ["a-1"]
    assert hosts(tier=fleet["hybrid"].pk) == ["n-r1-01"]
    assert hosts(rack="r2") == ["a-1"]
    assert hosts(rack=fleet["rack"].pk) == ["n-r1-01"]
    assert hosts(state="active") == ["a-1"]
    assert hosts(label="zone=b,role=edge") == ["a-1"]
    assert hosts(label="zone=b,role=core") == []
    assert hosts(module_type=fleet["slow"].pk) == ["n-r1-01"]
    assert hosts(module_type=fleet["fast"].pk) == []
    assert hosts(search="a-") == ["a-1"]
    assert hosts(ordering="-hostname") == ["n-r1-01", "a-1"]


def test_it_explains_bad_filter_values(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.get(NODES, {"label": "zone", "state": "asleep", "module_type": "x"})
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["label"] == ['label filter "zone" is not key=value, e.g. label=zone=row-a']
    assert "asleep is not one of the available choices" in errors["state"][0]
    assert errors["module_type"] == ["Enter a whole number."]


def test_a_list_item_equals_the_detail_of_the_same_node(admin_api, fleet):  # type: ignore[no-untyped-def]
    admin_api.post(NODES, node_body(tier="access_logic", cpu_clock_ghz="2.60"), format="json")
    Module.objects.create(serial="m0", module_type=fleet["fast"], node=fleet["node"], slot=0)
    listed = admin_api.get(NODES).json()["results"]
    for item in listed:
        assert admin_api.get(f"{NODES}{item['id']}/").json() == item


def test_it_lets_viewers_read_but_not_write(viewer_api, fleet):  # type: ignore[no-untyped-def]
    assert viewer_api.get(NODES).status_code == 200
    response = viewer_api.post(NODES, node_body(), format="json")
    assert response.status_code == 403
    assert response.json()["detail"] == "this action needs the admin role"
    assert viewer_api.patch(f"{NODES}{fleet['node'].pk}/", {"memory_gb": 1}, format="json").status_code == 403
    assert viewer_api.delete(f"{NODES}{fleet['node'].pk}/").status_code == 403
    assert Node.objects.count() == 1 and not AuditEvent.objects.exists()


def test_it_lets_operators_read_but_not_edit_inventory(operator_api, fleet):  # type: ignore[no-untyped-def]
    assert operator_api.get(NODES).status_code == 200
    assert operator_api.post(NODES, node_body(), format="json").status_code == 403


def test_it_turns_anonymous_callers_away(anon_api, fleet):  # type: ignore[no-untyped-def]
    assert anon_api.get(NODES).status_code == 401
    assert anon_api.post(NODES, node_body(), format="json").status_code == 401
    assert anon_api.delete(f"{NODES}{fleet['node'].pk}/").status_code == 401
    bad_token = anon_api.get(NODES, HTTP_AUTHORIZATION="Token not-a-token")
    assert bad_token.status_code == 401 and bad_token.json()["detail"] == "Invalid token."
    assert Node.objects.count() == 1


def test_it_works_with_a_browser_session_and_its_csrf_token(admin_user, fleet):  # type: ignore[no-untyped-def]
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin_user)
    assert browser.get(NODES).status_code == 200
    response = browser.post(NODES, node_body(), content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert Node.objects.count() == 1


def test_it_returns_404_for_a_missing_node(admin_api, fleet):  # type: ignore[no-untyped-def]
    response = admin_api.get(f"{NODES}99999/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No Node matches the given query."}


def test_it_rejects_bodies_over_the_limit(admin_api, fleet, settings):  # type: ignore[no-untyped-def]
    settings.MAX_BODY_BYTES = 1000
    response = admin_api.post(NODES, node_body(cpu_model="x" * 2000), format="json")
    assert response.status_code == 413
    assert Node.objects.count() == 1


def _many_nodes(fleet: dict[str, Any], n: int) -> None:
    nodes = Node.objects.bulk_create(
        Node(hostname=f"bulk-{i:04d}", rack=fleet["rack"], slot=100 + i, tier=fleet["hybrid"],
             labels={"zone": "a"}, warnings=[{"rule": "power_budget", "field": "power_budget_w", "message": "x"}])
        for i in range(n))
    Module.objects.bulk_create(Module(serial=f"bm-{i:04d}", module_type=fleet["fast"], node=node, slot=0)
                               for i, node in enumerate(nodes))


@pytest.mark.parametrize("url", ["/api/v1/nodes/", "/api/v1/modules/", "/api/v1/modules/drift/",
                                 "/api/v1/audit-events/", "/api/v1/racks/"])
def test_list_queries_do_not_grow_with_the_page_size(viewer_api, fleet, url):  # type: ignore[no-untyped-def]
    _many_nodes(fleet, 120)
    counts = []
    for limit in (5, 100):
        with CaptureQueriesContext(connection) as ctx:
            response = viewer_api.get(url, {"limit": limit})
        assert response.status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1] <= 5, counts


def test_node_list_query_count_is_small_and_fixed(viewer_api, fleet, django_assert_num_queries):  # type: ignore[no-untyped-def]
    _many_nodes(fleet, 120)
    # token with user and role (one query), the page with its total count (one query)
    with django_assert_num_queries(2):
        response = viewer_api.get(NODES, {"limit": 100, "has_warnings": "true", "label": "zone=a"})
    assert len(response.json()["results"]) == 100
    assert response.json()["count"] == 120


@pytest.mark.parametrize("url", [NODES, "/api/v1/modules/"])
def test_a_list_page_costs_two_queries_and_counts_right(viewer_api, fleet, django_assert_num_queries, url):  # type: ignore[no-untyped-def]
    _many_nodes(fleet, 120)
    total = (Node if url == NODES else Module).objects.count()
    assert total == 121 if url == NODES else total == 120
    for offset in (0, 50, total - 1):
        with django_assert_num_queries(2):  # token with user and role; the page with the total count
            body = viewer_api.get(url, {"limit": 50, "offset": offset}).json()
        assert body["count"] == total
        assert len(body["results"]) == min(50, total - offset)
        assert (body["next"] is None) == (offset + 50 >= total)
    with django_assert_num_queries(2):  # a filter is counted in the same query
        body = viewer_api.get(url, {"limit": 10, "search": "bulk-001" if url == NODES else "bm-001"}).json()
    assert body["count"] == 10 and len(body["results"]) == 10


@pytest.mark.parametrize("url", [NODES, "/api/v1/modules/"])
def test_a_page_past_the_end_is_empty_and_keeps_the_count(viewer_api, fleet, django_assert_num_queries, url):  # type: ignore[no-untyped-def]
    _many_nodes(fleet, 120)
    total = (Node if url == NODES else Module).objects.count()
    with django_assert_num_queries(3):  # no row carries the total: one count more
        body = viewer_api.get(url, {"limit": 50, "offset": 500}).json()
    assert body["count"] == total and body["results"] == []
    assert body["previous"] is not None and body["next"] is None
    with django_assert_num_queries(3):
        body = viewer_api.get(url, {"limit": 50, "offset": total}).json()
    assert body["count"] == total and body["results"] == []
    empty = viewer_api.get(url, {"hostname": "nothing"} if url == NODES else {"serial": "nothing"}).json()
    assert empty["count"] == 0 and empty["results"] == []


def test_grouped_and_paged_racks_count_the_racks(viewer_api, fleet):  # type: ignore[no-untyped-def]
    Rack.objects.bulk_create(Rack(name=f"r-{i:02d}") for i in range(11))
    _many_nodes(fleet, 30)  # 31 nodes in r1: one group, not 31 rows
    body = viewer_api.get("/api/v1/racks/", {"limit": 5, "offset": 10}).json()
    assert body["count"] == 12 and len(body["results"]) == 2
    assert {r["name"]: r["node_count"] for r in body["results"]} == {"r-10": 0, "r1": 31}
    assert viewer_api.get("/api/v1/racks/", {"limit": 5, "offset": 12}).json()["count"] == 12


def test_it_lists_the_actions_each_nodes_and_modules_state_allows(admin_api, fleet):  # type: ignore[no-untyped-def]
    node = fleet["node"]
    Node.objects.filter(pk=node.pk).update(state=NodeState.ACTIVE)
    module = Module.objects.create(serial="m-1", module_type=fleet["fast"], node=node, slot=0)
    Module.objects.filter(pk=module.pk).update(state="quarantined")

    listed = admin_api.get(NODES).json()["results"][0]
    detail = admin_api.get(f"{NODES}{node.pk}/").json()
    modules = admin_api.get("/api/v1/modules/").json()["results"]

    assert listed["allowed_actions"] == detail["allowed_actions"] == ["cordon", "drain", "maintenance"]
    assert [m["allowed_actions"] for m in modules] == [["release"]]
    created = admin_api.post(NODES, node_body(), format="json").json()
    assert created["state"] == "standby" and created["allowed_actions"] == ["maintenance"]


@pytest.mark.parametrize("url", [NODES, "/api/v1/modules/"])
def test_a_large_unfiltered_list_counts_by_the_estimate_and_exactly_on_request(  # type: ignore[no-untyped-def]
        viewer_api, fleet, django_assert_num_queries, monkeypatch, url):
    import apps.common.values as values

    _many_nodes(fleet, 120)
    model = Node if url == NODES else Module
    total = model.objects.count()
    monkeypatch.setattr(values, "ESTIMATE_COUNT_ABOVE", 50)
    with connection.cursor() as cur:  # the estimate: the table's rows as ANALYZE last saw them, here 20 fewer
        cur.execute(f"ANALYZE {model._meta.db_table}")
        cur.execute("UPDATE pg_class SET reltuples = %s WHERE oid = %s::regclass", [total - 20, model._meta.db_table])
    with django_assert_num_queries(2):  # the estimate rides in the page's query, the count is not run
        body = viewer_api.get(url, {"limit": 50}).json()
    assert body["count"] == total - 20 and body["count_exact"] is False
    assert len(body["results"]) == 50 and body["next"] is not None
    # Past the estimate the pages still go on to the last row, and the last page's count is exact.
    body = viewer_api.get(url, {"limit": 20, "offset": 80}).json()
    assert len(body["results"]) == 20 and body["count"] == 101 and body["count_exact"] is False
    assert body["next"] is not None
    body = viewer_api.get(url, {"limit": 50, "offset": 100}).json()
    assert len(body["results"]) == total - 100 and body["next"] is None
    assert body["count"] == total and body["count_exact"] is True
    with django_assert_num_queries(2):
        body = viewer_api.get(url, {"limit": 50, "count": "exact"}).json()
    assert body["count"] == total and body["count_exact"] is True
    body = viewer_api.get(url, {"limit": 10, "search": "bulk-001" if url == NODES else "bm-001"}).json()
    assert body["count"] == 10 and body["count_exact"] is True  # a filtered list is counted
