"""Operators validate a candidate from /vectors/ (a reason for the audit log) and land on the
run's page; viewers see no actions."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.services import user_ensure
from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState
from apps.inventory.models import VersionCombination
from apps.vectors.models import VectorRun
from tests.browser.conftest import BROWSER_USER, login_by_cookie

pytestmark = [pytest.mark.browser]

OPERATOR, PASSWORD = "browser-operator", "browser-operator-pw-1"


def test_an_operator_validates_a_candidate_from_the_versions_page(  # type: ignore[no-untyped-def]
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    user_ensure(username=OPERATOR, password=PASSWORD, role="operator")
    candidate = VersionCombination.objects.get(state=CombinationState.CANDIDATE)
    page = browser_page
    login_by_cookie(page, live_server, OPERATOR, next_url="/vectors/")
    page.click(f"tr[data-combination='{candidate.pk}'] button[data-vector-action=validate]")
    page.fill("#action-reason", "new driver for the AX modules")  # the reason dialog
    with page.expect_navigation(url="**/vector-runs/*/"):
        page.click("#action-confirm")
    run = VectorRun.objects.get(combination=candidate)
    assert page.url.endswith(f"/vector-runs/{run.pk}/")
    assert f"Vector run #{run.pk}" in page.inner_text("h1")
    assert page.locator("#run-cancel").is_visible()
    candidate.refresh_from_db()
    assert candidate.state == CombinationState.VALIDATING
    assert AuditEvent.objects.get(action="vector_run.create", target_id=str(run.pk)).reason == \
        "new driver for the AX modules"


def test_viewers_see_no_actions(browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/vectors/")
    assert page.locator("button[data-vector-action]").count() == 0
    assert page.locator("tr[data-combination]").count() == VersionCombination.objects.count()
