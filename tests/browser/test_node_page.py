"""The node page in headless Chromium against uvicorn and the broadcaster: what an operator
changes shows at once and stays right, without a reload."""

from __future__ import annotations

from typing import Any

import pytest

from apps.inventory.models import Node
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.live_pages import OPERATOR, wait_live
from tests.live.stack import LiveStack

pytestmark = [pytest.mark.browser, pytest.mark.live]

# The page's periodic refresh (every 5 s) would hide a lost event; these tests switch it
# off before the page loads so they see what the events alone bring.
NO_POLLING = """(() => { const orig = window.setInterval;
    window.setInterval = (fn, ms, ...rest) => (ms >= 5000 ? 0 : orig(fn, ms, ...rest)); })()"""

# Hold the next response of the node's live URL until window.__release() is called.
HOLD_NEXT_REFRESH = """url => { const orig = Live.fetchJSON; window.__held = false;
    Live.fetchJSON = async (u) => {
      const data = await orig(u);
      if (u === url && !window.__held) {
        window.__held = true;
        await new Promise(resolve => { window.__release = resolve; });
      }
      return data;
    }; }"""


def _open_node(page: Any, stack: LiveStack, hostname: str) -> Node:
    node = Node.objects.get(hostname=hostname)
    page.add_init_script(NO_POLLING)
    login_by_cookie(page, stack, OPERATOR[0], next_url=f"/nodes/{node.pk}/")
    wait_live(page)
    page.evaluate("window.__noReload = 1")
    return node


def test_a_drain_during_a_refresh_in_flight_still_shows_its_hold(browser_page: Any,
                                                                  dashboard_stack: LiveStack) -> None:
    page = browser_page
    node = _open_node(page, dashboard_stack, "n-r1-07")
    assert "none" in page.inner_text("#node-hold")
    # a refresh is in flight (its answer, fetched before the drain, is held back) ...
    page.evaluate(HOLD_NEXT_REFRESH, f"/api/v1/live/nodes/{node.pk}/")
    page.wait_for_function("() => { if (!window.__held) Dashboard.refreshNode(); return window.__held; }",
                           polling=200)
    # ... when the operator drains the node and its events arrive
    page.click("#node-actions button[data-action=drain]")
    page.fill("#action-reason", "swap a PSU (refresh in flight)")
    page.click("#action-confirm")
    page.wait_for_function("() => document.querySelector('#drain-waiting').innerText.includes('waiting for')")
    # no event after these: the broadcaster stops (a quiet moment; the socket stays open)
    next(p for p in dashboard_stack.procs if p.name.startswith("broadcaster")).stop()
    page.evaluate("window.__socket = Live.state.socket; window.__release()")
    # the stale answer lands ("none"); the refresh the drain's events asked for must follow it. Nothing
    # else refreshes the page now (no polling, no broadcaster, the same socket: no resync), so however
    # long a loaded machine takes, the hold can only come from that refresh.
    page.wait_for_function("() => document.querySelector('#node-hold').innerText.includes('swap a PSU')")
    page.wait_for_function("() => document.querySelector('#drain-waiting').innerText.includes('waiting for')")
    assert page.evaluate("Live.state.socket === window.__socket"), "the socket reopened: a resync could have refreshed"
    assert page.evaluate("window.__noReload") == 1
    screenshot(page, "node-drain-during-refresh")


SHOWS = "([sel, text]) => document.querySelector(sel) && document.querySelector(sel).innerText.trim() === text"
STATE_CELL = "#node-modules tbody tr:first-child td:nth-child(4)"  # slot 0's state in the Modules table


def _confirm(page: Any, button: Any, reason: str) -> None:
    button.click()
    page.fill("#action-reason", reason)
    page.click("#action-confirm")
    page.wait_for_function("() => !document.querySelector('#action-dialog').open")


def test_quarantine_and_release_update_the_button_and_the_modules_table_in_place(
        browser_page: Any, dashboard_stack: LiveStack) -> None:
    page = browser_page
    _open_node(page, dashboard_stack, "n-r1-07")
    telemetry_row = page.locator("#module-telemetry tbody tr", has_text="AX-1070")
    modules_state = page.locator("#node-modules tbody tr", has_text="AX-1070").locator("td").nth(3)
    assert modules_state.inner_text().strip() == "Healthy"

    _confirm(page, telemetry_row.locator("button.act"), "ECC errors climbing (browser test)")
    telemetry_row.locator("button.act[data-action=release]").wait_for()
    assert telemetry_row.locator("button.act").inner_text().strip() == "Release"
    page.wait_for_function(SHOWS, arg=[STATE_CELL, "Quarantined"])
    assert "Quarantined" in telemetry_row.locator('[data-cell="state"]').inner_text()
    screenshot(page, "node-module-quarantined")

    _confirm(page, telemetry_row.locator("button.act"), "ECC errors explained (browser test)")
    telemetry_row.locator("button.act[data-action=quarantine]").wait_for()
    assert telemetry_row.locator("button.act").inner_text().strip() == "Quarantine"
    page.wait_for_function(SHOWS, arg=[STATE_CELL, "Healthy"])
    assert page.evaluate("window.__noReload") == 1


