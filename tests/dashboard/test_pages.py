"""The live dashboard pages and their REST reads, with the Django test client."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from apps.inventory.choices import TierKind
from apps.inventory.models import Tier
from apps.operations.lifecycle import node_cordon, node_drain
from tests.agent.fleet import make_node

pytestmark = pytest.mark.django_db


def _client(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _figures(html: str) -> dict[str, Any]:
    start = html.index('<script id="dash-figures" type="application/json">') + len(
        '<script id="dash-figures" type="application/json">')
    return dict(json.loads(html[start:html.index("</script>", start)]))


@pytest.fixture
def nodes(db: Any) -> list[Any]:
    return [make_node("n-p-01", modules=2, slot=1), make_node("n-p-02", tier=TierKind.ACCESS_LOGIC, modules=0, slot=2)]


def test_it_sends_anonymous_users_to_the_login_page(nodes: list[Any]) -> None:
    for url in ["/", "/racks/", f"/tiers/{nodes[0].tier_id}/"]:
        response = _client(None).get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert _client(None).get("/api/v1/live/snapshot/").status_code in (401, 403)


def test_it_shows_the_fleet_with_charts_and_no_actions_to_a_viewer(viewer_user: User, nodes: list[Any]) -> None:
    response = _client(viewer_user).get("/")
    html = response.content.decode()
    assert response.status_code == 200
    # the old overview's content is kept: tier cards, warnings, the drift link
    assert html.count('class="card tier"') == 3 and 'id="drift-link"' in html
    figures = _figures(html)
    assert set(figures) == {"queue", "util", "latency", "breakdown"}
    assert len(figures["latency"]["data"]) == 18  # six stages x p50/p95/p99
    assert "/static-pkg/plotly.min.js" in html
    # every script and stylesheet is served by the project (the page carries a random CSRF
    # token, so searching the whole text for "cdn" fails now and then)
    sources = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"', html)
    assert sources and all(
        src.startswith("data:") or (src.startswith("/") and not src.startswith("//")) for src in sources
    ), sources
    assert 'data-action="' not in html and "action-dialog" not in html


def test_it_gives_an_operator_the_actions(operator_user: User, nodes: list[Any]) -> None:
    html = _client(operator_user).get("/").content.decode()
    assert 'data-action="scale"' in html and "action-dialog" in html
    node_page = _client(operator_user).get(f"/nodes/{nodes[0].pk}/").content.decode()
    for action in ["cordon", "drain", "uncordon", "quarantine"]:
        assert f'data-action="{action}"' in node_page


def _enabled_actions(html: str) -> set[str]:
    """The node page's action buttons rendered without ``disabled``."""
    box = html[html.index('id="node-actions"'):]
    box = box[:box.index("</div>")]
    return {m.group(1) for m in re.finditer(r'<button[^>]*data-action="([^"]+)"[^>]*>', box)
            if " disabled" not in m.group(0)}


def test_the_node_page_enables_only_what_the_nodes_state_allows_from_the_first_paint(
        operator_user: User, nodes: list[Any]) -> None:
    page = f"/nodes/{nodes[0].pk}/"
    assert _enabled_actions(_client(operator_user).get(page).content.decode()) == {"cordon", "drain", "maintenance"}
    node_cordon(node=nodes[0], reason="fan noise", actor=operator_user)
    assert _enabled_actions(_client(operator_user).get(page).content.decode()) == {"drain", "uncordon",
                                                                                     "maintenance"}


def test_it_shows_what_a_drain_waits_for_on_the_node_page(viewer_user: User, operator_user: User,
                                                          nodes: list[Any]) -> None:
    node_drain(node=nodes[0], reason="replace fan", actor=operator_user)
    html = _client(viewer_user).get(f"/nodes/{nodes[0].pk}/").content.decode()
    assert "replace fan" in html and "waiting for a report from the node" in html
    assert 'data-action="' not in html  # a viewer cannot act
    live = _client(viewer_user).get(f"/api/v1/live/nodes/{nodes[0].pk}/").json()
    assert live["state"] == "draining" and live["hold"]["reason"] == "replace fan"
    assert [m["serial"] for m in live["modules"]] == ["n-p-01-m0", "n-p-01-m1"]


def test_it_builds_figures_for_the_chosen_time_range(viewer_user: User, nodes: list[Any]) -> None:
    client = _client(viewer_user)
    fleet = client.get("/api/v1/live/figures/fleet/?minutes=360").json()
    assert {"queue", "util", "latency", "breakdown"} == set(fleet)
    tier = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    assert set(client.get(f"/api/v1/live/figures/tiers/{tier.pk}/?minutes=15").json()) == set(fleet)
    node = client.get(f"/api/v1/live/figures/nodes/{nodes[0].pk}/?minutes=1440").json()
    assert set(node) == {"node", "modules"}
    page = client.get("/?minutes=360").content.decode()
    assert 'class="range on" data-minutes="360"' in page
    assert 'class="range on" data-minutes="60"' in client.get("/?minutes=7").content.decode()


def test_it_draws_the_racks_by_the_chosen_metric(viewer_user: User, nodes: list[Any]) -> None:
    html = _client(viewer_user).get("/racks/?metric=state").content.decode()
    figure = _figures(html)["racks"]["data"][0]
    assert figure["type"] == "heatmap" and figure["meta"] == {"metric": "state"}
    assert figure["x"] == ["rack-t"] and figure["y"] == [1, 2]
    assert sorted(v for row in figure["customdata"] for v in row) == sorted(n.pk for n in nodes)


def test_it_serves_the_snapshot_over_rest(viewer_user: User, nodes: list[Any]) -> None:
    snap = _client(viewer_user).get("/api/v1/live/snapshot/").json()
    assert [t["kind"] for t in snap["tiers"]] == [TierKind.ACCESS_LOGIC, TierKind.HYBRID_INFERENCE,
                                                  TierKind.EXTERNAL_LARGE_MODEL]
    assert {row[1] for row in snap["nodes"]} == {"n-p-01", "n-p-02"}


def test_it_runs_the_broadcaster_as_a_management_command(db: Any, capsys: Any) -> None:
    call_command("broadcast", "--interval", "0.01", "--ticks", "2")
    assert "broadcasting every 0.01 s" in capsys.readouterr().out


def test_the_external_tier_page_shows_its_endpoints_and_no_empty_utilisation_chart(viewer_user: User) -> None:
    from apps.simulator.demo import seed_demo

    seed_demo()
    tier = Tier.objects.get(kind=TierKind.EXTERNAL_LARGE_MODEL)
    html = _client(viewer_user).get(f"/tiers/{tier.pk}/").content.decode()
    assert 'id="tier-endpoints"' in html
    for endpoint in tier.endpoints.filter(enabled=True):
        assert endpoint.name in html and endpoint.model in html
    # no nodes of ours run tier 3: no utilisation to chart, and the page says why
    assert set(_figures(html)) == {"queue", "latency", "breakdown"}
    assert 'data-figure="util"' not in html and "runs on its endpoints" in html
    hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    html = _client(viewer_user).get(f"/tiers/{hybrid.pk}/").content.decode()
    assert "util" in _figures(html) and 'id="tier-endpoints"' not in html
