"""The live dashboard in headless Chromium against a real ASGI server (uvicorn, websockets)
and the broadcaster process, on the demo fleet with telemetry posted through the ingest
service: every chart renders with data, a drain started from the node page shows live
without a reload, a viewer gets no action controls, an operator scoped to one tier gets that
tier's actions only, an anonymous websocket is refused. Screenshots go to artifacts/dashboard-*.png."""

from __future__ import annotations

import re
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.contrib.auth.models import User
from django.utils import timezone

from apps.accounts.choices import ScopeKind
from apps.accounts.services import scope_set, user_ensure
from apps.common.templatetags.numbers import number_text
from apps.inventory.choices import TierKind
from apps.inventory.models import Node, Tier
from apps.operations.lifecycle import node_cordon
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.live_pages import CHARTS, OPERATOR, VIEWER, points, post_telemetry, wait_live, wait_points
from tests.browser.test_axe import blocking
from tests.live.stack import LiveStack

pytestmark = [pytest.mark.browser, pytest.mark.live]

# A live figure: "–", a percentage, or a number with grouped thousands and at most two decimals.
FIGURE = r"–|\d{1,3}(,\d{3})*(\.\d{1,2})?%?|0\.\d{1,3}"
SAMPLES = {139.944: "140", 96.311: "96.3", 4.256: "4.26", 0.012345: "0.0123", 1216.2339: "1,216", 12: "12",
           1234567: "1,234,567", -2.5: "-2.5", None: "–"}


def test_it_renders_every_chart_live_and_drains_a_node_in_place(browser_page: Any,
                                                                dashboard_stack: LiveStack) -> None:
    page = browser_page
    login_by_cookie(page, dashboard_stack, OPERATOR[0], next_url="/")
    wait_live(page)
    for name in CHARTS["/"]:
        assert points(page, name) > 0, f"chart {name} has no data"
    # a snapshot a second: the live tail of the queue chart grows without a reload
    page.evaluate("window.__noReload = 1")
    page.wait_for_function("""() => document.querySelector('#chart-queue').data
                                .filter(t => t.meta && t.meta.role === 'live').some(t => t.x.length >= 2)""")
    with page.expect_response(lambda r: "/live/figures/" in r.url and "minutes=15" in r.url):
        page.click(".ranges .range[data-minutes='15']")
    page.wait_for_function("() => new URL(location.href).searchParams.get('minutes') === '15'")
    for name in CHARTS["/"]:  # redrawn from the 15-minute figures
        wait_points(page, name)
    screenshot(page, "dashboard-fleet")

    # a dropped socket: the page says so, reconnects by itself and re-fetches the snapshot over REST
    with page.expect_request(lambda r: "/api/v1/live/snapshot/" in r.url):  # fails if none is fetched
        page.evaluate("Live.state.socket.close()")
        page.wait_for_function("() => document.querySelector('#live-status').dataset.state === 'reconnecting'")
        wait_live(page)
    assert page.evaluate("window.__noReload") == 1

    page.goto(f"{dashboard_stack.url}/racks/")
    wait_live(page)
    assert points(page, "racks") >= 50
    page.select_option("#rack-metric", "state")
    page.wait_for_function("() => new URL(location.href).searchParams.get('metric') === 'state'")
    wait_points(page, "racks", 50)
    screenshot(page, "dashboard-racks")

    hybrid = Node.objects.get(hostname="n-r1-07").tier_id
    page.goto(f"{dashboard_stack.url}/tiers/{hybrid}/")
    wait_live(page)
    for name in ["queue", "util", "latency", "breakdown"]:
        assert points(page, name) > 0, f"tier chart {name} has no data"
    # figures printed by one rule, the server's and the page's alike: no "139.944 req/s"
    for text in page.locator("[data-live-text]").all_inner_texts():
        assert re.fullmatch(FIGURE, text), f"a live figure printed as {text!r}"
    printed = page.evaluate("""async (values) => { const f = await import('/static/js/format.js');
                                 return values.map((v) => f.num(v)); }""", list(SAMPLES))
    assert printed == [number_text(v) for v in SAMPLES] == list(SAMPLES.values())
    screenshot(page, "dashboard-tier")

    node = Node.objects.get(hostname="n-r1-07")
    post_telemetry(at=timezone.now(), seq=100, in_flight={"n-r1-07": 4})
    page.goto(f"{dashboard_stack.url}/nodes/{node.pk}/")
    wait_live(page)
    assert points(page, "node") > 0 and points(page, "modules") > 0
    assert "Active" in page.inner_text("#node-state")
    page.evaluate("window.__noReload = 1")
    page.click("#node-actions button[data-action=drain]")
    page.fill("#action-reason", "replace a fan (browser test)")
    page.click("#action-confirm")
    page.wait_for_function("() => document.querySelector('#node-state').innerText.includes('Draining')")
    page.wait_for_function("() => document.querySelector('#drain-waiting').innerText.includes('waiting for')")
    # the hold arrives with the refresh the drain's events ask for: wait for it, don't read it at once
    page.wait_for_function("() => document.querySelector('#node-hold').innerText.includes('replace a fan')")
    screenshot(page, "dashboard-node-draining")

    # the node reports zero in flight and the drain controller completes it: the page hears it live
    from apps.operations.controllers import drains_advance

    post_telemetry(at=timezone.now(), seq=101, in_flight={"n-r1-07": 0})
    drains_advance()
    page.wait_for_function("() => document.querySelector('#node-state').innerText.includes('Drained')")
    page.wait_for_function("() => document.querySelector('#drain-waiting').innerText.includes('drained')")
    assert page.evaluate("window.__noReload") == 1  # the same document all along: no reload
    screenshot(page, "dashboard-node-drained")


