"""Shared fixtures: users in each role and API clients logged in as them."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.accounts.services import user_ensure
from tests.live.stack import current_wait

pytest_plugins = ["tests.live.fixtures", "tests.timing"]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """Keep each phase's report on the test item (``item.rep_call``), so fixtures can tell a failed test.
    A test stopped by its time budget also says what it was waiting for, if it was in a ``wait_for``."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    if report.failed and "Timeout" in str(report.longrepr)[:2000]:
        what = current_wait()
        budget = item.get_closest_marker("timeout")
        report.sections.append(("time budget", f"{item.nodeid} ran past its budget of "
                                f"{budget.args[0] if budget else '?'} s; "
                                f"{'it was waiting for ' + what if what else 'it was not in a wait_for'}"))
    return report


SLOW_MARKERS = ("live", "browser", "heavy")

# Time budgets (pytest-timeout), per kind of test; a test may name its own with
# @pytest.mark.timeout(N) (the long fault scenarios do, with the reason beside it).
BUDGETS = {"quick": 60, "browser": 180, "live": 300, "heavy": 300}
DB_SETUP_BUDGET = 240


def _budget(item: Any) -> int:
    """The test's budget; a lane that runs at the lowest CPU priority (tests/lanes.py) stretches it
    by TEST_BUDGET_SCALE: there a test may wait for the CPU without hanging."""
    kinds = [m for m in ("heavy", "live", "browser") if item.get_closest_marker(m)]
    budget = max(BUDGETS[k] for k in kinds) if kinds else BUDGETS["quick"]
    return round(budget * float(os.environ.get("TEST_BUDGET_SCALE", "1")))


def _django_order(item: Any) -> int:
    """pytest-django's order: tests in a rolled-back transaction (0) before transactional ones (1),
    whose flush removes the data migrations' rows the others count on, then tests without a
    database (2)."""
    if _is_transactional(item):
        return 1
    return 0 if item.get_closest_marker("django_db") is not None or "db" in item.fixturenames else 2


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects: a test that starts a live stack is a live test
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Every test that asks for a live stack is marked ``live`` (so it runs in the live lane,
    tests/lanes.py, whether or not its file says so). Within pytest-django's order, quick tests
    first, then the ones that start processes or a browser (file order kept within each group):
    a failure in the quick suite shows sooner. Each test gets the time budget of its kind."""
    for item in items:
        if "live_stack" in item.fixturenames and item.get_closest_marker("live") is None:
            item.add_marker(pytest.mark.live)
    items.sort(key=lambda item: (_django_order(item), any(item.get_closest_marker(m) for m in SLOW_MARKERS)))
    first_db = next((i for i, item in enumerate(items) if _django_order(item) < 2), None)
    for i, item in enumerate(items):
        if item.get_closest_marker("timeout") is None:
            # The first test that reaches the database also pays for creating and migrating it.
            item.add_marker(pytest.mark.timeout(_budget(item) + (DB_SETUP_BUDGET if i == first_db else 0)))


def _user(role: str) -> User:
    user, _ = user_ensure(username=f"test-{role}", password="pw-" + role, role=role)
    return user


@pytest.fixture
def admin_user(db: Any) -> User:
    return _user("admin")


@pytest.fixture
def operator_user(db: Any) -> User:
    return _user("operator")


@pytest.fixture
def viewer_user(db: Any) -> User:
    return _user("viewer")


def _client(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def admin_api(admin_user: User) -> APIClient:
    return _client(admin_user)


@pytest.fixture
def operator_api(operator_user: User) -> APIClient:
    return _client(operator_user)


@pytest.fixture
def viewer_api(viewer_user: User) -> APIClient:
    return _client(viewer_user)


@pytest.fixture
def anon_api() -> APIClient:
    return _client(None)


# Rows that data migrations create (role groups, tiers, admission rules). A
# transactional test (live servers, real workers, races) ends with a flush
# that removes them, so every transactional test starts by putting them back.
_DATA_MIGRATIONS = ("apps.accounts.migrations.0001_roles", "apps.inventory.migrations.0002_tiers_and_rules")


def restore_migration_rows() -> None:
    import importlib

    from django.apps import apps

    for module in _DATA_MIGRATIONS:
        importlib.import_module(module).forwards(apps, None)


def _is_transactional(item: Any) -> bool:
    """Whether the test item runs outside a rolled-back transaction (its database is flushed after)."""
    marker = item.get_closest_marker("django_db")
    if marker is not None and (marker.kwargs.get("transaction") or (marker.args and marker.args[0])):
        return True
    return any(name in item.fixturenames for name in ("transactional_db", "live_server"))


@pytest.fixture(autouse=True)
def _migration_rows(request: Any) -> None:
    if _is_transactional(request.node):
        request.getfixturevalue("transactional_db")
        restore_migration_rows()


@pytest.fixture(autouse=True)
def _abuse_limits_off(settings: Any, monkeypatch: Any) -> None:
    """Tests make writes and send telemetry far faster than people and agents do; the abuse limits
    (apps/common/throttling.py) are off unless a test turns them on (tests/common/test_throttling.py).
    Processes the live harness starts inherit the environment."""
    settings.API_WRITE_RATE = settings.TELEMETRY_RATE = ""
    monkeypatch.setenv("API_WRITE_RATE", "")
    monkeypatch.setenv("TELEMETRY_RATE", "")


@pytest.fixture(autouse=True)
def _fresh_telemetry_caches() -> None:
    """Agent identities (and the tiers' ids) and known partitions are cached per process;
    tests roll back or flush the rows behind them (tiers come back with new ids)."""
    from apps.agents.identity import identities
    from apps.telemetry.store.raw import forget_partitions

    identities.clear()
    forget_partitions()
