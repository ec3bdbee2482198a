"""Browser tests: headless Chromium (Debian's /usr/bin/chromium, never a downloaded one) driven by
Playwright's sync API against pytest-django's ``live_server``.

Reusable by any app's browser tests (import from ``tests.browser.conftest`` or put tests in this
folder):

* ``browser_page``: a fresh Playwright page (own context: no shared cookies) per test; a
  Content-Security-Policy violation logged by the browser fails the test;
* ``login_by_cookie(page, server, user, next_url)``: log in without the login form (a session made
  in the database, its cookie set in the page's context) and open ``next_url``: what every test
  does unless the login form is its subject;
* ``login(page, live_server, username, password)``: log in through the login form (the tests of
  the form itself);
* ``screenshot(page, name)``: save ``artifacts/<name>.png`` at the repository root;
* ``dashboard_stack``: the demo fleet with telemetry rolled up, uvicorn and the broadcaster
  (a ``live_stack``; helpers in ``tests.browser.live_pages``);
* ``demo_fleet``: the demo fleet (``seed_demo``) in the live server's database plus a viewer
  ``BROWSER_USER``/``BROWSER_PASSWORD``;
* ``restore_migration_rows()`` (from ``tests.conftest``, which also runs it before every
  transactional test): put back the rows the flush after a transactional test removes.

The live server serves /static/ through Django's staticfiles handler, so pages load app.css
from the repository with no CDN and no collectstatic.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import restore_migration_rows

# Playwright's sync API runs an event loop in this thread; Django would refuse ORM calls
# from the test body (SynchronousOnlyOperation) without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "artifacts"
VIEWPORT = {"width": 1440, "height": 900}
BROWSER_USER = "browser-viewer"
BROWSER_PASSWORD = "browser-viewer-pw-1"  # noqa: S105 - a test user in the throwaway test database


def _require_browser() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium; set REQUIRE_BROWSER=1 to fail instead)")


# Module scope: Playwright's sync API keeps an event loop running in this thread while it is
# open, which breaks the async (anyio) tests that run after the browser tests in one session.
@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Any]:
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser_page(chromium_browser: Any) -> Iterator[Any]:
    """A page whose Content-Security-Policy violations fail the test: the pages run under the
    policy the server sends (enforced), and Chromium logs each refusal to the console."""
    context = chromium_browser.new_context(viewport=VIEWPORT, locale="en-US", timezone_id="UTC")
    # The longest any one step may take before the state it waits for counts as never coming: on a
    # loaded 2-core machine a page behind a login and a demo fleet takes well over 15 s to load.
    context.set_default_timeout(45_000)
    page = context.new_page()
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        yield page
    finally:
        context.close()
    assert refused == [], f"the pages broke their Content-Security-Policy: {refused}"


def login(page: Any, live_server: Any, username: str, password: str, next_url: str = "/") -> None:
    """Log in through the login form and wait until the page after it has loaded."""
    page.goto(f"{live_server.url}/login/?next={next_url}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation():
        page.click("button[type=submit]")
    if "/login/" in page.url:
        raise AssertionError(f"login as {username} failed: still on {page.url}")


def login_by_cookie(page: Any, server: Any, user: Any, next_url: str = "/") -> None:
    """Log ``user`` (a User or a username) in without the login form, then open ``next_url`` and wait
    until it has loaded.

    The session is made as ``django.contrib.auth.login()`` fills it (user id, backend, the password's
    session hash) in the settings' session engine, the database: the test is transactional, so the row
    is committed and both pytest-django's ``live_server`` and a live stack's uvicorn (``server.url``;
    the same test database) read it. Its cookie goes into the page's browser context for the server's
    host. The form login's side effects (``last_login``, django-axes' access log) are left out: no page
    shows them. The pages set the CSRF cookie their scripts send (the top bar's log-out form)."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model

    if isinstance(user, str):
        user = get_user_model().objects.get(username=user)
    base = server if isinstance(server, str) else server.url
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = user._meta.pk.value_to_string(user)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    page.context.add_cookies([{
        "name": settings.SESSION_COOKIE_NAME, "value": session.session_key, "url": base,
        "httpOnly": settings.SESSION_COOKIE_HTTPONLY, "secure": settings.SESSION_COOKIE_SECURE,
        "sameSite": str(settings.SESSION_COOKIE_SAMESITE or "Lax").capitalize(),
    }])
    page.goto(f"{base}{next_url}")
    if "/login/" in page.url:
        raise AssertionError(f"the session cookie of {user.get_username()} was refused: on {page.url}")


def screenshot(page: Any, name: str, *, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


@pytest.fixture
def demo_fleet(transactional_db: Any, live_server: Any) -> dict[str, Any]:
    """The demo fleet, committed so the live server's thread sees it, and a viewer to log in as."""
    from apps.accounts.services import user_ensure
    from apps.simulator.demo import seed_demo

    restore_migration_rows()
    summary = seed_demo()
    user_ensure(username=BROWSER_USER, password=BROWSER_PASSWORD, role="viewer")
    return summary


@pytest.fixture
def dashboard_stack(live_stack: Any) -> Any:
    """The demo fleet with 8 minutes of telemetry rolled up, a uvicorn process and the broadcaster."""
    from django.utils import timezone

    from apps.accounts.services import user_ensure
    from apps.simulator.demo import seed_demo
    from apps.telemetry.rollups.rollup import telemetry_rollup
    from tests.browser.live_pages import OPERATOR, VIEWER, post_telemetry

    restore_migration_rows()
    seed_demo()
    user_ensure(username=OPERATOR[0], password=OPERATOR[1], role="operator")
    user_ensure(username=VIEWER[0], password=VIEWER[1], role="viewer")
    now = timezone.now()
    for i in range(10):
        post_telemetry(at=now - dt.timedelta(seconds=50 * (10 - i)), seq=i)
    telemetry_rollup(now=now, since=now - dt.timedelta(minutes=10))

    live_stack.web()
    # Its first tick sets the baseline it diffs against: an action taken before it would be in
    # the baseline and never pushed, so the tests start acting only after it.
    live_stack.broadcaster(interval=0.5).wait_log("baseline set, pushing changes", timeout=120)
    return live_stack
