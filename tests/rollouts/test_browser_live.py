"""The rollout page in headless Chromium against uvicorn and the broadcaster: the two cohorts'
latency as a Plotly chart with the cohort gate's verdict, and the page following the rollout over
the websocket (a pause made elsewhere shows up without a reload and without waiting for a poll).
The polling fallback (no websocket) is the other browser test's: it runs against the WSGI server."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from apps.inventory.choices import CombinationState
from apps.inventory.models import Rack, VersionCombination
from apps.rollouts import services
from apps.rollouts.choices import Step
from apps.rollouts.models import Rollout, RolloutNode
from apps.telemetry.models import StageNodeRollup
from apps.vectors.services import suite_import
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.live_pages import OPERATOR, wait_live
from tests.live.stack import LiveStack
from tests.rollouts.conftest import small_specs

pytestmark = [pytest.mark.browser, pytest.mark.live]


def _rollout_with_cohorts() -> Rollout:
    """A rollout whose canary is upgraded, and ten minutes of per-node stage rollups: the canary a
    little slower in generation than the nodes still waiting."""
    suite = suite_import(name="onnx-int8-small", specs=small_specs(), actor="test")[0]
    combination = VersionCombination.objects.filter(state=CombinationState.VALIDATED).select_related(
        "module_type", "driver", "framework").first()
    assert combination is not None
    spec = services.Spec(combination=combination, module_type=combination.module_type, suite=suite, bake_s=600,
                         racks=[Rack.objects.get(name="rack-1")], wave_size=2,
                         reason="back to the validated driver", override=["downgrade"])  # older than the pin
    rollout = services.rollout_create(spec=spec, actor="test")
    now = timezone.now().replace(second=0, microsecond=0)
    canary = rollout.nodes.select_related("node").get(wave=0)
    RolloutNode.objects.filter(pk=canary.pk).update(step=Step.DONE)
    Rollout.objects.filter(pk=rollout.pk).update(started_at=now - dt.timedelta(minutes=10), gates=[{
        "kind": "cohort", "wave": 0, "ok": True, "at": now.isoformat(), "tolerance_pct": 20,
        "detail": "2 stage(s) within 20 % of control: generation, tool_call", "compared": []}])
    control = [rn.node for rn in rollout.nodes.select_related("node").filter(step=Step.PENDING)]
    for k in range(10):
        minute = now - dt.timedelta(minutes=k)
        for node, generation in [(canary.node, 118.0 + k % 3), *((n, 104.0 + (k + i) % 4)
                                                                  for i, n in enumerate(control))]:
            for stage, p95 in (("generation", generation), ("tool_call", generation / 3)):
                StageNodeRollup.objects.create(node=node, tier_id=node.tier_id, stage=stage, minute=minute,
                                               count=120, errors=1, p50_ms=p95 / 2, p95_ms=p95, p99_ms=p95 * 1.3,
                                               max_ms=p95 * 1.6)
    rollout.refresh_from_db()
    return rollout


def test_the_rollout_page_charts_both_cohorts_and_follows_a_pause_over_the_websocket(
        browser_page: Any, dashboard_stack: LiveStack) -> None:
    rollout = _rollout_with_cohorts()
    page = browser_page
    page.set_default_navigation_timeout(60000)  # the page loads plotly.min.js: slow on a loaded machine
    login_by_cookie(page, dashboard_stack, OPERATOR[0], next_url=f"/rollouts/{rollout.pk}/")
    wait_live(page)
    page.evaluate("window.__noReload = 1")
    page.wait_for_function("() => { const g = document.getElementById('cohort-chart');"
                           " return g.data && g.data.length === 4; }")
    names = page.evaluate("() => document.getElementById('cohort-chart').data.map((t) => t.name)")
    waiting = rollout.nodes.filter(step=Step.PENDING).count()
    assert sorted(names) == [f"control ({waiting}) · generation", f"control ({waiting}) · tool_call",
                             "upgraded (1) · generation", "upgraded (1) · tool_call"], names
    assert page.evaluate("() => document.getElementById('cohort-chart').data[0].x.length") == 10
    assert "Cohort gate, wave 0: passed" in page.inner_text("#cohort-gate")

    # Another operator pauses it elsewhere: the page shows it from the websocket event.
    before = page.evaluate("() => window.RolloutPage.events()")
    # In another thread: Playwright's sync API keeps an event loop in this one, where the channel
    # layer's async_to_sync refuses to run (the event would be lost, not sent).
    def pause_elsewhere() -> None:
        try:
            services.rollout_pause(rollout=rollout, actor=User.objects.get(username=OPERATOR[0]),
                                   reason="watching the canary (elsewhere)")
        finally:
            connection.close()

    pauser = threading.Thread(target=pause_elsewhere)
    pauser.start()
    pauser.join()
    page.wait_for_function("() => document.querySelector('#rollout-state').textContent.includes('paused')")
    assert page.evaluate("() => window.RolloutPage.events()") > before
    assert "watching the canary (elsewhere)" in page.inner_text("#rollout-message")
    assert page.evaluate("window.__noReload") == 1
    screenshot(page, "rollout-live-cohorts")