def test_the_state_since_and_the_audit_trail_follow_an_action_live(browser_page: Any,
                                                                   dashboard_stack: LiveStack) -> None:
    page = browser_page
    _open_node(page, dashboard_stack, "n-r1-07")
    since = page.get_attribute("#node-state-since", "data-since")
    assert since and "node.cordon" not in page.inner_text("#node-audit")
    _confirm(page, page.locator("#node-actions button[data-action=cordon]"), "rack power work (browser test)")
    page.wait_for_function("s => document.querySelector('#node-state-since').dataset.since !== s", arg=since)
    # the audit trail (node and its modules) shows the cordon with its reason, no reload
    page.wait_for_function("() => document.querySelector('#node-audit').innerText.includes('node.cordon')")
    assert "rack power work" in page.inner_text("#node-audit")
    # a module's action lands in the node's trail too
    row = page.locator("#module-telemetry tbody tr", has_text="AX-1071")
    _confirm(page, row.locator("button.act"), "fan noise (browser test)")
    page.wait_for_function("() => document.querySelector('#node-audit').innerText.includes('module.quarantine')")
    assert page.evaluate("window.__noReload") == 1
    screenshot(page, "node-audit-live")


def test_a_drain_takes_its_deadline_and_deadline_action_from_the_dialog(browser_page: Any,
                                                                        dashboard_stack: LiveStack) -> None:
    from apps.operations.models import Drain

    page = browser_page
    node = _open_node(page, dashboard_stack, "n-r1-07")
    page.click("#node-actions button[data-action=drain]")
    page.locator("#action-deadline").wait_for()
    assert page.input_value("#action-deadline") == "15"  # the API's default, shown
    page.fill("#action-deadline", "5")
    page.select_option("#action-deadline-action", "force")
    page.fill("#action-reason", "reseat a module (deadline 5 min, then force)")
    screenshot(page, "node-drain-dialog", full_page=False)
    page.click("#action-confirm")
    page.wait_for_function("() => document.querySelector('#node-state').innerText.includes('Draining')")
    drain = Drain.objects.get(node=node, state="draining")
    assert drain.deadline_action == "force"
    assert drain.deadline is not None and 290 <= (drain.deadline - drain.started_at).total_seconds() <= 310
    page.wait_for_function("() => document.querySelector('#drain-waiting').innerText.includes('deadline in 4m')")
    # the uncordon dialog has no deadline
    page.click("#node-actions button[data-action=uncordon]")
    page.locator("#action-reason").wait_for()
    assert not page.locator("#action-deadline").is_visible()


def test_a_node_enters_and_leaves_maintenance_from_its_page(browser_page: Any,
                                                           dashboard_stack: LiveStack) -> None:
    page = browser_page
    _open_node(page, dashboard_stack, "n-r3-18")
    assert "Standby" in page.inner_text("#node-state")
    assert page.locator("#node-actions button[data-action=maintenance-leave]").is_disabled()
    _confirm(page, page.locator("#node-actions button[data-action=maintenance]"), "firmware flash (browser test)")
    page.wait_for_function("() => document.querySelector('#node-state').innerText.includes('Maintenance')")
    leave = page.locator("#node-actions button[data-action=maintenance-leave]")
    page.wait_for_function("() => !document.querySelector('#node-actions [data-action=maintenance-leave]').disabled")
    assert page.locator("#node-actions button[data-action=maintenance]").is_disabled()
    screenshot(page, "node-maintenance")
    _confirm(page, leave, "firmware flashed (browser test)")
    page.wait_for_function("() => !document.querySelector('#node-state').innerText.includes('Maintenance')")
    assert page.evaluate("window.__noReload") == 1


def test_the_node_page_lists_what_holds_its_modules(browser_page: Any, dashboard_stack: LiveStack) -> None:
    from django.utils import timezone

    from apps.telemetry.models import NodeHolders

    node = Node.objects.get(hostname="n-r1-09")
    serials = list(node.modules.order_by("slot").values_list("serial", flat=True))
    NodeHolders.objects.update_or_create(node=node, defaults={"time": timezone.now(), "holders": [
        {"pid": 4242, "name": "vllm", "module": serials[0]},
        {"pid": 31337, "name": "nsys-profiler", "module": serials[-1]}]})
    page = browser_page
    _open_node(page, dashboard_stack, "n-r1-09")
    card = page.locator("#node-holders")
    card.scroll_into_view_if_needed()
    text = card.inner_text()
    assert "Processes holding its modules" in text and "4242" in text and "nsys-profiler" in text
    assert serials[0] in text
    screenshot(page, "node-holders")
