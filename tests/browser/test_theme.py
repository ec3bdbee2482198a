"""Dark mode: the page follows the system's prefers-color-scheme until the top bar's toggle picks a
theme, which is remembered (localStorage); the Plotly charts take the theme's paper, plot, font and
grid colours, also after a range change; text keeps ≥ 4.5:1 (axe-core's
color-contrast rule) in the dark. Screenshots at 1280×800: artifacts/dark-{fleet,node}.png."""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe

from apps.inventory.models import Node
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.live_pages import CHARTS, OPERATOR, points, wait_live
from tests.live.stack import LiveStack

pytestmark = [pytest.mark.browser, pytest.mark.live]

DARK = {"paper": "#181e2b", "font": "#e2e6ee", "grid": "#2f3848"}
LIGHT = {"paper": "#ffffff", "font": "#1c2230", "grid": "#eef0f4"}


def chart_colours(page: Any, name: str) -> dict[str, str]:
    return dict(page.evaluate("""name => { const l = document.querySelector(`[data-figure="${name}"]`)._fullLayout;
        return {paper: l.paper_bgcolor, plot: l.plot_bgcolor, font: l.font.color, grid: l.xaxis.gridcolor}; }""", name))


def wait_charts(page: Any, names: list[str], want: dict[str, str]) -> None:
    """Every chart drawn with data and the theme's colours (a restyle is asynchronous: wait for it)."""
    for name in names:
        page.wait_for_function("""([name, want]) => {
            const gd = document.querySelector(`[data-figure="${name}"]`);
            const l = gd && gd._fullLayout;
            return l && gd.data && gd.data.length && l.paper_bgcolor === want.paper && l.plot_bgcolor === want.paper
                && l.font.color === want.font && (name === 'racks' || l.xaxis.gridcolor === want.grid); }""",
                               arg=[name, want])


def contrast_violations(page: Any) -> list[str]:
    result = Axe().run(page, options={"runOnly": ["color-contrast"], "resultTypes": ["violations"]})
    return [f"{v['id']}: {n['target']} {n['failureSummary'][:160]}"
            for v in result.response["violations"] for n in v["nodes"]]


def body_background(page: Any) -> str:
    return str(page.eval_on_selector("body", "e => getComputedStyle(e).backgroundColor"))


def test_dark_mode_follows_the_system_and_the_remembered_toggle(browser_page: Any, dashboard_stack: LiveStack) -> None:
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.emulate_media(color_scheme="dark")
    page.goto(f"{dashboard_stack.url}/login/?next=/")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert body_background(page) == "rgb(16, 20, 28)"
    login_by_cookie(page, dashboard_stack, OPERATOR[0], next_url="/")  # the login form is not this test's subject
    wait_live(page)
    assert page.get_attribute("#theme-toggle", "aria-pressed") == "true"
    wait_charts(page, CHARTS["/"], DARK)
    assert all(points(page, name) > 0 for name in CHARTS["/"])
    # a range change (figures fetched anew and drawn again) keeps the theme
    # the click as the page's handler receives it; the layout around the buttons moves while live frames
    # redraw the charts, which a loaded machine can keep from ever looking "stable" to Playwright
    page.dispatch_event(".ranges .range[data-minutes='15']", "click")
    page.wait_for_function("() => new URL(location.href).searchParams.get('minutes') === '15'")
    wait_charts(page, CHARTS["/"], DARK)
    assert chart_colours(page, "queue")["grid"] == DARK["grid"]
    assert contrast_violations(page) == []
    screenshot(page, "dark-fleet")

    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{dashboard_stack.url}/nodes/{node.pk}/")
    wait_live(page)
    wait_charts(page, ["node", "modules"], DARK)
    assert contrast_violations(page) == []
    screenshot(page, "dark-node")

    # The toggle: light at once (charts restyled in place), remembered over a reload whatever the system says.
    page.click("#theme-toggle")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    assert page.get_attribute("#theme-toggle", "aria-pressed") == "false"
    assert page.evaluate("localStorage.getItem('cp-theme')") == "light"
    wait_charts(page, ["node", "modules"], LIGHT)
    assert body_background(page) == "rgb(245, 246, 248)"
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    wait_charts(page, ["node", "modules"], LIGHT)

    # Back to dark by the toggle, then the palette's "follow the system": the system (light now) decides.
    page.click("#theme-toggle")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    assert page.evaluate("localStorage.getItem('cp-theme')") == "dark"
    page.emulate_media(color_scheme="light")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"  # the choice wins over the system
    page.keyboard.press("Control+k")
    page.wait_for_function("() => document.querySelector('#palette').open")
    page.keyboard.type("follow the system")
    page.wait_for_function("() => document.querySelector('#palette-opt-0').dataset.kind === 'theme'")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.documentElement.dataset.theme === 'light'")
    assert page.evaluate("localStorage.getItem('cp-theme')") is None
    page.emulate_media(color_scheme="dark")  # following the system again: a change there shows at once
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    wait_charts(page, ["node", "modules"], DARK)
