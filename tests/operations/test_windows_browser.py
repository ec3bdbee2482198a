"""The change windows page: an admin adds a window and a freeze from its forms (a bad cron refused
beside the form, naming the field), sees them drawn on the 14-day calendar and deletes one with a
reason; no serious axe violation in either theme, at desktop and phone widths."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone

from apps.accounts.services import user_ensure
from apps.audit.models import AuditEvent
from apps.operations.models import ChangeWindow, Freeze
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.test_axe import blocking

pytestmark = [pytest.mark.browser]

ADMIN, PASSWORD = "browser-admin", "browser-admin-pw-1"


def test_an_admin_adds_windows_and_freezes_and_sees_the_calendar(  # type: ignore[no-untyped-def]
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    user_ensure(username=ADMIN, password=PASSWORD, role="admin")
    page = browser_page
    login_by_cookie(page, live_server, ADMIN, next_url="/windows/")
    assert page.locator("#calendar li.cal-day:not(.cal-axis)").count() == 14

    page.fill("#window-form input[name=name]", "weeknights")
    page.fill("#window-form input[name=cron]", "0 25 * * *")
    page.click("#window-add")
    page.wait_for_function("() => !document.querySelector('#window-error').hidden")
    assert "cron" in page.inner_text("#window-error") and "hour field has 25" in page.inner_text("#window-error")
    assert not ChangeWindow.objects.exists()

    page.fill("#window-form input[name=cron]", "0 22 * * *")
    page.fill("#window-form input[name=duration_minutes]", "240")
    page.check("#window-form input[value=scale_down]")
    page.fill("#window-form input[name=reason]", "agreed with the service owners")
    page.click("#window-add")
    page.wait_for_selector("#windows tr[data-window]")
    window = ChangeWindow.objects.get(name="weeknights")
    assert sorted(window.actors) == ["rollouts", "scale_down"] and window.duration_minutes == 240
    # every day of the 14 shows the 22:00 opening
    assert page.locator("#calendar .cal-span.cal-window").count() >= 14
    assert "22:00–24:00 weeknights" in page.inner_text("#calendar li.cal-day:not(.cal-axis) >> nth=1")

    start = (timezone.now() + dt.timedelta(days=2)).replace(hour=8, minute=0, second=0, microsecond=0)
    page.fill("#freeze-form input[name=starts_at]", f"{start:%Y-%m-%dT%H:%M}")
    page.fill("#freeze-form input[name=ends_at]", f"{start + dt.timedelta(days=1):%Y-%m-%dT%H:%M}")
    page.fill("#freeze-form input[name=reason]", "quarter-end close")
    page.click("#freeze-add")
    page.wait_for_selector("#freezes tr[data-freeze]")
    freeze = Freeze.objects.get()
    assert freeze.starts_at == start and freeze.reason == "quarter-end close"
    assert page.locator("#calendar .cal-span.cal-freeze").count() == 2  # over two calendar days
    assert "freeze: quarter-end close" in page.inner_text(f"#calendar li[data-date='{start:%Y-%m-%d}']")
    screenshot(page, "windows")

    axe = Axe()
    found = blocking(axe, page, "/windows/ light")
    page.emulate_media(color_scheme="dark")
    page.reload()
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    found += blocking(axe, page, "/windows/ dark")
    screenshot(page, "windows-dark")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    found += blocking(axe, page, "/windows/ dark phone")
    screenshot(page, "windows-phone")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert found == [], "\n".join(found)

    page.set_viewport_size({"width": 1440, "height": 900})
    page.click(f"#freezes tr[data-freeze='{freeze.pk}'] button.delete")
    page.wait_for_function("() => document.querySelector('#action-dialog').open")
    page.fill("#action-reason", "the close moved a week")
    page.click("#action-confirm")
    page.wait_for_function("() => !document.querySelector('#freezes')")
    assert not Freeze.objects.exists()
    assert AuditEvent.objects.get(action="freeze.delete").reason == "the close moved a week"
