"""Drains finish only when the node reports zero in flight; deadlines do what they say."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.agents.models import NodeCommand
from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.operations import controllers, lifecycle, selectors
from apps.operations.choices import AfterDrain, DeadlineAction, DrainState
from apps.operations.models import Drain

from .conftest import state_of

pytestmark = pytest.mark.django_db


def test_it_completes_a_drain_only_after_in_flight_reaches_zero(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="swap DIMM", actor="alice", deadline_s=300).obj
    assert state_of(node) == NodeState.DRAINING
    assert NodeCommand.objects.filter(node=node, kind="drain").count() == 1

    controllers.drains_advance()
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINING
    assert selectors.drain_waiting_for(drain).startswith("waiting for a report from the node")

    fleet.report(node, in_flight=3)
    controllers.drains_advance()
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINING and state_of(node) == NodeState.DRAINING
    text = selectors.drain_waiting_for(drain)
    assert text.startswith("waiting for 3 in-flight requests; deadline in 4m")

    fleet.report(node, in_flight=0)
    controllers.drains_advance()
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINED and not drain.forced
    assert state_of(node) == NodeState.DRAINED
    assert AuditEvent.objects.filter(action="drain.completed", target_id=str(node.pk)).count() == 1


def test_it_does_not_trust_a_zero_reported_before_the_drain(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    fleet.report(node, in_flight=0, at=timezone.now() - dt.timedelta(seconds=5))
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice").obj
    controllers.drains_advance()
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINING
    assert "newer than the drain's start" in selectors.drain_waiting_for(drain)


def test_it_stays_draining_and_alerts_at_the_deadline(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=60,
                                deadline_action=DeadlineAction.ALERT).obj
    fleet.report(node, in_flight=2)
    later = timezone.now() + dt.timedelta(seconds=120)
    controllers.drains_advance(now=later)
    controllers.drains_advance(now=later)
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINING and drain.alerted_at is not None
    assert state_of(node) == NodeState.DRAINING
    assert AuditEvent.objects.filter(action="drain.deadline_passed").count() == 1
    assert "deadline passed" in selectors.drain_waiting_for(drain, now=later)
    assert "staying draining and alerting" in selectors.drain_waiting_for(drain, now=later)


def test_it_forces_at_the_deadline_when_told_to(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=60,
                                deadline_action=DeadlineAction.FORCE).obj
    fleet.report(node, in_flight=2)
    controllers.drains_advance()
    assert state_of(node) == NodeState.DRAINING
    controllers.drains_advance(now=timezone.now() + dt.timedelta(seconds=61))
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINED and drain.forced and drain.in_flight_at_force == 2
    assert state_of(node) == NodeState.DRAINED
    assert AuditEvent.objects.filter(action="drain.forced").count() == 1


def test_it_uncordons_at_resume_after(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    resume = timezone.now() + dt.timedelta(minutes=10)
    lifecycle.node_cordon(node=node, reason="noisy neighbour", actor="alice", resume_after=resume)
    controllers.drains_advance()
    assert state_of(node) == NodeState.CORDONED
    controllers.drains_advance(now=resume + dt.timedelta(seconds=1))
    assert state_of(node) == NodeState.ACTIVE
    assert not Drain.objects.exclude(state=DrainState.RELEASED).exists()


def test_it_drains_into_maintenance_and_back(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    drain = lifecycle.node_maintenance_enter(node=node, reason="firmware", actor="alice").obj
    assert drain.after == AfterDrain.MAINTENANCE
    fleet.report(node, in_flight=0)
    controllers.drains_advance()
    assert state_of(node) == NodeState.MAINTENANCE
    lifecycle.node_maintenance_leave(node=node, reason="done", actor="alice")
    assert state_of(node) == NodeState.ACTIVE
    assert NodeCommand.objects.filter(node=node).order_by("id").values_list("kind", flat=True)[::1] == [
        "drain", "maintenance", "uncordon"]


def test_it_turns_the_owners_cordon_into_a_drain(fleet):  # type: ignore[no-untyped-def]
    node = fleet.node("n-1")
    cordon = lifecycle.node_cordon(node=node, reason="look at it", actor="alice").obj
    drain = lifecycle.node_drain(node=node, reason="now drain it", actor="alice").obj
    assert drain.pk == cordon.pk and drain.state == DrainState.DRAINING
    assert Drain.objects.count() == 1
