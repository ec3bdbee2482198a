"""The read-only inventory pages: fleet overview, the node list (load columns, sorting, the saved view),
node detail, combinations, drift."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.inventory import services
from apps.inventory.choices import CombinationState, NodeState, TierKind
from apps.inventory.models import (
    DriverRelease,
    FrameworkRelease,
    Module,
    ModuleType,
    Node,
    Rack,
    Tier,
    VersionCombination,
)
from apps.operations import lifecycle
from apps.telemetry.models import ModuleStatus, NodeStatus

pytestmark = pytest.mark.django_db


def _create(instance: Any) -> Any:
    """Create through the inventory service; a node meant to serve is put to work through the lifecycle."""
    state = getattr(instance, "state", None)
    serving = isinstance(instance, Node) and state == NodeState.ACTIVE
    if serving:
        instance.state = NodeState.STANDBY
    created = services.inventory_create(instance=instance, actor="test-fixture")
    if serving:
        lifecycle.node_activate(node=created.pk, actor="test-fixture", reason="serving in the fixture")
        created.refresh_from_db()
    return created


@pytest.fixture
def fleet(db: Any) -> dict[str, Any]:
    """Two racks; a hybrid node with 3 modules on an 8-lane board (a warning), one of them on an old
    driver (drift); a standby access node; an Kestrel type with a pin and a candidate."""
    hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    access = Tier.objects.get(kind=TierKind.ACCESS_LOGIC)
    r1 = _create(Rack(name="rack-1"))
    r2 = _create(Rack(name="rack-2"))
    ax = _create(ModuleType(vendor="Axon", model="AX-40", form_factor="m2", int8_tops=Decimal("40"), power_w=10,
                            pcie_lanes=4))
    kv = _create(ModuleType(vendor="Kestrel", model="KV-32", form_factor="som", int8_tops=Decimal("32"),
                            power_w=15, pcie_lanes=4))
    d_old = _create(DriverRelease(vendor="Axon", version="2.2.9"))
    d_pin = _create(DriverRelease(vendor="Axon", version="2.3.1"))
    d_new = _create(DriverRelease(vendor="Axon", version="2.4.0"))
    fw = _create(FrameworkRelease(name="axon-runtime", version="1.18.0"))
    fw_new = _create(FrameworkRelease(name="axon-runtime", version="1.19.0"))
    pin = _create(VersionCombination(module_type=ax, driver=d_pin, framework=fw))
    services.combination_set_state(combination=pin, state=CombinationState.VALIDATED, actor="t", by_validation=True)
    services.combination_set_state(combination=pin, state=CombinationState.PINNED, actor="t")
    _create(VersionCombination(module_type=ax, driver=d_old, framework=fw, state=CombinationState.VALIDATED))
    _create(VersionCombination(module_type=ax, driver=d_new, framework=fw_new))
    busy = _create(Node(hostname="n-r1-07", rack=r1, slot=7, tier=hybrid, state=NodeState.ACTIVE, pcie_lanes=8,
                        labels={"zone": "row-a"}, cpu_model="EPYC 4585PX"))
    quiet = _create(Node(hostname="n-r2-01", rack=r2, slot=1, tier=access, state=NodeState.STANDBY,
                         labels={"zone": "row-b"}))
    for slot, driver in enumerate(["2.3.1", "2.3.1", "2.2.9"]):
        _create(Module(serial=f"AX-107{slot}", module_type=ax, node=busy, slot=slot, driver_version=driver,
                       framework_version="1.18.0", firmware_version="1.0.4"))
    busy.refresh_from_db()
    return {"busy": busy, "quiet": quiet, "ax": ax, "kv": kv, "r1": r1, "r2": r2, "hybrid": hybrid,
            "access": access}


@pytest.fixture
def viewer(viewer_user: User) -> Client:
    client = Client()
    client.force_login(viewer_user)
    return client


PAGES = ["/", "/nodes/", "/combinations/", "/drift/"]


@pytest.mark.parametrize("url", PAGES)
def test_it_sends_anonymous_users_to_login(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={url}"


def test_it_forbids_a_user_without_a_role(client: Client, db: Any) -> None:
    user = User.objects.create_user("nobody", password="pw-nobody-1")
    client.force_login(user)
    assert client.get("/nodes/").status_code == 403


def test_it_logs_in_through_the_form_and_lands_on_the_overview(client: Client, viewer_user: User) -> None:
    page = client.get("/login/?next=/nodes/")
    assert page.status_code == 200 and b'name="password"' in page.content
    bad = client.post("/login/", {"username": "test-viewer", "password": "wrong"})
    assert b"Wrong username or password" in bad.content
    ok = client.post("/login/", {"username": "test-viewer", "password": "pw-viewer", "next": "/nodes/"})
    assert ok.status_code == 302 and ok["Location"] == "/nodes/"
    assert client.get("/").status_code == 200


def test_it_shows_counts_per_tier_and_nodes_with_warnings(viewer: Client, fleet: dict[str, Any]) -> None:
    response = viewer.get("/")
    assert response.status_code == 200
    tiers = {t["tier"].kind: t for t in response.context["tiers"]}
    assert tiers[TierKind.HYBRID_INFERENCE]["nodes"] == 1
    assert tiers[TierKind.HYBRID_INFERENCE]["modules"] == 3
    assert tiers[TierKind.HYBRID_INFERENCE]["warnings"] == 1
    assert [s["value"] for s in tiers[TierKind.ACCESS_LOGIC]["states"]] == ["standby"]
    assert tiers[TierKind.EXTERNAL_LARGE_MODEL]["nodes"] == 0
    body = response.content.decode()
    assert "modules need 12 PCIe lanes; node n-r1-07 provides 8" in body
    assert "1 module off the pinned versions" in body
    assert 'href="/drift/"' in body


def test_it_lists_nodes_with_state_and_module_count(viewer: Client, fleet: dict[str, Any]) -> None:
    response = viewer.get("/nodes/")
    body = response.content.decode()
    assert [n.hostname for n in response.context["nodes"]] == ["n-r1-07", "n-r2-01"]
    assert response.context["nodes"][0].module_count == 3
    assert f'href="/nodes/{fleet["busy"].pk}/"' in body
    assert "Standby" in body and "zone=row-a" in body


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("tier={hybrid}", ["n-r1-07"]),
        ("rack={r2}", ["n-r2-01"]),
        ("state=standby", ["n-r2-01"]),
        ("label=zone%3Drow-b", ["n-r2-01"]),
        ("label=zone%3Drow-a,cpu%3Dfast", []),
        ("label=rack%3Dr1", []),
        ("tier=hybrid_inference", ["n-r1-07"]),
        ("rack=rack-2", ["n-r2-01"]),
        ("state=standby&state=active", ["n-r1-07", "n-r2-01"]),
        ("module_type={ax}", ["n-r1-07"]),
        ("module_type={kv}", []),
        ("q=r2-0", ["n-r2-01"]),
        ("q=ax-1072", ["n-r1-07"]),
        ("q=epyc", ["n-r1-07"]),
        ("has_warnings=true", ["n-r1-07"]),
        ("has_warnings=false", ["n-r2-01"]),
        ("tier={hybrid}&state=standby", []),
    ],
)
def test_it_filters_nodes(viewer: Client, fleet: dict[str, Any], query: str, expected: list[str]) -> None:
    ids = {k: v.pk for k, v in fleet.items()}
    response = viewer.get("/nodes/?" + query.format(**ids))
    assert response.status_code == 200
    assert [n.hostname for n in response.context["nodes"]] == expected


@pytest.mark.parametrize("query", ["state=exploded", "label=zone", "module_type=x"])
def test_it_reports_an_invalid_filter_instead_of_ignoring_it(viewer: Client, fleet: dict[str, Any],
                                                              query: str) -> None:
    response = viewer.get("/nodes/?" + query)
    assert list(response.context["nodes"]) == []
    assert "Filter errors" in response.content.decode()


def test_it_keeps_the_chosen_filters_in_the_form(viewer: Client, fleet: dict[str, Any]) -> None:
    body = viewer.get(f"/nodes/?tier={fleet['hybrid'].pk}&state=standby&q=n-r&has_warnings=true").content.decode()
    assert f'<option value="{fleet["hybrid"].pk}" selected>Hybrid inference</option>' in body
    assert '<option value="standby" selected>Standby</option>' in body
    assert '<option value="true" selected>with warnings</option>' in body
    assert 'name="q" value="n-r"' in body


def test_it_paginates_nodes_keeping_the_filters(viewer: Client, fleet: dict[str, Any]) -> None:
    rack = fleet["r1"]
    for i in range(60):
        Node.objects.create(hostname=f"p-{i:03d}", rack=rack, slot=100 + i, tier=fleet["access"],
                            labels={"zone": "row-a"})
    first = viewer.get("/nodes/?label=zone%3Drow-a")
    assert len(first.context["nodes"]) == 50
    assert first.context["paginator"].count == 61
    assert "?label=zone%3Drow-a&amp;page=2" in first.content.decode()
    second = viewer.get("/nodes/?label=zone%3Drow-a&page=2")
    assert [n.hostname for n in second.context["nodes"]][-1] == "p-059"
    assert len(second.context["nodes"]) == 11


def test_it_lists_nodes_in_a_bounded_number_of_queries(viewer: Client, fleet: dict[str, Any]) -> None:
    def count(url: str = "/nodes/") -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer.get(url).status_code == 200
        return len(ctx.captured_queries)

    before = count(), count("/nodes/?sort=-in_flight"), count("/nodes/?state=active&sort=module_util")
    for i in range(30):
        node = Node.objects.create(hostname=f"x-{i:03d}", rack=fleet["r2"], slot=10 + i, tier=fleet["hybrid"])
        module = Module.objects.create(serial=f"X-{i}", module_type=fleet["kv"], node=node, slot=0)
        _report(node, cpu=i / 30, in_flight=i, utils={module: 0.5})
    after = count(), count("/nodes/?sort=-in_flight"), count("/nodes/?state=active&sort=module_util")
    assert after == before
    assert max(after) <= 12


def _report(node: Node, *, cpu: float, in_flight: int | None, utils: dict[Module, float | None]) -> None:
    """The newest report of ``node`` and its modules, as the telemetry writer leaves it."""
    now = timezone.now()
    NodeStatus.objects.create(node=node, time=now, last_seen=now, cpu_util=cpu, mem_util=0.4, load1=1.0,
                              in_flight=in_flight, threads=16)
    for module, util in utils.items():
        ModuleStatus.objects.create(module=module, node=node, time=now, last_seen=now, util=util)


@pytest.fixture
def loaded(fleet: dict[str, Any]) -> dict[str, Any]:
    """The fleet with reports: the busy node at 62% CPU, modules at 40/60/80%, 5 in flight; an idle
    active node with 0 in flight (known), 10% CPU, no modules; the quiet node has never reported."""
    busy = fleet["busy"]
    _report(busy, cpu=0.62, in_flight=5, utils=dict(zip(busy.modules.order_by("slot"), [0.4, 0.6, 0.8],
                                                        strict=True)))
    idle = _create(Node(hostname="n-r2-02", rack=fleet["r2"], slot=2, tier=fleet["hybrid"], state=NodeState.ACTIVE))
    _report(idle, cpu=0.1, in_flight=0, utils={})
    return {**fleet, "idle": idle}


def _cells(body: str, node: Node) -> dict[str, str]:
    row = re.search(rf'<tr data-node="{node.pk}".*?</tr>', body, re.S)
    assert row is not None
    return dict(re.findall(r'data-cell="(\w+)">([^<]*)<', row.group(0)))


def test_it_shows_each_nodes_newest_cpu_module_use_and_requests_in_flight(viewer: Client,
                                                                          loaded: dict[str, Any]) -> None:
    body = viewer.get("/nodes/").content.decode()
    assert _cells(body, loaded["busy"]) == {"cpu": "62%", "module_util": "60%", "in_flight": "5"}
    assert _cells(body, loaded["idle"]) == {"cpu": "10%", "module_util": "–", "in_flight": "0"}
    # Never reported: not known, and not shown as zero.
    assert _cells(body, loaded["quiet"]) == {"cpu": "–", "module_util": "–", "in_flight": "–"}


@pytest.mark.parametrize(("sort", "expected"), [
    ("in_flight", ["n-r2-02", "n-r1-07", "n-r2-01"]),
    ("-in_flight", ["n-r1-07", "n-r2-02", "n-r2-01"]),  # unknown last both ways
    ("-cpu", ["n-r1-07", "n-r2-02", "n-r2-01"]),
    ("cpu", ["n-r2-02", "n-r1-07", "n-r2-01"]),
    ("-module_util", ["n-r1-07", "n-r2-01", "n-r2-02"]),  # ties (unknown) by hostname
    ("-hostname", ["n-r2-02", "n-r2-01", "n-r1-07"]),
    ("state", ["n-r2-01", "n-r1-07", "n-r2-02"]),  # standby before active, as the states are listed
    ("-modules", ["n-r1-07", "n-r2-01", "n-r2-02"]),
    ("rack", ["n-r1-07", "n-r2-01", "n-r2-02"]),
])
def test_it_sorts_nodes_by_any_column(viewer: Client, loaded: dict[str, Any], sort: str,
                                      expected: list[str]) -> None:
    response = viewer.get(f"/nodes/?sort={sort}")
    assert response.status_code == 200
    assert [n.hostname for n in response.context["nodes"]] == expected


def test_its_headings_sort_and_say_how(viewer: Client, loaded: dict[str, Any]) -> None:
    body = viewer.get("/nodes/?state=active&sort=-in_flight").content.decode()
    # the sorted column says so; a click on it turns the order round; the filters stay
    assert re.search(r'<th class="num" aria-sort="descending"><a href="\?state=active&amp;sort=in_flight"', body)
    assert '<th aria-sort="none"><a href="?state=active&amp;sort=hostname"' in body
    assert '<input type="hidden" name="sort" value="-in_flight">' in body
    assert "match the filters" in body  # a sort is not a filter, the state is


def test_it_keeps_the_sort_across_pages(viewer: Client, loaded: dict[str, Any]) -> None:
    for i in range(60):
        node = Node.objects.create(hostname=f"p-{i:03d}", rack=loaded["r1"], slot=100 + i, tier=loaded["access"])
        _report(node, cpu=0.5, in_flight=i, utils={})
    first = viewer.get("/nodes/?sort=-in_flight")
    assert [n.hostname for n in first.context["nodes"]][:2] == ["p-059", "p-058"]
    assert "?sort=-in_flight&amp;page=2" in first.content.decode()
    second = viewer.get("/nodes/?sort=-in_flight&page=2")
    assert [n.hostname for n in second.context["nodes"]][-3:] == ["n-r2-02", "p-000", "n-r2-01"]


@pytest.mark.parametrize("sort", ["load", "-", "cpu_util", "hostname;drop"])
def test_it_refuses_a_sort_it_does_not_know_instead_of_ignoring_it(viewer: Client, loaded: dict[str, Any],
                                                                   sort: str) -> None:
    response = viewer.get("/nodes/", {"sort": sort, "state": "active"})
    assert response.status_code == 400
    assert list(response.context["nodes"]) == []
    body = response.content.decode()
    assert "Bad request: unknown sort" in body and "in_flight" in body
    assert 'id="save-view"' not in body  # nothing wrong can be saved either


@pytest.fixture
def viewer_saving(viewer: Client, loaded: dict[str, Any]) -> Client:
    response = viewer.post("/nodes/saved-view/", {"query": "state=active&q=&sort=-in_flight"})
    assert response.status_code == 302 and response["Location"] == "/nodes/"
    return viewer


def test_it_opens_with_the_users_saved_view_and_says_so(viewer_saving: Client, loaded: dict[str, Any],
                                                        operator_user: User) -> None:
    response = viewer_saving.get("/nodes/")
    assert [n.hostname for n in response.context["nodes"]] == ["n-r1-07", "n-r2-02"]
    body = response.content.decode()
    assert 'id="saved-view"' in body and "(your default)" in body and "sort=-in_flight" in body
    assert 'id="saved-view-clear"' in body and 'id="save-view"' not in body
    assert "?state=active&amp;sort=in_flight" in body  # its headings sort within the saved filters
    # The same view by its address is the saved one too; another view offers to be saved instead.
    assert 'id="saved-view"' in viewer_saving.get("/nodes/?state=active&sort=-in_flight").content.decode()
    other = viewer_saving.get("/nodes/?sort=hostname")
    assert [n.hostname for n in other.context["nodes"]] == ["n-r1-07", "n-r2-01", "n-r2-02"]
    assert 'id="saved-view"' not in other.content.decode() and 'id="save-view"' in other.content.decode()
    # It is this user's: another user's list opens with every node.
    someone = Client()
    someone.force_login(operator_user)
    assert len(someone.get("/nodes/").context["nodes"]) == 3


def test_it_clears_the_saved_view(viewer_saving: Client, loaded: dict[str, Any]) -> None:
    response = viewer_saving.post("/nodes/saved-view/", {"clear": "1"}, follow=True)
    assert "Saved view cleared" in response.content.decode()
    assert len(response.context["nodes"]) == 3 and 'id="saved-view"' not in response.content.decode()


@pytest.mark.parametrize(("query", "why"), [("sort=load", "unknown sort"), ("state=exploded", "Filter errors"),
                                           ("", "Nothing to save"), ("page=2", "Nothing to save")])
def test_it_saves_no_view_it_would_refuse_to_show(viewer: Client, loaded: dict[str, Any], query: str,
                                                  why: str) -> None:
    response = viewer.post("/nodes/saved-view/", {"query": query}, follow=True)
    assert why in response.content.decode()
    assert "now opens with this view" not in response.content.decode()
    assert 'id="saved-view"' not in viewer.get("/nodes/").content.decode()


def test_it_shows_a_node_with_modules_drift_warnings_and_trail(viewer: Client, fleet: dict[str, Any]) -> None:
    node = fleet["busy"]
    response = viewer.get(f"/nodes/{node.pk}/")
    assert response.status_code == 200
    body = response.content.decode()
    modules = {m.serial: m for m in response.context["modules"]}
    assert [m.slot for m in response.context["modules"]] == [0, 1, 2]
    assert modules["AX-1072"].drifted and not modules["AX-1070"].drifted
    assert body.count(">drift</span>") == 1 and body.count(">on pin</span>") == 2
    assert "modules need 12 PCIe lanes; node n-r1-07 provides 8" in body
    assert "modules need 12</span>; the board gives its slots 8" in body
    assert "EPYC 4585PX" in body and "1.0.4" in body
    actions = [e.action for e in response.context["audit_events"]]
    assert actions.count("module.create") == 3 and "node.create" in actions


def test_it_answers_404_for_a_missing_node(viewer: Client, fleet: dict[str, Any]) -> None:
    assert viewer.get("/nodes/999999/").status_code == 404


def test_it_shows_combinations_per_module_type_with_the_pin(viewer: Client, fleet: dict[str, Any]) -> None:
    response = viewer.get("/combinations/")
    assert response.status_code == 200
    types = {t["module_type"].model: t for t in response.context["module_types"]}
    ax = types["AX-40"]
    assert ax["pinned"].driver.version == "2.3.1"
    assert [c.state for c in ax["combinations"]][0] == CombinationState.PINNED
    assert [c.driver.version for c in ax["candidates"]] == ["2.4.0"]
    assert {c.driver.version: c.module_count for c in ax["combinations"]} == {"2.3.1": 2, "2.2.9": 1, "2.4.0": 0}
    assert ax["off_pin"] == 1
    assert types["KV-32"]["pinned"] is None
    body = response.content.decode()
    assert "fleet default" in body and "no pin" in body and "Candidate" in body


def test_it_lists_drifted_modules_against_the_pin(viewer: Client, fleet: dict[str, Any]) -> None:
    response = viewer.get("/drift/")
    assert [m.serial for m in response.context["modules"]] == ["AX-1072"]
    body = response.content.decode()
    assert "2.2.9" in body and "2.3.1" in body and f'href="/nodes/{fleet["busy"].pk}/"' in body


def test_it_shows_no_drift_once_the_module_is_on_the_pin(viewer: Client, fleet: dict[str, Any]) -> None:
    module = Module.objects.get(serial="AX-1072")
    services.inventory_update(instance=module, data={"driver_version": "2.3.1"}, actor="t")
    response = viewer.get("/drift/")
    assert list(response.context["modules"]) == []
    assert "No drift" in response.content.decode()


def test_it_builds_overview_and_detail_in_a_bounded_number_of_queries(viewer: Client,
                                                                      fleet: dict[str, Any]) -> None:
    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer.get(url).status_code == 200
        return len(ctx.captured_queries)

    node_url = f"/nodes/{fleet['quiet'].pk}/"
    before = count("/"), count(node_url)
    for i in range(20):
        node = Node.objects.create(hostname=f"w-{i:03d}", rack=fleet["r2"], slot=50 + i, tier=fleet["hybrid"],
                                   warnings=[{"rule": "power_budget", "field": "power_budget_w", "message": "m"}])
        Module.objects.create(serial=f"W-{i}", module_type=fleet["ax"], node=node, slot=0, driver_version="0.1")
    quiet = fleet["quiet"]
    for slot in range(4):
        services.inventory_create(instance=Module(serial=f"Q-{slot}", module_type=fleet["kv"], node=quiet, slot=slot),
                                  actor="t")
    assert (count("/"), count(node_url)) == before


def test_it_treats_an_empty_filter_form_as_no_filter(viewer: Client, fleet: dict[str, Any]) -> None:
    response = viewer.get("/nodes/?q=&tier=&rack=&state=&module_type=&label=&has_warnings=")
    assert [n.hostname for n in response.context["nodes"]] == ["n-r1-07", "n-r2-01"]
    assert "match the filters" not in response.content.decode()


def test_the_drift_page_offers_the_pin_back_to_the_drifted_nodes_and_the_rollout_page_takes_them(
        db: Any, operator_user: Any, viewer_user: Any) -> None:
    from apps.simulator.demo import seed_demo

    seed_demo()
    operator, viewer = Client(), Client()
    operator.force_login(operator_user)
    viewer.force_login(viewer_user)
    page = operator.get("/drift/")
    [row] = [b for b in page.context["back_to_pin"] if b["module_type"].model == "AX-40"]
    drifted = sorted({m.node.hostname for m in page.context["modules"] if m.node and m.module_type.model == "AX-40"})
    assert row["hostnames"] == drifted and row["combination"].state == "pinned"
    link = f'/rollouts/new/?combination={row["combination"].pk}&amp;nodes={",".join(map(str, row["node_ids"]))}'
    assert link in page.content.decode()
    assert "Roll the pin out" not in viewer.get("/drift/").content.decode()  # viewers read
    new = operator.get(link.replace("&amp;", "&"))
    assert new.status_code == 200 and [n.hostname for n in new.context["only_nodes"]] == drifted
    assert operator.get(f'/rollouts/new/?combination={row["combination"].pk}&nodes=3;drop').status_code == 404