def test_it_hides_actions_from_a_viewer_and_refuses_an_anonymous_websocket(
        browser_page: Any, chromium_browser: Any, dashboard_stack: LiveStack) -> None:
    page = browser_page
    login_by_cookie(page, dashboard_stack, VIEWER[0], next_url="/")
    wait_live(page)
    assert page.locator("button.act").count() == 0
    assert page.locator("#action-dialog").count() == 0
    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{dashboard_stack.url}/nodes/{node.pk}/")
    wait_live(page)
    assert page.locator("button.act").count() == 0
    screenshot(page, "dashboard-node-viewer")

    anon = chromium_browser.new_context()
    try:
        other = anon.new_page()
        other.goto(f"{dashboard_stack.url}/login/")
        outcome = other.evaluate("""() => new Promise(resolve => {
            const ws = new WebSocket(`ws://${location.host}/ws/fleet/`);
            ws.onopen = () => resolve('open');
            ws.onclose = ev => resolve('closed');
            setTimeout(() => resolve('timeout'), 40000);  // the refusal ends it at once: only a limit
        })""")
        assert outcome == "closed"
    finally:
        anon.close()


def test_a_tier_scoped_operator_is_offered_tier_actions_on_its_tier_only_also_after_live_updates(
        browser_page: Any, dashboard_stack: LiveStack) -> None:
    user, _ = user_ensure(username="hybrid-operator", password="hybrid-operator-pw-1", role="operator")
    scope_set(user=user, kind=ScopeKind.TIERS, values=[TierKind.HYBRID_INFERENCE])
    hybrid, access = (Tier.objects.get(kind=k) for k in (TierKind.HYBRID_INFERENCE, TierKind.ACCESS_LOGIC))
    mine, theirs = (f'[data-live-tier="{t.pk}"]' for t in (hybrid, access))
    read_only = "Read-only for you: tier access_logic outside your scope (tiers hybrid_inference)."
    page, axe, found = browser_page, Axe(), []

    def cordon_live(hostname: str) -> None:
        """An operator of the whole fleet cordons an access node; the page hears it in the next snapshot."""
        held = int(page.inner_text(f"{theirs} [data-live-text=held]"))
        node_cordon(node=Node.objects.get(hostname=hostname), reason="scoped pages (browser test)",
                    actor=User.objects.get(username=OPERATOR[0]))
        page.wait_for_function("([box, n]) => document.querySelector(box + ' [data-live-text=held]').textContent"
                               " === String(n)", arg=[theirs, held + 1])

    def offered_on_the_fleet_page() -> None:
        assert page.locator(f"{mine} button.act[data-action=scale]").count() == 1
        assert page.locator(f"{mine} button.act[data-action=autoscaler]").count() == 1
        assert page.locator(f"{mine} [data-read-only]").count() == 0
        assert page.locator(f"{theirs} button.act").count() == 0
        assert page.inner_text(f"{theirs} [data-read-only]") == read_only

    login_by_cookie(page, dashboard_stack, user, next_url="/")
    wait_live(page)
    offered_on_the_fleet_page()
    cordon_live("n-r1-01")
    offered_on_the_fleet_page()
    found += blocking(axe, page, "/ (tier scope)")
    screenshot(page, "dashboard-fleet-tier-scoped")

    page.goto(f"{dashboard_stack.url}/tiers/{access.pk}/")
    wait_live(page)
    assert page.locator("button.act").count() == 0 and page.inner_text("[data-read-only]") == read_only
    cordon_live("n-r2-01")
    assert page.locator("button.act").count() == 0 and page.inner_text("[data-read-only]") == read_only
    found += blocking(axe, page, "access tier (tier scope)")
    screenshot(page, "dashboard-tier-out-of-scope", full_page=False)

    page.goto(f"{dashboard_stack.url}/tiers/{hybrid.pk}/")
    wait_live(page)
    shown = page.evaluate("window.__snapshot.time")
    page.wait_for_function("(t) => window.__snapshot && window.__snapshot.time !== t", arg=shown)
    assert page.locator("button.act[data-action=scale]").count() == 1
    assert page.locator("button.act[data-action=autoscaler]").count() == 1
    assert page.locator("[data-read-only]").count() == 0
    found += blocking(axe, page, "hybrid tier (tier scope)")
    assert found == [], "\n".join(found)
