"""Drains that know what holds a module: a node whose agent lists the processes holding its modules
(``--holders-from``, contract 4) is not drained while its newest list since the drain started names
one, even at zero in flight; the drain says which; a forced drain's audit names them. A node whose
agent does not look drains on the in-flight count as before."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.operations import controllers, lifecycle, selectors
from apps.operations.choices import DeadlineAction, DrainState
from apps.telemetry.models import NodeHolders

from .conftest import Fleet, state_of

pytestmark = pytest.mark.django_db


def test_a_drain_at_zero_in_flight_waits_for_the_process_still_holding_a_module(fleet: Fleet) -> None:
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="swap DIMM", actor="alice", deadline_s=300).obj
    vllm = {"pid": 4242, "name": "vllm", "module": "n-1-m0"}
    fleet.report_holders(node, 0, [vllm])
    assert controllers.drain_advance(drain_id=drain.pk) == "waiting"
    drain.refresh_from_db()
    assert drain.state == DrainState.DRAINING and state_of(node) == NodeState.DRAINING
    text = selectors.drain_waiting_for(drain)
    assert "zero in flight; waiting for 1 process(es) holding its modules: pid 4242 vllm on n-1-m0" in text
    assert NodeHolders.objects.get(node=node).holders == [vllm]

    fleet.report_holders(node, 0, [])  # the process let go
    assert controllers.drain_advance(drain_id=drain.pk) == "drained"
    assert AuditEvent.objects.get(action="drain.completed").reason == "node reports zero in flight"


def test_a_list_older_than_the_drain_is_not_taken_for_empty(fleet: Fleet) -> None:
    node = fleet.node("n-1")
    fleet.report_holders(node, 0, [], at=timezone.now() - dt.timedelta(seconds=30))
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=300).obj
    # A report newer than the drain's start whose agent sent no list this time (its read failed): the
    # older empty list does not end the drain.
    fleet.report_holders(node, 0, None)
    assert controllers.drain_advance(drain_id=drain.pk) == "waiting"
    assert "waiting for the agent's list of what holds the modules" in selectors.drain_waiting_for(drain)
    fleet.report_holders(node, 0, [])
    assert controllers.drain_advance(drain_id=drain.pk) == "drained"


def test_a_forced_drain_names_the_processes_it_cut_off(fleet: Fleet) -> None:
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=60,
                                deadline_action=DeadlineAction.FORCE).obj
    fleet.report_holders(node, 0, [{"pid": 17, "name": "python", "module": "n-1-m1"}])
    assert controllers.drain_advance(drain_id=drain.pk) == "waiting"
    assert controllers.drain_advance(drain_id=drain.pk, now=timezone.now() + dt.timedelta(seconds=61)) == "forced"
    forced = AuditEvent.objects.get(action="drain.forced")
    assert forced.reason == ("deadline passed with 0 requests in flight and 1 process(es) holding its modules "
                             "(pid 17 python on n-1-m1): forced")


def test_a_node_whose_agent_does_not_look_drains_on_the_in_flight_count(fleet: Fleet) -> None:
    node = fleet.node("n-1")
    drain = lifecycle.node_drain(node=node, reason="r", actor="alice", deadline_s=300).obj
    fleet.report(node, in_flight=0)
    assert controllers.drain_advance(drain_id=drain.pk) == "drained"


def test_the_node_page_lists_the_holders(fleet: Fleet, client: Any, viewer_user: Any) -> None:
    node = fleet.node("n-1")
    fleet.report_holders(node, 3, [{"pid": 4242, "name": "vllm", "module": "n-1-m0"}])
    client.force_login(viewer_user)
    html = client.get(f"/nodes/{node.pk}/").content.decode()
    assert 'id="node-holders"' in html and "4242" in html and "vllm" in html
