"""Login throttling: failed logins lock the username and the client address after the limit
(429, a clear message, Retry-After), whatever the password then; the lock is released by its
cool-off or by an admin; a successful login resets the count."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings

from apps.accounts.services import user_ensure
from tests.live.stack import wait_for

pytestmark = pytest.mark.django_db
LIMIT = settings.AXES_FAILURE_LIMIT


@pytest.fixture
def users(db: Any) -> None:
    for name in ("alice", "bob", "carol"):
        user_ensure(username=name, password=f"{name}-pw-12345", role="viewer")


def login(username: str, password: str | None = None, *, address: str = "10.0.0.1") -> Any:
    client = Client(REMOTE_ADDR=address)
    return client.post("/login/", {"username": username, "password": password or f"{username}-pw-12345",
                                    "next": "/"})


def fail(username: str, *, address: str = "10.0.0.1") -> None:
    r = login(username, "wrong-password", address=address)
    assert r.status_code == 200 and b"Wrong username or password" in r.content


def fail_to_the_limit(username: str | None = None, *, address: str = "10.0.0.1") -> None:
    """LIMIT failed logins in a row (of ``username``, or each of another unknown name): the
    first LIMIT - 1 are told the password is wrong, the last one is the lockout."""
    for i in range(LIMIT - 1):
        fail(username or f"nobody-{i}", address=address)
    assert_locked(login(username or "nobody-last", "wrong-password", address=address))


def assert_locked(r: Any) -> None:
    assert r.status_code == 429, r.status_code
    assert b"Too many failed logins for this username or from this address" in r.content
    assert r["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    assert "_auth_user_id" not in r.wsgi_request.session


def test_a_username_is_locked_after_the_limit_from_any_address(users: None) -> None:
    assert LIMIT == 5
    for i in range(LIMIT - 1):
        fail("alice", address=f"10.0.1.{i}")
    assert login("alice", address="10.0.1.99").status_code == 302  # under the limit: the right password works
    for i in range(LIMIT - 1):  # the success reset the count: a full run of failures again
        fail("alice", address=f"10.0.2.{i}")
    assert_locked(login("alice", "wrong-password", address="10.0.2.99"))  # the limit-th failure locks
    assert_locked(login("alice", address="10.0.3.1"))  # the right password, a fresh address: still refused
    assert login("bob", address="10.0.3.1").status_code == 302  # another user from that address: fine


def test_an_address_is_locked_after_the_limit_for_any_username(users: None) -> None:
    fail_to_the_limit(address="10.9.9.9")
    assert_locked(login("carol", address="10.9.9.9"))
    assert login("carol", address="10.9.9.10").status_code == 302


def test_the_admin_login_is_throttled_too(users: None) -> None:
    user_ensure(username="root", password="root-pw-12345", role="admin")
    client = Client(REMOTE_ADDR="10.7.7.7")
    for _ in range(LIMIT - 1):
        r = client.post("/admin/login/", {"username": "root", "password": "nope", "next": "/admin/"})
        assert r.status_code == 200
    r = client.post("/admin/login/", {"username": "root", "password": "nope", "next": "/admin/"})
    assert r.status_code == 429
    r = client.post("/admin/login/", {"username": "root", "password": "root-pw-12345", "next": "/admin/"})
    assert r.status_code == 429


@override_settings(AXES_COOLOFF_TIME=dt.timedelta(seconds=2))
def test_the_lock_is_released_after_its_cool_off(users: None) -> None:
    for _ in range(LIMIT - 1):
        fail("alice")
    assert login("alice", "wrong-password").status_code == 429
    r = login("alice")
    assert r.status_code == 429 and r["Retry-After"] == "2"
    wait_for(lambda: login("alice").status_code == 302, timeout=15, what="the cool-off to release alice")


def test_an_admin_releases_the_lock(users: None) -> None:
    fail_to_the_limit("alice")
    assert_locked(login("alice"))
    assert AccessAttempt.objects.filter(username="alice").exists()
    call_command("axes_reset_username", "alice")
    call_command("axes_reset_ip", "10.0.0.1")
    assert login("alice").status_code == 302


def test_the_lockout_page_names_the_lock_under_the_policy(users: None) -> None:
    fail_to_the_limit("bob", address="10.5.5.5")
    r = login("bob", address="10.5.5.5")
    assert_locked(r)
    assert b'id="locked-out"' in r.content
    assert r["Content-Security-Policy"] and r["X-Frame-Options"] == "DENY"
