"""The pages under their Content-Security-Policy, enforced, in headless Chromium against uvicorn:
the dashboard (charts, the live websocket, the action dialog), the racks, the node page and the
planner record no violation (and every browser test fails on a violation the browser logs, see
``browser_page``); an inline script injected into a page is refused and reported, so the listener
is shown to hear violations."""

from __future__ import annotations

from typing import Any

import pytest

from apps.inventory.models import Node
from tests.browser.conftest import login_by_cookie
from tests.browser.live_pages import OPERATOR, points, wait_live
from tests.live.stack import LiveStack

pytestmark = [pytest.mark.browser, pytest.mark.live]

LISTEN = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
    `${e.effectiveDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber}`));
"""

# The longest live trace of the queue chart (one point more per snapshot the page draws).
LIVE_TAIL = """() => Math.max(0, ...document.querySelector('#chart-queue').data
                                 .filter(t => t.meta && t.meta.role === 'live').map(t => (t.x || []).length))"""


def violations(page: Any) -> list[str]:
    return list(page.evaluate("window.__csp || []"))


def test_the_pages_run_under_the_policy_with_no_violation(browser_page: Any,
                                                          dashboard_stack: LiveStack) -> None:
    page = browser_page
    page.add_init_script(LISTEN)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
    policies: list[str] = []
    page.on("response", lambda r: policies.append(r.headers.get("content-security-policy", ""))
            if r.request.resource_type == "document" else None)

    login_by_cookie(page, dashboard_stack, OPERATOR[0], next_url="/")
    wait_live(page)  # the websocket is connected: connect-src lets it through
    for name in ["queue", "util", "latency", "breakdown"]:
        assert points(page, name) > 0, f"chart {name} has no data"
    # a few live updates redraw the charts: the queue chart's live tail grows by three snapshots
    tail = page.evaluate(LIVE_TAIL)
    page.wait_for_function(f"n => ({LIVE_TAIL})() >= n + 3", arg=tail)
    seen = {"/": violations(page)}

    page.goto(f"{dashboard_stack.url}/racks/")
    wait_live(page)
    assert points(page, "racks") > 0
    seen["/racks/"] = violations(page)

    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{dashboard_stack.url}/nodes/{node.pk}/")
    wait_live(page)
    assert points(page, "node") > 0
    page.click("#node-actions button[data-action=cordon]")
    page.wait_for_selector("#action-reason", state="visible")
    seen["/nodes/<id>/"] = violations(page)

    page.goto(f"{dashboard_stack.url}/planner/")
    # the planner's first results in and its chart drawn (Plotly.react, then the chart's users noted)
    page.wait_for_function("() => { const g = document.getElementById('planner-chart');"
                           " return !!(g && g._fullLayout && g.dataset.users); }")
    seen["/planner/"] = violations(page)

    assert seen == {"/": [], "/racks/": [], "/nodes/<id>/": [], "/planner/": []}
    assert console == []
    assert policies and all("script-src 'self'" in p for p in policies), policies



def test_an_injected_inline_script_is_refused_and_heard(chromium_browser: Any,
                                                        dashboard_stack: LiveStack) -> None:
    """The policy is enforced and the listener hears it (a page of its own: the refusal is expected)."""
    context = chromium_browser.new_context()
    try:
        page = context.new_page()
        page.add_init_script(LISTEN)
        page.goto(f"{dashboard_stack.url}/login/")
        page.evaluate("""() => { const s = document.createElement('script');
                                 s.textContent = 'window.__ran = 1'; document.body.appendChild(s); }""")
        page.wait_for_function("() => window.__csp.length > 0")
        assert page.evaluate("window.__ran") is None
        assert violations(page)[0].startswith("script-src-elem blocked inline"), violations(page)
    finally:
        context.close()
