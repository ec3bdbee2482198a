"""The enrolment page: pending joins with their admission verdicts and the rack and slot prefilled from
the agent's hint; an admin approves two at once from it (the third, refused by a hard rule, cannot be
picked into the approval), a viewer reads it without controls; no serious axe violation."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.services import user_ensure
from apps.agents.enrolments import bootstrap_token_issue
from apps.audit.models import AuditEvent
from apps.inventory.choices import FormFactor, TierKind
from apps.inventory.models import ModuleType, Node, Rack, Tier
from tests.agents.test_enrolment import join_body
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.test_axe import blocking

pytestmark = pytest.mark.browser


def _joins() -> None:
    for level, kind in enumerate(TierKind, 1):
        Tier.objects.get_or_create(kind=kind, defaults={"name": kind.label, "level": level})
    Rack.objects.create(name="r-page")
    Rack.objects.create(name="r-spare")
    ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor=FormFactor.M2, int8_tops=Decimal("40"),
                              power_w=10, pcie_lanes=4)
    _token, key = bootstrap_token_issue(tier=Tier.objects.get(kind=TierKind.HYBRID_INFERENCE), racks=[], uses=3,
                                        expires_at=timezone.now() + dt.timedelta(hours=1), reason="rack r-page",
                                        auto_approve=False, actor="test")
    anon = APIClient()
    for i, (host, ecc) in enumerate((("n-page-1", True), ("n-page-2", False), ("n-page-3", True)), 1):
        r = anon.post("/api/v1/enrolments/", join_body(key, host, ecc=ecc, modules=2, location=f"r-page/{i}"),
                      format="json")
        assert r.status_code == 201, r.json()


def test_an_admin_approves_two_joins_at_once(browser_page: Any, live_server: Any, transactional_db: Any) -> None:
    _joins()
    user_ensure(username="page-admin", password="page-admin-pw-1", role="admin")
    user_ensure(username="page-viewer", password="page-viewer-pw-1", role="viewer")
    page = browser_page
    login_by_cookie(page, live_server, "page-viewer", next_url="/enrolments/")
    assert page.locator("#enrolment-table tbody tr").count() == 3
    assert page.locator("input[name=enrolment]").count() == 0 and page.locator("#approve-selected").count() == 0
    hard = page.locator("tr[data-hostname=n-page-2] [data-verdict=hard]")
    assert "has no ECC memory" in hard.inner_text()
    assert blocking(Axe(), page, "/enrolments/ (viewer)") == []

    page.context.clear_cookies()
    login_by_cookie(page, live_server, "page-admin", next_url="/enrolments/")
    assert page.locator("select[name^=rack-] >> nth=0").input_value() == "r-page"  # prefilled from the hint
    assert page.locator("tr[data-hostname=n-page-3] input[name^=slot-]").input_value() == "3"
    assert blocking(Axe(), page, "/enrolments/ (admin)") == []
    screenshot(page, "enrolments-pending")

    page.check("tr[data-hostname=n-page-1] input[name=enrolment]")
    page.check("tr[data-hostname=n-page-3] input[name=enrolment]")
    page.select_option("tr[data-hostname=n-page-3] select[name^=rack-]", "r-spare")
    page.fill("tr[data-hostname=n-page-3] input[name^=slot-]", "9")
    page.fill("#enrolment-actions input[name=reason]", "rack r-page delivery")
    page.click("#approve-selected")
    page.wait_for_selector(".messages li.success")
    assert "approved n-page-3, n-page-1" in page.inner_text(".messages")  # in the page's order, newest first
    assert sorted(Node.objects.values_list("hostname", "rack__name", "slot")) == [
        ("n-page-1", "r-page", 1), ("n-page-3", "r-spare", 9)]
    assert AuditEvent.objects.filter(action="enrolment.approve", source="browser").count() == 2
    assert page.locator("#enrolment-table tbody tr").count() == 1  # the one a hard rule keeps out
    screenshot(page, "enrolments-after-approval")

    page.check("tr[data-hostname=n-page-2] input[name=enrolment]")
    page.click("#approve-selected")
    page.wait_for_selector(".messages li.error")
    assert "nothing decided" in page.inner_text(".messages") and "ecc_memory" in page.inner_text(".messages")
    assert not Node.objects.filter(hostname="n-page-2").exists()
