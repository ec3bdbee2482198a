"""The live charts in a real browser (the Django live server: the figures come embedded in the
page): an empty chart says why, tick labels never repeat, and the charts keep their shape when
the window shrinks. Screenshots go to artifacts/charts-*.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from apps.inventory.models import Node
from tests.browser.conftest import BROWSER_USER, login_by_cookie, screenshot
from tests.browser.live_pages import post_telemetry

pytestmark = pytest.mark.browser

TIME_CHARTS = ["queue", "util", "latency"]
NO_DATA = "no data yet: rollups every minute"


def _drawn(page: Any, names: list[str]) -> None:
    for name in names:
        page.wait_for_function("n => { const d = document.querySelector(`[data-figure=\"${n}\"]`);"
                               " return d && d._fullLayout; }", arg=name)


def _ticks(page: Any, name: str) -> list[str]:
    return list(page.eval_on_selector_all(f'[data-figure="{name}"] .xtick text', "ts => ts.map(t => t.textContent)"))


def _notes(page: Any, name: str) -> list[str]:
    return list(page.eval_on_selector_all(f'[data-figure="{name}"] .annotation-text',
                                          "ts => ts.map(t => t.textContent)"))


def _history(minutes: int) -> None:
    """Telemetry over the last ``minutes`` minutes, rolled up (a fleet that has just started)."""
    from apps.telemetry.rollups.rollup import telemetry_rollup

    now = timezone.now()
    for i in range(minutes * 2 + 1):
        post_telemetry(at=now - dt.timedelta(seconds=30 * (minutes * 2 - i)), seq=i)
    telemetry_rollup(now=now, since=now - dt.timedelta(minutes=minutes + 1))


def test_empty_charts_say_why_and_show_no_midnight_ticks(browser_page: Any, live_server: Any,
                                                        demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    _drawn(page, TIME_CHARTS)
    for name in TIME_CHARTS:
        assert NO_DATA in _notes(page, name), f"empty chart {name} does not say why"
        ticks = _ticks(page, name)
        assert ticks and len(set(ticks)) == len(ticks), f"{name} repeats tick labels: {ticks}"
        assert set(ticks) != {"00:00"}, f"{name} shows midnight ticks for no data"
    screenshot(page, "charts-empty")

    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    _drawn(page, ["node", "modules"])
    for name in ["node", "modules"]:
        assert NO_DATA in _notes(page, name), f"empty node chart {name} does not say why"
        assert set(_ticks(page, name)) != {"00:00"}


def test_a_few_minutes_of_history_get_distinct_tick_labels_and_no_empty_note(
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    _history(minutes=2)
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    _drawn(page, TIME_CHARTS)
    for name in ["util", "latency"]:
        assert NO_DATA not in _notes(page, name)
        ticks = _ticks(page, name)
        assert len(ticks) >= 2 and len(set(ticks)) == len(ticks), f"{name} repeats tick labels: {ticks}"
    screenshot(page, "charts-two-minutes")
    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    _drawn(page, ["node", "modules"])
    for name in ["node", "modules"]:
        ticks = _ticks(page, name)
        assert len(set(ticks)) == len(ticks), f"{name} repeats tick labels: {ticks}"


PLOT_HEIGHTS = """() => Object.fromEntries([...document.querySelectorAll('[data-figure]')].map(d => {
    const r = d.querySelector('.draglayer .xy .nsewdrag, .draglayer .nsewdrag');
    return [d.dataset.figure, r ? Math.round(r.getBoundingClientRect().height) : 0]; }))"""
OVERLAPS = """() => Object.fromEntries([...document.querySelectorAll('[data-figure]')].map(d => {
    const plot = d.querySelector('.draglayer .nsewdrag'), legend = d.querySelector('.legend'),
          ticks = [...d.querySelectorAll('.xtick text')].map(t => t.getBoundingClientRect());
    if (!plot || !legend || !ticks.length) return [d.dataset.figure, false];
    const l = legend.getBoundingClientRect();
    return [d.dataset.figure,
            ticks.some(t => t.bottom > l.top && t.top < l.bottom && t.right > l.left && t.left < l.right)];
  }))"""


@pytest.mark.parametrize("path, names", [("/", ["queue", "util", "latency", "breakdown"]), ("/racks/", ["racks"])])
def test_charts_keep_their_shape_when_the_window_shrinks(browser_page: Any, live_server: Any,
                                                         demo_fleet: dict[str, Any], path: str,
                                                         names: list[str]) -> None:
    _history(minutes=5)
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url=path)
    _drawn(page, names)
    before = page.evaluate(PLOT_HEIGHTS)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.wait_for_function("() => [...document.querySelectorAll('[data-figure]')].every(d => d._fullLayout"
                           " && Math.abs(d._fullLayout.width - d.clientWidth) < 2)")
    # then a live update redraws each chart, as a snapshot does every second (Plotly.react, same layout)
    page.evaluate("() => Promise.all([...document.querySelectorAll('[data-figure]')].map(d =>"
                  " Plotly.react(d, d.data, d.layout, {displaylogo: false, responsive: true})))")
    # Plotly redraws on the window's resize event: wait until every chart is laid out at the new
    # width with a plot area of at least 200 px (a loaded machine only takes longer); if that never
    # comes, the step's timeout ends the wait and the assertions below report the heights
    try:
        page.wait_for_function("""min => [...document.querySelectorAll('[data-figure]')].every(d => {
            const r = d.querySelector('.draglayer .nsewdrag');
            return d._fullLayout && Math.abs(d._fullLayout.width - d.clientWidth) < 2
                   && r && r.getBoundingClientRect().height >= min; })""", arg=200)
    except PlaywrightTimeoutError:
        pass
    heights = page.evaluate(PLOT_HEIGHTS)
    screenshot(page, f"charts-1280{path.replace('/', '-').rstrip('-')}")
    small = {n: h for n, h in heights.items() if n in names and h < 200}
    assert not small, f"plot areas under 200 px at 1280×800 (at 1440×900: {before}): {small}"
    overlaps = {n for n, o in page.evaluate(OVERLAPS).items() if o}
    assert not overlaps, f"legend over the axis labels at 1280×800: {overlaps}"


MODEBAR_OVER_TITLES = """name => { const d = document.querySelector(`[data-figure="${name}"]`);
    const bar = d.querySelector('.modebar');
    if (!bar || getComputedStyle(bar).display === 'none') return [];
    const b = bar.getBoundingClientRect();
    return [...d.querySelectorAll('.g-ytitle text, .g-y2title text, .legend')].filter(t => {
        const r = t.getBoundingClientRect();
        return r.width && r.bottom > b.top && r.top < b.bottom && r.right > b.left && r.left < b.right;
    }).map(t => t.textContent); }"""


def test_the_node_chart_counts_in_flight_in_whole_requests_and_keeps_its_titles_clear(
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    """Requests in flight are counted, so the node chart's right axis ticks whole numbers (it once
    read 1.6 / 3.2 / 4.7); the mode bar sits clear of the axis titles and the legend; a first load
    logs no chart error ("MNaN" came from a date axis given an empty range)."""
    _history(minutes=5)
    page = browser_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    _drawn(page, TIME_CHARTS)
    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{live_server.url}/nodes/{node.pk}/")
    _drawn(page, ["node", "modules"])
    y2 = page.eval_on_selector_all('[data-figure="node"] .y2tick text', "ts => ts.map(t => t.textContent)")
    assert len(y2) >= 2, f"no ticks on the in-flight axis: {y2}"
    assert all(t.replace(",", "").isdigit() for t in y2), f"in-flight ticks are not whole requests: {y2}"
    page.hover('[data-figure="node"] .nsewdrag')  # the mode bar shows on hover
    page.wait_for_selector('[data-figure="node"] .modebar-container .modebar', state="visible")
    for name in ["node", "modules"]:
        page.hover(f'[data-figure="{name}"] .nsewdrag')
        covered = page.evaluate(MODEBAR_OVER_TITLES, name)
        assert not covered, f"the {name} chart's mode bar covers {covered}"
    screenshot(page, "charts-node")
    assert not [e for e in errors if "NaN" in e], f"chart errors on load: {errors}"
