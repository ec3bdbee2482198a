"""A broadcaster whose ticks fail (here: its database is out of reach) says so in its log and in every
page's live badge, which otherwise would stay "live" over a socket that no longer brings data; once
ticks succeed again the badge is back to "live"."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.services import user_ensure
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.live_pages import VIEWER, wait_live
from tests.live import stack
from tests.live.stack import LiveStack

pytestmark = [pytest.mark.browser, pytest.mark.live]


def test_a_failing_broadcaster_shows_in_its_log_and_the_badge(browser_page: Any, live_stack: LiveStack) -> None:
    user_ensure(username=VIEWER[0], password=VIEWER[1], role="viewer")
    live_stack.web()
    # The broadcaster's database is one that does not exist: every tick fails, Redis still carries frames.
    broken = live_stack.broadcaster(interval=0.5, env={
        "DATABASE_URL": stack.test_database_url().replace("/test_", "/no_such_database_test_", 1)})
    page = browser_page
    login_by_cookie(page, live_stack, VIEWER[0], next_url="/")
    broken.wait_log("broadcast tick failed", timeout=60)
    page.wait_for_function("() => document.querySelector('#live-status').dataset.state === 'degraded'")
    text = page.inner_text("#live-status")
    assert "updates failing" in text and "in a row" in text, text
    assert "OperationalError" in (page.get_attribute("#live-status", "title") or "")
    screenshot(page, "live-badge-broadcaster-failing", full_page=False)

    broken.stop()
    live_stack.broadcaster(interval=0.5)
    wait_live(page)  # a snapshot came through: live again, without a reload
    assert "updates failing" not in page.inner_text("#live-status")
