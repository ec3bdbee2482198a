"""Page layout in a real browser at the widths operators use (1440, 1280 and a 390 px phone):
nothing spills out of the card that holds it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import BROWSER_USER, login_by_cookie, screenshot

pytestmark = pytest.mark.browser

SPILLS = """() => [...document.querySelectorAll('section.tier .stat')].filter(s => {
    const card = s.closest('section.tier').getBoundingClientRect(), r = s.getBoundingClientRect();
    return r.right > card.right + 0.5 || r.left < card.left - 0.5; }).map(s => s.innerText.replace(/\\s+/g, ' '))"""


@pytest.mark.parametrize("width, height", [(1440, 900), (1280, 800), (390, 844)])
def test_the_tier_cards_hold_their_figures(browser_page: Any, live_server: Any, demo_fleet: dict[str, Any],
                                           width: int, height: int) -> None:
    page = browser_page
    page.set_viewport_size({"width": width, "height": height})
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    assert page.locator("section.tier .stat").count() > 10
    screenshot(page, f"fleet-{width}")
    assert page.evaluate(SPILLS) == []


PAGES = ["/", "/racks/", "/nodes/", "/nodes/{node}/", "/tiers/{tier}/", "/tiers/{external}/", "/combinations/",
         "/drift/", "/vectors/", "/rollouts/", "/rollouts/new/?combination={combination}", "/health/", "/operations/",
         "/windows/", "/enrolments/", "/planner/", "/audit/"]


@pytest.mark.parametrize("width, height", [(1440, 900), (1280, 800), (390, 844)])
def test_no_page_scrolls_sideways(browser_page: Any, live_server: Any, demo_fleet: dict[str, Any],
                                  width: int, height: int) -> None:
    """Every page at the widths operators use (a 390 px phone included), with a screenshot of each,
    and no page logs a script or chart error on its first load (a chart once logged "MNaN")."""
    from apps.inventory.models import Node, Tier, VersionCombination

    node = Node.objects.get(hostname="n-r1-07")
    external = Tier.objects.get(kind="external_large_model")
    combination = VersionCombination.objects.order_by("-pk").first()
    assert combination is not None
    page = browser_page
    page.set_viewport_size({"width": width, "height": height})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    wide = {}
    for path in PAGES:
        path = path.format(node=node.pk, tier=node.tier_id, external=external.pk, combination=combination.pk)
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        scroll = page.evaluate("() => document.documentElement.scrollWidth")
        screenshot(page, f"page-{width}" + (path.split("?")[0].rstrip("/").replace("/", "-") or "-fleet"))
        if scroll > width:
            wide[path] = scroll
    assert not wide, f"pages wider than the {width} px window: {wide}"
    # a websocket the Django live server cannot upgrade (it serves no ASGI) is not a page's error
    # an answer a page shows as such (the planner's 400 asking for numbers while there is no
    # telemetry) is not an error either: every other error is
    errors = [e for e in errors if "WebSocket" not in e and "/ws/" not in e and "Failed to load resource" not in e]
    assert not errors, f"errors on first load: {errors}"
