"""``wait_for`` names what it waited for: in its own failure, and when the test's time budget
stops it mid-wait (tests/conftest.py adds that to the failure report)."""

from __future__ import annotations

import pytest

from tests.live.stack import current_wait, wait_for


class _Budget(BaseException):
    """Stands for pytest-timeout's failure, raised into the test while it waits."""


def test_its_own_timeout_names_what_it_waited_for_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"waiting for the answer; last: \[\]"):
        wait_for(lambda: [], timeout=0.05, what="the answer", interval=0.01)


def test_a_budget_that_stops_it_mid_wait_is_told_what_it_waited_for() -> None:
    def check() -> bool:
        raise _Budget

    with pytest.raises(_Budget):
        wait_for(check, timeout=30, what="the node to drain")
    assert current_wait() == "the node to drain"
    wait_for(lambda: True, timeout=1, what="something else")  # a new wait forgets the old one
    assert current_wait() == ""
