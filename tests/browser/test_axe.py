"""Accessibility: axe-core (bundled by the axe-playwright-python package, no CDN) finds no serious or
critical violation on any page: the same walk of the URL conf as tests/security/test_headers.py, as an
operator (so every control is there), plus the login page, the command palette and an action dialog open."""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe

from apps.inventory.models import Node
from tests.browser.conftest import login_by_cookie
from tests.security.test_headers import page_routes, url_of

pytestmark = pytest.mark.browser

BLOCKING = ("serious", "critical")
PASSWORD = "axe-operator-pw-1"  # noqa: S105 - a test user in the throwaway test database


def blocking(axe: Axe, page: Any, where: str) -> list[str]:
    result = axe.run(page, options={"resultTypes": ["violations"]})
    return [f"{where} {v['impact']} {v['id']} ({v['help']}): "
            + "; ".join(f"{n['target']} {n.get('failureSummary', '')[:200]}" for n in v["nodes"][:4])
            for v in result.response["violations"] if v["impact"] in BLOCKING]


def test_no_page_has_a_serious_or_critical_axe_violation(browser_page: Any, live_server: Any,
                                                         demo_fleet: dict[str, Any]) -> None:
    from apps.accounts.services import user_ensure

    user_ensure(username="axe-operator", password=PASSWORD, role="operator")
    page = browser_page
    axe = Axe()
    found: list[str] = []
    page.goto(f"{live_server.url}/login/")
    found += blocking(axe, page, "/login/")

    login_by_cookie(page, live_server, "axe-operator", next_url="/")
    urls = sorted({url_of(route) for route, _ in page_routes()} - {"/login/", "/logout/"})
    assert "/" in urls and "/nodes/" in urls and len(urls) >= 15, urls
    for url in urls:
        if page.request.get(f"{live_server.url}{url}").status == 405:
            continue  # a form's target (POST only), not a page
        response = page.goto(f"{live_server.url}{url}")
        assert response is not None and response.status < 500, (url, response and response.status)
        found += blocking(axe, page, url)

    # what opens over a page: the command palette, and an action's confirmation dialog
    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    page.keyboard.press("Control+k")
    page.wait_for_function("() => document.querySelector('#palette').open")
    page.keyboard.type("dr")
    found += blocking(axe, page, "palette")
    page.keyboard.press("Escape")
    page.click("#node-actions button[data-action=drain]")
    page.wait_for_function("() => document.querySelector('#action-dialog').open")
    found += blocking(axe, page, "drain dialog")
    assert found == [], "\n".join(found)
