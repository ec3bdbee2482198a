"""The node list and the audit log follow the fleet live, like the overview: a change made
elsewhere shows up without a reload; while the websocket is down the page says the lists are
paused, and on reconnect they catch up with what happened meanwhile. The node list's load columns
follow the snapshot too, sort by load, and its filters and sort can be kept as the user's default."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.inventory.models import Node
from apps.operations.lifecycle import node_cordon, node_uncordon
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.live_pages import OPERATOR, post_telemetry, wait_live, wait_snapshot
from tests.live.stack import LiveStack

pytestmark = [pytest.mark.browser, pytest.mark.live]

# The page's WebSocket constructor refuses while "offline", so the page cannot reconnect.
GO_OFFLINE = """() => {
  window.__RealWebSocket = window.__RealWebSocket || window.WebSocket;
  window.WebSocket = function () { throw new Error("offline (test)"); };
  Live.state.socket.close();
}"""
GO_ONLINE = "() => { window.WebSocket = window.__RealWebSocket; window.dispatchEvent(new Event('online')); }"


def _paused(page: Any) -> None:
    page.wait_for_function("() => document.querySelector('#live-status').dataset.state === 'reconnecting'")
    assert page.evaluate("document.body.classList.contains('live-paused')")
    assert "paused" in page.inner_text("#live-status")


def test_the_node_list_and_the_audit_log_follow_the_fleet_pause_and_catch_up(browser_page: Any,
                                                                              dashboard_stack: LiveStack) -> None:
    page = browser_page
    actor = User.objects.get(username=OPERATOR[0])
    node = Node.objects.get(hostname="n-r2-05")
    state_cell = f"[data-node-state='{node.pk}']"

    # The node list: a cordon made elsewhere shows in its row (the broadcaster's next tick).
    login_by_cookie(page, dashboard_stack, OPERATOR[0], next_url="/nodes/?q=n-r2-0")
    wait_live(page)
    # The page must know the states before the cordon: only the broadcaster's snapshots bring it (the
    # cordon's own event is not sent from this thread, where Playwright's event loop runs).
    wait_snapshot(page)
    page.evaluate("window.__noReload = 1")
    assert "Active" in page.inner_text(state_cell)
    node_cordon(node=node, reason="cabling check (elsewhere)", actor=actor)
    page.wait_for_function(f"() => document.querySelector(\"{state_cell}\").innerText.includes('Cordoned')")

    # Offline: the list says it is paused; what happens meanwhile shows once the socket is back.
    page.evaluate(GO_OFFLINE)
    _paused(page)
    screenshot(page, "nodes-live-paused", full_page=False)
    node_uncordon(node=node, owner="operator", reason="cabling fine", actor=actor)
    page.evaluate(GO_ONLINE)
    wait_live(page)
    page.wait_for_function(f"() => document.querySelector(\"{state_cell}\").innerText.includes('Active')")
    assert not page.evaluate("document.body.classList.contains('live-paused')")
    assert page.evaluate("window.__noReload") == 1

    # Load, live: the node's requests in flight change in its row with the next snapshot ...
    in_flight = f"[data-node-row='{node.pk}'] [data-cell=in_flight]"
    post_telemetry(at=timezone.now(), seq=100, in_flight={node.hostname: 37})
    page.wait_for_function(f"() => document.querySelector(\"{in_flight}\").innerText === '37'")
    assert page.locator("#node-table tbody tr").first.locator("td").nth(1).inner_text() == "n-r2-01"
    # ... and sorted by them (the heading twice: most first), within the search, it leads the list.
    heading = "#node-table th:has(a[data-sort=in_flight])"
    for order in ("ascending", "descending"):
        with page.expect_navigation():
            page.click(f"{heading} a")
        assert page.get_attribute(heading, "aria-sort") == order
    assert "q=n-r2-0" in page.url and "sort=-in_flight" in page.url
    rows = page.locator("#node-table tbody tr")
    assert rows.first.locator("td").nth(1).inner_text() == node.hostname
    figures = [rows.nth(i).locator("[data-cell=in_flight]").inner_text() for i in range(rows.count())]
    known = [int(f) for f in figures if f != "–"]
    assert known == sorted(known, reverse=True) and figures[: len(known)] == [str(k) for k in known]

    # Kept as the default: the bare address opens with it, says so, and it can be cleared.
    with page.expect_navigation():
        page.click("#save-view button")
    assert page.url == f"{dashboard_stack.url}/nodes/"
    assert "Saved view" in page.inner_text("#saved-view")
    assert rows.first.locator("td").nth(1).inner_text() == node.hostname
    assert page.input_value("#node-filters input[name=q]") == "n-r2-0"
    screenshot(page, "nodes-load-saved-view", full_page=False)
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#node-table").scroll_into_view_if_needed()
    screenshot(page, "nodes-load-saved-view-390", full_page=False)
    # on a phone the load columns are on screen beside the hostname and state, not behind a scroll
    right = page.evaluate(f"() => document.querySelector('{heading}').getBoundingClientRect().right")
    assert right <= 390, f"the in-flight column ends at {right} px on a 390 px screen"
    page.set_viewport_size({"width": 1440, "height": 900})
    with page.expect_navigation():
        page.click("#saved-view-clear")
    assert page.locator("#saved-view").count() == 0
    assert rows.count() == 50 and rows.first.locator("td").nth(1).inner_text() == "n-r1-01"

    # The audit log: a new record appears at the top without a reload ...
    page.goto(f"{dashboard_stack.url}/audit/")
    wait_live(page)
    page.evaluate("window.__noReload = 1")
    node_cordon(node=node, reason="audit tail, live", actor=actor)
    page.wait_for_function("() => document.querySelector('#audit-rows').innerText.includes('audit tail, live')")
    # ... and one made while the socket was down arrives with the catch-up on reconnect.
    page.evaluate(GO_OFFLINE)
    _paused(page)
    node_uncordon(node=node, owner="operator", reason="audit tail, caught up", actor=actor)
    page.evaluate(GO_ONLINE)
    wait_live(page)
    page.wait_for_function("() => document.querySelector('#audit-rows').innerText.includes('audit tail, caught up')")
    assert page.evaluate("window.__noReload") == 1
    screenshot(page, "audit-live", full_page=False)

    # An agent answering a command is chatter: hidden until the operator ticks the box.
    from django.db import transaction

    from apps.audit.services import audit_record

    with transaction.atomic():
        audit_record(actor=f"agent:{node.hostname}", action="node_command.finish", target=node,
                     reason="agent chatter (browser test)")
    page.goto(f"{dashboard_stack.url}/audit/")
    assert "agent chatter" not in page.inner_text("#audit-rows")
    with page.expect_navigation():
        page.check("#audit-filters input[name=chatter]")
        page.click("#audit-filters button[type=submit]")
    assert "agent chatter (browser test)" in page.inner_text("#audit-rows")
    assert page.is_checked("#audit-filters input[name=chatter]")
