"""/operations/ in headless Chromium against uvicorn and the broadcaster: it follows the fleet
live (a cordon made elsewhere shows up, no reload) and an operator acts from it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from apps.inventory.models import Node
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.live_pages import OPERATOR, wait_live
from tests.live.stack import LiveStack

pytestmark = [pytest.mark.browser, pytest.mark.live]


def test_operations_follow_a_cordon_live_and_an_operator_releases_it_there(browser_page: Any,
                                                                          dashboard_stack: LiveStack) -> None:
    from apps.operations.lifecycle import node_cordon

    page = browser_page
    login_by_cookie(page, dashboard_stack, OPERATOR[0], next_url="/operations/")
    wait_live(page)
    page.evaluate("window.__noReload = 1")
    assert "No node is cordoned or draining" in page.inner_text("#ops-live")

    # another operator cordons a node (through the lifecycle, as the API does)
    node = Node.objects.get(hostname="n-r2-05")
    node_cordon(node=node, reason="cabling check (elsewhere)", actor=User.objects.get(username=OPERATOR[0]))
    page.wait_for_function("() => document.querySelector('#ops-live').innerText.includes('n-r2-05')")
    row = page.locator("#holds tbody tr", has_text="n-r2-05")
    assert "cabling check" in row.inner_text()
    screenshot(page, "operations-live-cordon")

    row.locator("button.act[data-action=uncordon]").click()
    page.fill("#action-reason", "cabling fine (browser test)")
    page.click("#action-confirm")
    page.wait_for_function("() => document.querySelector('#ops-live').innerText.includes('No node is cordoned')")
    assert "n-r2-05" in page.inner_text("#recent-holds")
    assert page.evaluate("window.__noReload") == 1
    node.refresh_from_db()
    assert node.state == "active"
