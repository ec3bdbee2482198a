"""The /health/ page and the node page: open findings with the advisor's cause, how to
confirm and remedy, one card per check and cause; evidence as labelled values; the remedy's actions
offered to those who may take them; acknowledge with a reason; the checks to read."""

from __future__ import annotations

import datetime as dt
import html
import json
import re

from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.choices import ScopeKind
from apps.accounts.services import scope_set, user_ensure
from apps.health.choices import FindingState
from apps.health.evidence import evidence_rows
from apps.health.models import Finding
from apps.inventory.models import Module, Node
from tests.health.conftest import HealthFleet, sweeps


def test_the_health_page_and_the_node_page_show_the_finding_with_its_advice(
        hfleet: HealthFleet, operator_user: User, viewer_user: User) -> None:
    hfleet.node("n-0")
    node = hfleet.node("n-1")
    hfleet.all_report(modules={"n-1-m1": {"link_width": 2}})
    sweeps(3)
    f = Finding.objects.get(check_name="link_width")
    client = Client()
    client.force_login(viewer_user)
    page = client.get("/health/").content.decode()
    assert f'data-finding="{f.pk}"' in page and "PCIe link trained at x2, expected x4" in page
    assert "lane budget is exceeded" in page and "Rebalance modules" in page and "link width reported" in page
    assert "Acknowledge" not in page  # viewers read only
    assert f'data-finding="{f.pk}"' not in client.get("/health/?check=ecc").content.decode()
    node_page = client.get(f"/nodes/{node.pk}/").content.decode()
    assert 'id="node-findings"' in node_page and "Rebalance modules" in node_page
    assert "No open findings on this node." in client.get(f"/nodes/{hfleet.nodes['n-0'].pk}/").content.decode()

    client.force_login(operator_user)
    r = client.post(f"/health/findings/{f.pk}/acknowledge/", {"reason": "moving a module", "next": "/health/"})
    assert r.status_code == 302
    f.refresh_from_db()
    assert f.state == FindingState.ACKNOWLEDGED and f.acknowledge_reason == "moving a module"
    assert "acknowledged by test-operator: moving a module" in client.get("/health/").content.decode()


def _bad_links(hfleet: HealthFleet) -> dict[str, Node]:
    """Three nodes; three modules trained at x2 of x4 (one cause), one at x1 (another)."""
    nodes = {h: hfleet.node(h, rack=1 if h == "n-3" else 0) for h in ("n-1", "n-2", "n-3")}
    hfleet.all_report(modules={"n-1-m0": {"link_width": 2}, "n-1-m1": {"link_width": 2},
                               "n-2-m0": {"link_width": 2}, "n-3-m0": {"link_width": 1}})
    sweeps(3)
    return nodes


def _cards(page: str) -> list[str]:
    return re.findall(r'<article class="card finding" data-group="([^"]+)"', page)


def test_findings_of_one_check_and_cause_are_one_card_listing_each_subject(
        hfleet: HealthFleet, viewer_user: User) -> None:
    nodes = _bad_links(hfleet)
    client = Client()
    client.force_login(viewer_user)
    page = client.get("/health/").content.decode()
    assert len(_cards(page)) == 2  # x2 of x4 on three modules; x1 of x4 on one
    assert "PCIe link width on 3 modules" in page and "3 findings, one per module" in page
    for f in Finding.objects.filter(check_name="link_width").select_related("module"):
        assert f.module is not None and f'data-finding="{f.pk}"' in page
        assert f'href="/nodes/{f.node_id}/">{f.module.serial}</a>' in page
    assert f'href="/nodes/{nodes["n-3"].pk}/">n-3</a> · module n-3-m0' in page  # a card of one names its subject


def test_evidence_is_labelled_values_with_units_never_a_dict(hfleet: HealthFleet, viewer_user: User) -> None:
    _bad_links(hfleet)
    client = Client()
    client.force_login(viewer_user)
    page = client.get("/health/").content.decode()
    assert "<dt>PCIe link width</dt><dd data-evidence=\"link_width\">×2</dd>" in page
    assert "<dt>Expected width</dt><dd data-evidence=\"expected\">×4</dd>" in page
    assert "{&#x27;" not in page and "{'" not in page
    assert evidence_rows("temperature", {"temp_c": 86.46, "max_c": 85}) == [
        {"key": "temp_c", "label": "Temperature", "text": "86.5 °C"},
        {"key": "max_c", "label": "Throttles at", "text": "85 °C"}]
    assert [r["text"] for r in evidence_rows("cpu_bound", {"cpu_util": 0.953})] == ["95.3 %"]
    assert evidence_rows("some_new_check", {"queue_wait_ms": 1234.5, "stuck_requests": None}) == [
        {"key": "queue_wait_ms", "label": "Queue wait", "text": "1,235 ms"},
        {"key": "stuck_requests", "label": "Stuck requests", "text": "–"}]
    assert evidence_rows("stage_latency", {"p95_ms": {"perception": 450.0, "tool_call": 1800.0}})[0]["text"] == (
        "perception 450 ms, tool call 1,800 ms")


