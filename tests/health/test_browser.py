"""In the browser: /health/ lists the open finding with the advisor's cause, how to confirm and
the remedy; an operator acknowledges it with a reason; the node page shows it too; an external
endpoint's finding names the endpoint and links its tier; an operator quarantines a module from the
card of findings it shares with its twins, and the card and the count follow."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone

from apps.accounts.services import user_ensure
from apps.audit.models import AuditEvent
from apps.health.choices import FindingState
from apps.health.models import Finding
from apps.inventory.models import Module
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.test_axe import blocking
from tests.health.conftest import HealthFleet, sweeps
from tests.health.test_endpoint_checks import BAD, Gateway

pytestmark = [pytest.mark.browser]

OPERATOR, PASSWORD = "browser-operator", "browser-operator-pw-1"


def _card(page: Any, finding_id: int) -> Any:
    """The card that lists the finding (one card per check and cause)."""
    return page.locator("article.finding", has=page.locator(f"[data-finding='{finding_id}']"))


def test_it_lists_findings_with_advice_and_acknowledges_from_the_page(
        browser_page: Any, live_server: Any, transactional_db: Any) -> None:
    user_ensure(username=OPERATOR, password=PASSWORD, role="operator")
    fleet = HealthFleet()
    fleet.node("n-0")
    node = fleet.node("n-1")
    fleet.all_report(modules={"n-1-m0": {"link_width": 1}})
    sweeps(3)
    f = Finding.objects.get(check_name="link_width")
    page = browser_page
    login_by_cookie(page, live_server, OPERATOR, next_url="/health/")
    card = _card(page, f.pk)
    assert "PCIe link trained at x1, expected x4" in card.inner_text()
    assert "lane budget is exceeded" in card.locator(".cause").first.inner_text()
    assert "link width reported" in card.locator(".confirm").first.inner_text()
    assert "Rebalance modules" in card.locator(".remedy").first.inner_text()
    card.locator(f"[data-finding='{f.pk}'] button[data-action=acknowledge]").click()
    page.fill("#action-reason", "moving n-1-m0 to a node with free lanes")
    page.click("#action-confirm")
    page.wait_for_selector(f"[data-finding='{f.pk}'] >> text=acknowledged by {OPERATOR}")
    f.refresh_from_db()
    assert f.state == FindingState.ACKNOWLEDGED and f.acknowledged_by_name == OPERATOR
    assert page.inner_text("#findings-count") == "0 open · 1 acknowledged"
    screenshot(page, "health")

    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    findings = page.locator("#node-findings")
    assert "PCIe link width" in findings.inner_text() and "Rebalance modules" in findings.inner_text()
    screenshot(page, "node-findings")


def test_an_endpoints_finding_names_the_endpoint_and_links_its_tier(
        browser_page: Any, live_server: Any, transactional_db: Any) -> None:
    user_ensure(username=OPERATOR, password=PASSWORD, role="operator")
    gateway = Gateway()
    this_minute = timezone.now().replace(second=0, microsecond=0)
    for i in range(3):
        gateway.report(this_minute - dt.timedelta(minutes=2 - i), BAD["endpoint_quota"])
    sweeps(3)
    f = Finding.objects.get(check_name="endpoint_quota")
    page = browser_page
    login_by_cookie(page, live_server, OPERATOR, next_url="/health/")
    card = _card(page, f.pk)
    assert "Endpoint quota headroom on endpoint gpu-70b" in card.locator("h3").inner_text()
    assert card.locator("h3 a").get_attribute("href") == f"/tiers/{gateway.tier.pk}/#tier-endpoints"
    assert "570 of 600 requests/min" in card.inner_text()
    assert "requests- or tokens-per-minute quota" in card.locator(".cause").first.inner_text()
    assert "quota raise" in card.locator(".remedy").first.inner_text()
    screenshot(page, "health-endpoint")


def test_an_operator_quarantines_a_module_from_a_grouped_findings_card(
        browser_page: Any, live_server: Any, transactional_db: Any) -> None:
    user_ensure(username=OPERATOR, password=PASSWORD, role="operator")
    fleet = HealthFleet()
    for hostname in ("n-0", "n-1", "n-2"):
        fleet.node(hostname)
    fleet.all_report(modules={"n-1-m0": {"link_width": 2}, "n-1-m1": {"link_width": 2},
                              "n-2-m0": {"link_width": 2}})
    sweeps(3)
    module = Module.objects.get(serial="n-1-m1")
    f = Finding.objects.get(check_name="link_width", module=module)
    page = browser_page
    login_by_cookie(page, live_server, OPERATOR, next_url="/health/")
    assert page.locator("article.finding").count() == 1  # three modules, one cause: one card
    card = _card(page, f.pk)
    assert "PCIe link width on 3 modules" in card.locator("h3").inner_text()
    assert card.locator("dd[data-evidence=link_width]").inner_text() == "×2"
    assert page.inner_text("#findings-count") == "3 open"
    card.locator("details.subjects summary").click()
    row = card.locator(f"tr[data-finding='{f.pk}']")
    row.locator("button[data-action=quarantine]").click()
    page.wait_for_function("() => document.querySelector('#action-dialog').open")
    assert page.inner_text("#action-title") == "Quarantine module n-1-m1"
    found = blocking(Axe(), page, "/health/ with a quarantine dialog open")
    screenshot(page, "health-grouped-dialog", full_page=False)
    page.fill("#action-reason", "reseating n-1-m1: trained at x2")
    page.click("#action-confirm")
    page.wait_for_selector(f"tr[data-finding='{f.pk}'] .badge.state-quarantined")
    row = page.locator(f"tr[data-finding='{f.pk}']")
    assert row.locator("button[data-action=quarantine]").count() == 0  # the module's state allows no other
    assert row.is_visible()  # the list stayed open
    module.refresh_from_db()
    assert module.state == "quarantined"
    assert AuditEvent.objects.filter(action="module.quarantine", reason="reseating n-1-m1: trained at x2").exists()
    page.click("button[data-urls]")  # the card's "acknowledge all 3 open", one reason for each
    page.fill("#action-reason", "lane budget: rebalancing n-1 and n-2")
    page.click("#action-confirm")
    page.wait_for_function("() => document.querySelector('#findings-count').innerText === '0 open · 3 acknowledged'")
    assert Finding.objects.filter(check_name="link_width", state=FindingState.ACKNOWLEDGED).count() == 3
    screenshot(page, "health-grouped")
    assert found == [], "\n".join(found)
