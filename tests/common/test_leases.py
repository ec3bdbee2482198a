"""Leases on the test run's real Redis: one holder at a time, a standby takes over when the holder
stops renewing or lets go, and a holder paused past its lease does not act on waking."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from apps.common.leases import Lease, lease_holders
from tests.live.stack import wait_for


@pytest.fixture(autouse=True)
def _own_keys(settings: Any) -> None:
    # This test's own key prefix: nothing left by another test (or a live stack) is seen.
    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"lease-test-{uuid.uuid4().hex}"}}


def test_it_gives_the_lease_to_one_holder_at_a_time() -> None:
    a, b = Lease("beat", holder="a", ttl_s=30), Lease("beat", holder="b", ttl_s=30)
    assert a.acquire() and a.held()
    assert not b.acquire() and not b.held()
    assert a.acquire() and a.held()  # renewing keeps it
    assert [(h.name, h.holder, h.fence) for h in lease_holders()] == [("beat", "a", 1), ("broadcaster", None, None)]
    assert 0 < (lease_holders()[0].expires_in_s or 0) <= 30


def test_a_released_lease_goes_to_the_standby_with_a_higher_fence() -> None:
    a, b = Lease("broadcaster", holder="a", ttl_s=30), Lease("broadcaster", holder="b", ttl_s=30)
    assert a.acquire()
    a.release()
    assert not a.held()
    assert b.acquire() and b.held()
    assert (a.fence, b.fence) == (None, 2)


def test_a_standby_takes_over_when_the_holder_stops_renewing_and_the_old_holder_does_not_act() -> None:
    a, b = Lease("beat", holder="a", ttl_s=0.5), Lease("beat", holder="b", ttl_s=0.5)
    assert a.acquire()
    # a is paused (it renews no more): b gets the lease once a's has run out.
    wait_for(b.acquire, timeout=10, what="the standby to take the expired lease")
    assert b.held()
    # a wakes: its own clock says its lease ran out, Redis names b; it may not act, nor take it back.
    assert not a.held()
    assert not a.acquire()
    assert lease_holders()[0].holder == "b"


def test_a_holder_whose_clock_says_the_lease_ran_out_does_not_act_even_if_redis_still_names_it() -> None:
    a = Lease("beat", holder="a", ttl_s=30)
    assert a.acquire()
    a._valid_until = 0.0  # as after a pause longer than the time to live, before Redis expired the key
    assert not a.held()


def test_it_refuses_holder_names_it_cannot_parse_back() -> None:
    with pytest.raises(ValueError):
        Lease("beat", holder="a|b")
    with pytest.raises(ValueError):
        Lease("beat", holder="a", ttl_s=0)


def test_the_api_names_each_roles_holder(viewer_api: Any) -> None:
    lease = Lease("broadcaster", holder="broadcaster@web-2:41", ttl_s=30)
    assert lease.acquire()
    response = viewer_api.get("/api/v1/leases/")
    assert response.status_code == 200
    rows = {row["name"]: row for row in response.json()}
    assert rows["beat"] == {"name": "beat", "holder": None, "fence": None, "expires_in_s": None}
    assert rows["broadcaster"]["holder"] == "broadcaster@web-2:41"
    assert rows["broadcaster"]["fence"] == lease.fence
    assert 0 < rows["broadcaster"]["expires_in_s"] <= 30
