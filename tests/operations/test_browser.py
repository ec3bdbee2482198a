"""Operators drain from the browser (confirmation dialog with a reason) and see what the
drain waits for on the operations page."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.services import user_ensure
from apps.audit.models import AuditEvent
from apps.inventory.models import Node
from apps.operations.models import Drain
from tests.browser.conftest import login_by_cookie, screenshot

pytestmark = [pytest.mark.browser]

OPERATOR, PASSWORD = "browser-operator", "browser-operator-pw-1"


def test_it_drains_a_node_from_its_page_and_shows_what_it_waits_for(  # type: ignore[no-untyped-def]
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    user_ensure(username=OPERATOR, password=PASSWORD, role="operator")
    node = Node.objects.get(hostname="n-r1-09")
    page = browser_page
    login_by_cookie(page, live_server, OPERATOR, next_url=f"/nodes/{node.pk}/")
    page.click("button[data-action=drain]")
    page.fill("#action-reason", "replace the DIMM in slot B2")
    page.click("#action-confirm")
    page.wait_for_function("() => !document.querySelector('#action-dialog').open")

    drain = Drain.objects.get(node=node)
    assert drain.reason == "replace the DIMM in slot B2" and drain.created_by_name == OPERATOR
    assert AuditEvent.objects.filter(action="node.drain", target_id=str(node.pk), actor_name=OPERATOR).exists()

    page.goto(f"{live_server.url}/operations/")
    row = page.locator(f"#holds tr[data-drain='{drain.pk}']")
    assert "n-r1-09" in row.inner_text()
    assert "waiting for a report from the node" in row.locator(".waiting").inner_text()
    assert "deadline in 14m" in row.locator(".waiting").inner_text()
    screenshot(page, "operations")
