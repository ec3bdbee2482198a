"""The capacity planner page in a real browser: fill the forms, read results, formulas and the chart."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import BROWSER_USER, login_by_cookie, screenshot

pytestmark = pytest.mark.browser


def _out(page: Any, form_card: str, key: str) -> str:
    return str(page.inner_text(f"{form_card} [data-out={key}]")).strip()


def _wait_out(page: Any, card: str, key: str, text: str) -> None:
    page.wait_for_function(
        "([sel, text]) => { const e = document.querySelector(sel); return e && e.textContent.trim() === text; }",
        arg=[f"{card} [data-out={key}]", text],
    )


def test_it_sizes_the_array_as_you_type(browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/planner/")
    assert page.url == f"{live_server.url}/planner/"

    # The page opens with the worked example of docs/domain.md.
    _wait_out(page, "#array-card", "modules_needed", "10")
    assert _out(page, "#array-card", "requests_per_s") == "500"
    assert _out(page, "#array-card", "input_tokens_per_s") == "250,000"
    assert _out(page, "#array-card", "compute_tflops") == "300"
    assert _out(page, "#array-card", "nodes_needed") == "5"
    assert _out(page, "#array-card", "cpu_instructions_per_s") == "2.5e8"
    # Worked example: two 8-core CPUs.
    page.fill("#array-form input[name=cpu_count]", "2")
    _wait_out(page, "#array-card", "cpu_capacity_per_s", "4e9")
    assert _out(page, "#array-card", "cpu_headroom") == "0.938 (93.8%)"  # three significant digits
    assert page.inner_text("#array-card [data-explain=cpu_headroom]") == "CPU headroom = 1 − 2.5e8 ÷ 4e9 = 0.938"

    # Twice the users: twice the modules; the formula shows the new numbers; the chart follows.
    page.fill("#array-form input[name=concurrent_users]", "2000")
    _wait_out(page, "#array-card", "modules_needed", "20")
    assert _out(page, "#array-card", "nodes_needed") == "10"
    assert page.inner_text("#array-card [data-explain=requests_per_s]") == (
        "requests/s = 2,000 users ÷ 2 s between requests = 1,000")
    page.wait_for_function("() => document.getElementById('planner-chart').dataset.users === '2000'")
    chart = page.evaluate("""() => {
        const gd = document.getElementById('planner-chart');
        return {names: gd.data.map(t => t.name), plan: [gd.data[2].x[0], gd.data[2].y[0]],
                lastUsers: gd.data[0].x[gd.data[0].x.length - 1], y2: gd.layout.yaxis2.title.text};
    }""")
    assert chart == {"names": ["modules needed", "CPU headroom %", "your plan"], "plan": [2000, 20],
                     "lastUsers": 4000, "y2": "CPU headroom (%)"}
    assert page.locator("#planner-chart .main-svg").count() >= 1

    # The cost comparison follows the plan (10 nodes, 20 modules) at editable prices.
    _wait_out(page, "#cost-card", "plan_array_cost", "200,000")
    page.fill("#cost-form input[name=gpu_server_price]", "250000")
    _wait_out(page, "#cost-card", "rule_of_thumb_ratio", "0.8")
    assert _out(page, "#cost-card", "gpu_servers_equivalent") == "2"

    # Agent sizing, worked example with a batching gain of 1.7.
    _wait_out(page, "#agent-card", "accelerators_needed_batched", "3")
    assert _out(page, "#agent-card", "accelerators_needed") == "5"
    assert _out(page, "#agent-card", "inference_tokens_per_s") == "10,000"
    assert "16 cores, one high-end card, 64 GB" in page.inner_text("#agent-card [data-explain=reference_configuration]")

    # What-if: no telemetry in this database yet, then against the demo fleet with the numbers above.
    page.wait_for_function("() => document.getElementById('what-if-status').textContent.includes('no telemetry')")
    page.click("#what-if-mine")
    page.wait_for_selector("#what-if-results tr[data-tier=hybrid_inference]")
    hybrid = page.inner_text("#what-if-results tr[data-tier=hybrid_inference]")
    assert "33 / 5" in hybrid  # 9 standby, 4 of them in the gray pool (not capacity)
    # 7 nodes needed, 33 active, the demo tier keeps at least 10 active.
    assert "-23 nodes" in hybrid
    assert "release 23 nodes (drain first); minimum binds: the tier minimum keeps 10 active" in hybrid
    # The demand sentence, each figure once.
    demand = page.inner_text("#what-if-demand")
    assert demand.startswith("Demand (user): 2,000 users ÷ 2 s = 1,000 req/s; 500 input tokens per request given; "
                             "100 output tokens per request given. Plan: "), demand
    assert demand.count("1,000 req/s") == 1 and demand.count("500 input") == 1, demand
    screenshot(page, "planner")


def test_it_shows_errors_next_to_the_fields(browser_page: Any, live_server: Any,
                                            demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/planner/")
    _wait_out(page, "#array-card", "modules_needed", "10")
    page.fill("#array-form input[name=request_interval_s]", "0")
    page.fill("#array-form input[name=usable_fraction]", "3")
    page.wait_for_function(
        "() => document.querySelector('[data-error-for=request_interval_s]').textContent !== ''")
    assert page.inner_text("[data-error-for=request_interval_s]") == "must be at least 0.001"
    assert page.inner_text("[data-error-for=usable_fraction]") == "must be at most 1"
    assert "invalid" in (page.get_attribute("#array-form input[name=request_interval_s]", "class") or "")
    assert "request_interval_s: must be at least 0.001" in page.inner_text("#array-status")
    # The last good results stay, greyed out as stale.
    assert "stale" in (page.get_attribute("#array-results", "class") or "")
    screenshot(page, "planner-errors", full_page=False)

    page.fill("#array-form input[name=request_interval_s]", "1")
    page.fill("#array-form input[name=usable_fraction]", "0.25")
    _wait_out(page, "#array-card", "modules_needed", "20")
    assert page.inner_text("[data-error-for=request_interval_s]") == ""
    assert "stale" not in (page.get_attribute("#array-results", "class") or "")


def test_it_plans_the_observed_busy_hour_without_a_release(browser_page: Any, live_server: Any,
                                                           demo_fleet: dict[str, Any]) -> None:
    from apps.inventory.models import Tier
    from apps.operations.scaling import autoscaler_run
    from tests.fleet_play import play_demo_hour

    play_demo_hour(15.0)
    decisions = {tier.kind: autoscaler_run(tier=tier) for tier in Tier.objects.filter(
        kind__in=("access_logic", "hybrid_inference"))}  # the demo's policies, in dry run
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/planner/")
    page.click("#what-if-observed")
    page.wait_for_selector("#what-if-results tr[data-tier=access_logic]")
    for kind in ("access_logic", "hybrid_inference"):
        row = page.inner_text(f"#what-if-results tr[data-tier={kind}]")
        assert "release" not in row.split("binds")[0].split("nodes:")[-1], row
        assert "utilisation binds" in row or "queue binds" in row, row
        # The autoscaler's figure beside the plan's, and under them why the two differ, in its numbers.
        d = decisions[kind]
        assert d is not None and d.raw_desired is not None
        needed = page.inner_text(f"#what-if-results tr[data-tier={kind}] td:nth-child(3)")
        plan_nodes = needed.split(" node")[0]
        assert f"autoscaler: {d.desired} nodes" + (f" (its formula {d.raw_desired})"
                                                   if d.raw_desired != d.desired else "") in needed, needed
        compare = page.inner_text(f"#what-if-results tr[data-compare={kind}] td[colspan]")
        assert compare.startswith(f"The planner's {plan_nodes} sizes the tier for throughput: "), compare
        assert (f"The autoscaler's {d.desired} (dry run) sizes it for the waiting work: "
                f"{d.queue_depth:.0f} requests queued ÷ its target of {d.target_queue_per_node:g} a node = "
                f"{d.raw_desired} nodes") in compare, compare
    assert "Demand (telemetry)" in page.inner_text("#what-if-demand")
    screenshot(page, "planner-what-if-busy-hour")
