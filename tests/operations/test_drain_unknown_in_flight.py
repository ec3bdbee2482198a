"""A node whose agent cannot count its in-flight work (in_flight null) is never
taken for empty: its drain waits for the deadline and says why."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.operations import controllers, lifecycle, selectors
from apps.operations.choices import DeadlineAction, DrainState

from .conftest import state_of

pytestmark = pytest.mark.django_db


def test_it_keeps_a_drain_waiting_while_in_flight_is_unknown(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="swap DIMM", actor="alice", deadline_s=300).obj
    fleet.report(node, in_flight=None)
    for _ in range(3):
        assert controllers.drain_advance(drain_id=drain.pk) == "waiting"
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINING and state_of(node) == NodeState.DRAINING
    text = selectors.drain_waiting_for(drain)
    assert text.startswith("in-flight work unknown: the node's agent reports no in-flight count")
    assert "waits for its deadline; deadline in 4m" in text

    later = timezone.now() + dt.timedelta(seconds=301)
    assert controllers.drain_advance(drain_id=drain.pk, now=later) == "alerted"
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINING and drain.alerted_at is not None
    assert "staying draining and alerting" in selectors.drain_waiting_for(drain, now=later)
    alert = AuditEvent.objects.get(action="drain.deadline_passed")
    assert "in-flight work unknown" in alert.reason


def test_it_forces_an_unknown_drain_at_the_deadline_and_says_the_count_was_unknown(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=60,
                                deadline_action=DeadlineAction.FORCE).obj
    fleet.report(node, in_flight=None)
    assert controllers.drain_advance(drain_id=drain.pk) == "waiting"
    assert controllers.drain_advance(drain_id=drain.pk, now=timezone.now() + dt.timedelta(seconds=61)) == "forced"
    drain.refresh_from_db()
    assert drain.forced and drain.in_flight_at_force is None and state_of(node) == NodeState.DRAINED
    assert selectors.drain_waiting_for(drain) == "forced drained with an unknown number in flight"
    forced = AuditEvent.objects.get(action="drain.forced")
    assert forced.reason == "deadline passed with an unknown number of requests in flight: forced"


def test_it_completes_once_the_count_is_known_and_zero(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=300).obj
    fleet.report(node, in_flight=None)
    assert controllers.drain_advance(drain_id=drain.pk) == "waiting"
    fleet.report(node, in_flight=0)  # the serving process answers again
    assert controllers.drain_advance(drain_id=drain.pk) == "drained"


def test_it_says_a_drain_without_deadline_needs_a_hand(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=None).obj
    fleet.report(node, in_flight=None)
    controllers.drains_advance()
    drain.refresh_from_db()
    assert "(none set: release it by hand)" in selectors.drain_waiting_for(drain)


def test_it_picks_nodes_with_an_unknown_count_last_for_scale_down(fleet):  # type: ignore[no-untyped-def]
    unknown, busy, idle = fleet.node("n-unknown"), fleet.node("n-busy"), fleet.node("n-idle")
    fleet.report(unknown, in_flight=None)
    fleet.report(busy, in_flight=7)
    fleet.report(idle, in_flight=0)
    picked = selectors.scale_down_candidates(tier=fleet.tier, count=3)
    assert [n.hostname for n in picked] == ["n-idle", "n-busy", "n-unknown"]