def test_the_count_in_the_head_follows_an_acknowledgement(hfleet: HealthFleet, operator_user: User) -> None:
    _bad_links(hfleet)
    client = Client()
    client.force_login(operator_user)
    assert '<span id="findings-count">4 open</span>' in client.get("/health/").content.decode()
    f = Finding.objects.filter(check_name="link_width").first()
    assert f is not None
    api = APIClient()
    api.force_authenticate(operator_user)
    assert api.post(f"/api/v1/health/findings/{f.pk}/acknowledge/", {"reason": "on it"},
                    format="json").status_code == 200
    page = client.get("/health/").content.decode()
    assert '<span id="findings-count">3 open · 1 acknowledged</span>' in page
    assert "acknowledged by test-operator: on it" in page


def test_the_remedys_actions_are_offered_to_operators_within_their_scope_and_to_no_viewer(
        hfleet: HealthFleet, operator_user: User, viewer_user: User) -> None:
    _bad_links(hfleet)
    m0 = Module.objects.get(serial="n-1-m0")
    client = Client()
    client.force_login(viewer_user)
    page = client.get("/health/").content.decode()
    assert 'class="act ' not in page and 'id="action-dialog"' not in page

    client.force_login(operator_user)
    page = client.get("/health/").content.decode()
    assert 'id="action-dialog"' in page
    assert f'data-action="quarantine" data-url="/api/v1/modules/{m0.pk}/quarantine/"' in page
    assert page.count('data-action="quarantine"') == 4 and page.count('data-action="acknowledge" data-url=') == 4
    assert page.count('data-action="silence"') == 4 and 'data-action="drain"' not in page  # not this remedy's
    assert page.count("Acknowledge all 3 open") == 1  # the card of three; none on the card of one

    # the silence's body is what the API takes (the dialog adds the reason and the expiry)
    api = APIClient()
    api.force_authenticate(operator_user)
    body = json.loads(html.unescape(re.findall(r'data-action="silence"[^>]*data-body="([^"]+)"', page)[0]))
    expires = (timezone.now() + dt.timedelta(hours=4)).isoformat()
    assert api.post("/api/v1/health/silences/", {**body, "reason": "rebalancing", "expires_at": expires},
                    format="json").status_code == 201
    assert "silenced until" in client.get("/health/").content.decode()

    # quarantined, the module offers no quarantine; the finding stays with its other actions
    assert api.post(f"/api/v1/modules/{m0.pk}/quarantine/", {"reason": "reseat"}, format="json").status_code == 200
    page = client.get("/health/").content.decode()
    assert f"/api/v1/modules/{m0.pk}/quarantine/" not in page and page.count('data-action="quarantine"') == 3

    # an operator whose scope is the other rack is offered actions on its node's finding only
    scoped, _ = user_ensure(username="team-rack-2", password="pw", role="operator")
    scope_set(user=scoped, kind=ScopeKind.RACKS, values=["rack-2"])
    client.force_login(scoped)
    page = client.get("/health/").content.decode()
    n3m0 = Module.objects.get(serial="n-3-m0")
    assert page.count('data-action="quarantine"') == 1 and f"/api/v1/modules/{n3m0.pk}/quarantine/" in page
    assert page.count('data-action="acknowledge"') == 1 and "Acknowledge all" not in page


def test_checks_are_a_section_to_read_and_the_filter_names_them(hfleet: HealthFleet, viewer_user: User) -> None:
    client = Client()
    client.force_login(viewer_user)
    page = client.get("/health/").content.decode()
    assert '<a href="#checks">checks</a>' in page and '<section id="checks">' in page
    assert '<option value="link_width" >PCIe link width</option>' in page
    assert '<option value="noisy_neighbour" >Noisy neighbour</option>' in page
    assert "Warns at 80 °C<br>Fails at 85 °C" in page
    assert "3 of the last 5 sweeps fail · after 5 passes" in page


def test_a_tripped_breaker_offers_its_reset_to_admins_only(hfleet: HealthFleet, admin_user: User,
                                                            operator_user: User) -> None:
    now = timezone.now()
    tier = hfleet.tier
    breaker = Finding.objects.create(
        check_name="breaker", subject_kind="tier", subject_key=f"tier:{tier.pk}:ecc", tier=tier, severity="critical",
        status="fail", summary="3 of 10 serving nodes fail ecc", first_seen=now, last_seen=now)
    url = f'data-url="/api/v1/health/findings/{breaker.pk}/reset-breaker/"'
    admin, operator = Client(), Client()
    admin.force_login(admin_user)
    operator.force_login(operator_user)
    assert url in admin.get("/health/").content.decode()
    assert url not in operator.get("/health/").content.decode()
