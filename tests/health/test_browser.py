"""In the browser: /health/ lists the open finding with the advisor's cause, how to confirm and
the remedy; an operator acknowledges it with a reason; the node page shows it too; an external
endpoint's finding names the endpoint and links its tier."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.accounts.services import user_ensure
from apps.health.choices import FindingState
from apps.health.models import Finding
from tests.browser.conftest import login_by_cookie, screenshot
from tests.health.conftest import HealthFleet, sweeps
from tests.health.test_endpoint_checks import BAD, Gateway

pytestmark = [pytest.mark.browser]

OPERATOR, PASSWORD = "browser-operator", "browser-operator-pw-1"


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
    card = page.locator(f"[data-finding='{f.pk}']")
    assert "PCIe link trained at x1, expected x4" in card.inner_text()
    assert "lane budget is exceeded" in card.locator(".cause").first.inner_text()
    assert "link width reported" in card.locator(".confirm").first.inner_text()
    assert "Rebalance modules" in card.locator(".remedy").first.inner_text()
    card.locator("input[name=reason]").fill("moving n-1-m0 to a node with free lanes")
    card.locator("button[type=submit]").click()
    page.wait_for_selector(f"[data-finding='{f.pk}'] >> text=acknowledged by {OPERATOR}")
    f.refresh_from_db()
    assert f.state == FindingState.ACKNOWLEDGED and f.acknowledged_by_name == OPERATOR
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
    card = page.locator(f"[data-finding='{f.pk}']")
    assert "Endpoint quota headroom on endpoint gpu-70b" in card.locator("h3").inner_text()
    assert card.locator("h3 a").get_attribute("href") == f"/tiers/{gateway.tier.pk}/#tier-endpoints"
    assert "570 of 600 requests/min" in card.inner_text()
    assert "requests- or tokens-per-minute quota" in card.locator(".cause").first.inner_text()
    assert "quota raise" in card.locator(".remedy").first.inner_text()
    screenshot(page, "health-endpoint")
