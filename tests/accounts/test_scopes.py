"""Scopes: a scoped operator acts only within its tiers or racks (403 naming the scope), a bulk action is
refused whole when any node lies outside, a rollout's scope must sit within the user's; reading stays
fleet-wide; /api/v1/me/ names the scope."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.accounts.choices import ScopeKind
from apps.accounts.services import scope_set, user_ensure
from apps.audit.models import AuditEvent
from apps.health.choices import Severity
from apps.health.models import Finding
from apps.inventory.choices import CombinationState, NodeState, TierKind
from apps.inventory.models import Node, Tier, VersionCombination
from apps.operations.models import AutoscalerPolicy
from apps.rollouts.models import Rollout
from tests.rollouts.conftest import RolloutFleet, rfleet  # noqa: F401  (the rollout fleet fixture)

pytestmark = pytest.mark.django_db


def _operator(name: str, kind: str, values: list[str]) -> APIClient:
    user, _ = user_ensure(username=name, password="pw", role="operator")
    scope_set(user=user, kind=kind, values=values)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def two_tiers(rfleet: RolloutFleet) -> dict[str, Any]:  # noqa: F811
    access = Tier.objects.get(kind=TierKind.ACCESS_LOGIC)
    Tier.objects.filter(pk=access.pk).update(min_active_nodes=0)
    Tier.objects.filter(pk=rfleet.tier.pk).update(min_active_nodes=0)
    hybrid = [rfleet.node(f"h-{i}") for i in (1, 2)]
    other = [rfleet.node("a-1", rack="rack-a")]
    Node.objects.filter(pk=other[0].pk).update(tier=access)
    other[0].refresh_from_db()
    return {"fleet": rfleet, "hybrid": hybrid, "access": other}


def test_me_names_the_scope(operator_user: User) -> None:
    client = _operator("scoped-me", ScopeKind.RACKS, ["r2", "r1"])
    me = client.get("/api/v1/me/").json()
    assert me["scope"] == {"kind": "racks", "values": ["r1", "r2"]}
    assert me["role"] == "operator"


def test_a_scoped_operator_drains_its_tier_and_is_refused_on_another(two_tiers: dict[str, Any]) -> None:
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    mine, theirs = two_tiers["hybrid"][0], two_tiers["access"][0]
    ok = client.post(f"/api/v1/nodes/{mine.pk}/drain/", {"reason": "maintenance"}, format="json")
    assert ok.status_code == 202, ok.json()
    refused = client.post(f"/api/v1/nodes/{theirs.pk}/drain/", {"reason": "maintenance"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "node a-1 outside your scope (tiers hybrid_inference)"
    assert refused.json()["scope"] == {"kind": "tiers", "values": ["hybrid_inference"]}
    assert Node.objects.get(pk=theirs.pk).state == NodeState.ACTIVE
    assert not AuditEvent.objects.filter(target_type="node", target_id=str(theirs.pk)).exists()
    module = theirs.modules.first()
    assert client.post(f"/api/v1/modules/{module.pk}/quarantine/", {"reason": "x"},
                       format="json").status_code == 403
    # Reading stays fleet-wide.
    assert client.get(f"/api/v1/nodes/{theirs.pk}/").status_code == 200


def test_a_rack_scope_holds_the_racks_nodes_and_no_whole_tier(two_tiers: dict[str, Any]) -> None:
    fleet = two_tiers["fleet"]
    client = _operator("team-rack", ScopeKind.RACKS, ["rack-a"])
    theirs, mine = two_tiers["hybrid"][0], two_tiers["access"][0]
    assert client.post(f"/api/v1/nodes/{mine.pk}/cordon/", {"reason": "x"}, format="json").status_code == 200
    assert client.post(f"/api/v1/nodes/{theirs.pk}/cordon/", {"reason": "x"}, format="json").status_code == 403
    scale = client.post(f"/api/v1/tiers/{fleet.tier.pk}/scale/", {"desired": 1, "reason": "x"}, format="json")
    assert scale.status_code == 403 and "racks rack-a" in scale.json()["detail"]


def test_a_bulk_action_is_refused_whole_when_a_node_lies_outside(two_tiers: dict[str, Any]) -> None:
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    hybrid, access = two_tiers["hybrid"], two_tiers["access"]
    ids = [n.pk for n in hybrid + access]
    refused = client.post("/api/v1/nodes/actions/", {"action": "cordon", "nodes": ids, "reason": "x"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["outside"] == ["a-1"]
    assert "a-1" in refused.json()["detail"] and "hybrid_inference" in refused.json()["detail"]
    assert not Node.objects.filter(pk__in=ids, state=NodeState.CORDONED).exists()


def test_a_bulk_action_applies_the_single_action_to_each_node(two_tiers: dict[str, Any]) -> None:
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    ids = [n.pk for n in two_tiers["hybrid"]]
    done = client.post("/api/v1/nodes/actions/", {"action": "cordon", "nodes": ids, "reason": "rack work"},
                       format="json")
    assert done.status_code == 200, done.json()
    assert [r["node"]["state"] for r in done.json()["results"]] == ["cordoned", "cordoned"]
    assert AuditEvent.objects.filter(action="node.cordon", target_id__in=[str(i) for i in ids]).count() == 2
    again = client.post("/api/v1/nodes/actions/", {"action": "uncordon", "nodes": ids, "reason": "done"},
                        format="json")
    assert [r["changed"] for r in again.json()["results"]] == [True, True]
    missing = client.post("/api/v1/nodes/actions/", {"action": "cordon", "nodes": [999999], "reason": "x"},
                          format="json")
    assert missing.status_code == 404 and "nodes" in missing.json()["errors"]


def test_a_bulk_action_that_fails_on_one_node_applies_none(two_tiers: dict[str, Any]) -> None:
    fleet = two_tiers["fleet"]
    Tier.objects.filter(pk=fleet.tier.pk).update(min_active_nodes=2)  # cordoning both would go below the floor
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    ids = [n.pk for n in two_tiers["hybrid"]]
    response = client.post("/api/v1/nodes/actions/", {"action": "cordon", "nodes": ids, "reason": "x"},
                           format="json")
    assert response.status_code == 409, response.json()
    assert not Node.objects.filter(pk__in=ids, state=NodeState.CORDONED).exists()
    assert not AuditEvent.objects.filter(action="node.cordon").exists()


def test_a_rollouts_scope_must_sit_within_the_users(two_tiers: dict[str, Any]) -> None:
    fleet = two_tiers["fleet"]
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    body = {"combination": fleet.candidate.pk, "module_type": fleet.mtype.pk, "suite": fleet.suite.pk,
            "wave_size": 1, "max_unavailable": "1", "bake_s": 0, "reason": "new driver"}
    whole = client.post("/api/v1/rollouts/", body, format="json")
    assert whole.status_code == 403 and "whole fleet" in whole.json()["detail"]
    everywhere = [n.pk for n in two_tiers["hybrid"] + two_tiers["access"]]
    wider = client.post("/api/v1/rollouts/", {**body, "nodes": everywhere}, format="json")
    assert wider.status_code == 403 and wider.json()["outside"] == ["a-1"]
    assert not Rollout.objects.exists()
    within = client.post("/api/v1/rollouts/", {**body, "tiers": [fleet.tier.pk]}, format="json")
    assert within.status_code == 201, within.json()
    other = _operator("team-access", ScopeKind.TIERS, [TierKind.ACCESS_LOGIC])
    paused = other.post(f"/api/v1/rollouts/{within.json()['id']}/pause/", {"reason": "mine?"}, format="json")
    assert paused.status_code == 403


def test_health_and_autoscaler_actions_keep_to_the_scope(two_tiers: dict[str, Any]) -> None:
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    mine, theirs = two_tiers["hybrid"][0], two_tiers["access"][0]
    now = timezone.now()
    findings = {n.hostname: Finding.objects.create(
        check_name="thermal", subject_kind="node", subject_key=f"node:{n.pk}", node=n, severity=Severity.WARNING,
        summary="hot", first_seen=now, last_seen=now) for n in (mine, theirs)}
    ok = client.post(f"/api/v1/health/findings/{findings['h-1'].pk}/acknowledge/", {"reason": "on it"},
                     format="json")
    assert ok.status_code == 200, ok.json()
    refused = client.post(f"/api/v1/health/findings/{findings['a-1'].pk}/acknowledge/", {"reason": "on it"},
                          format="json")
    assert refused.status_code == 403 and "a-1" in refused.json()["detail"]
    later = (now + dt.timedelta(hours=1)).isoformat()
    fleet_wide = client.post("/api/v1/health/silences/", {"reason": "noisy", "expires_at": later}, format="json")
    assert fleet_wide.status_code == 403 and "fleet-wide silence" in fleet_wide.json()["detail"]
    assert client.post("/api/v1/health/silences/", {"reason": "noisy", "expires_at": later, "node": mine.pk},
                       format="json").status_code == 201
    access = Tier.objects.get(kind=TierKind.ACCESS_LOGIC)
    policy = {"target_queue_per_node": 8, "min_nodes": 0, "max_nodes": 6}
    assert client.post("/api/v1/autoscaler-policies/", {**policy, "tier": access.pk},
                       format="json").status_code == 403
    assert client.post("/api/v1/autoscaler-policies/", {**policy, "tier": two_tiers["fleet"].tier.pk},
                       format="json").status_code == 201


def test_the_node_page_offers_actions_only_within_the_scope(two_tiers: dict[str, Any]) -> None:
    user, _ = user_ensure(username="team-hybrid-page", password="pw", role="operator")
    scope_set(user=user, kind=ScopeKind.TIERS, values=[TierKind.HYBRID_INFERENCE])
    browser = Client()
    browser.force_login(user)
    mine, theirs = two_tiers["hybrid"][0], two_tiers["access"][0]
    own = browser.get(f"/nodes/{mine.pk}/")
    other = browser.get(f"/nodes/{theirs.pk}/")
    assert own.status_code == other.status_code == 200  # reading stays fleet-wide
    assert own.context["can_operate"] is True and own.context["dash_config"]["can_operate"] is True
    assert other.context["can_operate"] is False and other.context["dash_config"]["can_operate"] is False
    assert "data-read-only" not in own.content.decode()
    assert ('data-read-only="node">Read-only for you: node a-1 outside your scope (tiers hybrid_inference).'
            in other.content.decode())


def _page(name: str, kind: str, values: list[str]) -> Client:
    user, _ = user_ensure(username=name, password="pw", role="operator")
    scope_set(user=user, kind=kind, values=values)
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_node_list_lets_an_operator_pick_only_the_nodes_within_its_scope(two_tiers: dict[str, Any]) -> None:
    pick = {n.hostname: f'class="pick" value="{n.pk}"' for n in two_tiers["hybrid"] + two_tiers["access"]}
    html = _page("team-hybrid-nodes", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE]).get("/nodes/").content.decode()
    assert pick["h-1"] in html and pick["h-2"] in html and pick["a-1"] not in html
    assert 'id="bulk-bar"' in html and "data-read-only" not in html
    html = _page("team-elsewhere-nodes", ScopeKind.RACKS, ["rack-z"]).get("/nodes/").content.decode()
    assert 'class="pick"' not in html and 'id="bulk-bar"' not in html
    assert 'data-read-only="nodes">Read-only for you: these nodes lie outside your scope (racks rack-z).' in html


def test_the_tier_and_fleet_pages_offer_tier_actions_only_within_the_scope(two_tiers: dict[str, Any]) -> None:
    hybrid, access = two_tiers["fleet"].tier, Tier.objects.get(kind=TierKind.ACCESS_LOGIC)
    for tier in (hybrid, access):
        AutoscalerPolicy.objects.create(tier=tier, target_queue_per_node=4, min_nodes=0, max_nodes=6)
    scale = {t.kind: f'data-url="/api/v1/tiers/{t.pk}/scale/"' for t in (hybrid, access)}
    policy = {t.kind: f'data-url="/api/v1/autoscaler-policies/{t.autoscaler_policy.pk}/"' for t in (hybrid, access)}

    team = _page("team-hybrid-pages", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    own, other = (team.get(f"/tiers/{t.pk}/").content.decode() for t in (hybrid, access))
    assert scale["hybrid_inference"] in own and policy["hybrid_inference"] in own and "Read-only" not in own
    assert 'data-action="' not in other  # neither the scale nor the autoscaler button
    assert "{#" not in own and "{% comment" not in own  # the template's notes stay out of the page
    assert ("Read-only for you: tier access_logic outside your scope (tiers hybrid_inference)."
            in other), other
    fleet = team.get("/").content.decode()
    assert scale["hybrid_inference"] in fleet and policy["hybrid_inference"] in fleet
    assert scale["access_logic"] not in fleet and policy["access_logic"] not in fleet
    assert f'data-read-only="{access.pk}"' in fleet and f'data-read-only="{hybrid.pk}"' not in fleet

    crew = _page("team-rack-pages", ScopeKind.RACKS, ["rack-a"])  # a rack scope holds no whole tier
    for page in (crew.get("/").content.decode(), crew.get(f"/tiers/{hybrid.pk}/").content.decode()):
        assert 'data-action="scale"' not in page and 'data-action="autoscaler"' not in page
        assert "Read-only for you: tier hybrid_inference outside your scope (racks rack-a)." in page


def test_the_operations_page_offers_releases_only_within_the_scope(two_tiers: dict[str, Any],
                                                                   operator_api: APIClient) -> None:
    mine, theirs = two_tiers["hybrid"][0], two_tiers["access"][0]
    for node in (mine, theirs):
        assert operator_api.post(f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "x"}, format="json").status_code == 200
    module = theirs.modules.first()
    assert operator_api.post(f"/api/v1/modules/{module.pk}/quarantine/", {"reason": "x"},
                             format="json").status_code == 200
    uncordon = {n.hostname: f'data-url="/api/v1/nodes/{n.pk}/uncordon/"' for n in (mine, theirs)}
    release = f'data-url="/api/v1/modules/{module.pk}/release/"'

    team = _page("team-hybrid-ops", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    html = team.get("/operations/").content.decode()
    assert uncordon["h-1"] in html and uncordon["a-1"] not in html and "outside your scope</span>" in html
    assert release not in html
    assert ('data-read-only="quarantines">Read-only for you: these modules lie outside your scope '
            "(tiers hybrid_inference).") in html
    assert 'data-read-only="holds"' not in html  # one of its holds is within: per row, not the section

    crew = _page("team-rack-ops", ScopeKind.RACKS, ["rack-a"])
    html = crew.get("/operations/").content.decode()
    assert uncordon["a-1"] in html and uncordon["h-1"] not in html and release in html
    assert "data-read-only" not in html

    elsewhere = _page("team-elsewhere-ops", ScopeKind.RACKS, ["rack-z"])
    html = elsewhere.get("/operations/").content.decode()
    assert 'data-action="' not in html
    assert 'data-read-only="holds">Read-only for you: these nodes lie outside your scope (racks rack-z).' in html


def test_the_health_page_offers_acknowledging_and_silencing_only_within_the_scope(
        two_tiers: dict[str, Any]) -> None:
    mine, theirs = two_tiers["hybrid"][0], two_tiers["access"][0]
    now = timezone.now()
    findings = {n.hostname: Finding.objects.create(
        check_name="thermal", subject_kind="node", subject_key=f"node:{n.pk}", node=n, tier=n.tier,
        severity=Severity.WARNING, summary="hot", first_seen=now, last_seen=now) for n in (mine, theirs)}
    acknowledge = {h: f'data-url="/api/v1/health/findings/{f.pk}/acknowledge/"' for h, f in findings.items()}
    hybrid, access = two_tiers["fleet"].tier, Tier.objects.get(kind=TierKind.ACCESS_LOGIC)

    team = _page("team-hybrid-health", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    html = team.get("/health/").content.decode()
    assert acknowledge["h-1"] in html and acknowledge["a-1"] not in html
    assert html.count('data-read-only="finding">Read-only for you: this finding lies outside your scope.') == 1
    silence = html[html.index('action="/health/silences/"'):]
    assert f'<option value="{hybrid.pk}">' in silence and f'<option value="{access.pk}">' not in silence
    assert "Within your scope (tiers hybrid_inference): name a node in it or a tier it holds" in html
    # the node page's findings cards offer no actions (the node's and its modules' own buttons act there)
    assert acknowledge["a-1"] not in team.get(f"/nodes/{theirs.pk}/").content.decode()
    assert acknowledge["h-1"] not in team.get(f"/nodes/{mine.pk}/").content.decode()

    crew = _page("team-rack-health", ScopeKind.RACKS, ["rack-a"])
    html = crew.get("/health/").content.decode()
    assert acknowledge["a-1"] in html and acknowledge["h-1"] not in html
    silence = html[html.index('action="/health/silences/"'):]
    assert f'<option value="{hybrid.pk}">' not in silence and f'<option value="{access.pk}">' not in silence


def test_the_rollout_pages_offer_controls_only_when_every_node_lies_within_the_scope(
        two_tiers: dict[str, Any], operator_user: User) -> None:
    fleet = two_tiers["fleet"]
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    body = {"combination": fleet.candidate.pk, "module_type": fleet.mtype.pk, "suite": fleet.suite.pk,
            "wave_size": 1, "max_unavailable": "1", "bake_s": 0, "reason": "new driver", "tiers": [fleet.tier.pk]}
    created = client.post("/api/v1/rollouts/", body, format="json")
    assert created.status_code == 201, created.json()
    rollout = Rollout.objects.get(pk=created.json()["id"])
    count = rollout.nodes.count()
    assert count >= 1

    own = _page("team-hybrid-rollouts", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    html = own.get(f"/rollouts/{rollout.pk}/").content.decode()
    assert 'id="rollout-controls"' in html and "data-read-only" not in html
    other = _page("team-access-rollouts", ScopeKind.TIERS, [TierKind.ACCESS_LOGIC])
    html = other.get(f"/rollouts/{rollout.pk}/").content.decode()
    assert 'id="rollout-controls"' not in html and 'data-control="' not in html
    assert (f"Read-only for you: {count} of this rollout's nodes lie outside your scope (tiers access_logic)."
            in html)

    new = f"/rollouts/new/?combination={fleet.candidate.pk}"
    assert "Within your scope (tiers access_logic): name tiers, racks or nodes in it" in other.get(new).content.decode()
    whole = Client()
    whole.force_login(operator_user)
    assert "data-scope-note" not in whole.get(new).content.decode()


def test_the_versions_page_offers_vector_runs_and_validation_only_within_the_scope(
        two_tiers: dict[str, Any]) -> None:
    fleet, theirs = two_tiers["fleet"], two_tiers["access"][0]
    VersionCombination.objects.filter(pk=fleet.candidate.pk).update(state=CombinationState.BLOCKED)
    Node.objects.filter(pk=theirs.pk).update(gray=True, state=NodeState.STANDBY)  # the gray pool: rack-a
    run = 'data-vector-action="run"'  # every module runs the pinned combination, the only one to run on
    validate = f'data-url="/api/v1/version-combinations/{fleet.candidate.pk}/validate/"'

    team = _page("team-hybrid-versions", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    html = team.get("/vectors/").content.decode()
    assert run not in html and "running: modules outside your scope" in html
    assert validate not in html and "validating: gray pool outside your scope" in html
    crew = _page("team-rack-versions", ScopeKind.RACKS, ["rack-a"])
    html = crew.get("/vectors/").content.decode()
    assert validate in html and run not in html

    theirs.modules.update(driver_version="9.9.9")  # now only hybrid nodes run the pinned combination
    html = team.get("/vectors/").content.decode()
    assert run in html and "running: modules outside your scope" not in html


def test_simulator_faults_keep_to_the_scope(two_tiers: dict[str, Any]) -> None:
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    mine, theirs = two_tiers["hybrid"][0], two_tiers["access"][0]
    refused = client.post("/api/v1/simulator/faults/", {"kind": "noisy_neighbour", "node": theirs.hostname,
                                                        "reason": "drill"}, format="json")
    assert refused.status_code == 403 and "a-1" in refused.json()["detail"]
    ok = client.post("/api/v1/simulator/faults/", {"kind": "noisy_neighbour", "node": mine.hostname,
                                                   "reason": "drill"}, format="json")
    assert ok.status_code in (200, 201), ok.json()


def test_vector_runs_keep_to_the_scope(two_tiers: dict[str, Any]) -> None:
    fleet = two_tiers["fleet"]
    client = _operator("team-hybrid", ScopeKind.TIERS, [TierKind.HYBRID_INFERENCE])
    mine, theirs = two_tiers["hybrid"][0].modules.first(), two_tiers["access"][0].modules.first()
    refused = client.post("/api/v1/vector-runs/", {"suite": fleet.suite.pk, "modules": [mine.pk, theirs.pk]},
                          format="json")
    assert refused.status_code == 403 and refused.json()["outside"] == ["a-1"]
    ok = client.post("/api/v1/vector-runs/", {"suite": fleet.suite.pk, "modules": [mine.pk]}, format="json")
    assert ok.status_code == 201, ok.json()
