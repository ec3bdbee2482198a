"""Every node state change goes through the lifecycle's public entry points, and only
along the transitions written out below (a literal matrix, not imported from the
code): each entry point is tried on a node in each state; a refused action leaves
the node as it was; every state change an action makes is an allowed pair, recorded
in the audit trail; and every allowed pair is made by some entry point."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.common.errors import Conflict
from apps.inventory.models import Node
from apps.operations import controllers, lifecycle
from apps.operations.choices import AfterDrain

from .conftest import Fleet

pytestmark = pytest.mark.django_db

ALLOWED: dict[str, set[str]] = {
    "standby": {"active", "maintenance", "retired", "unreachable", "failed"},
    "active": {"cordoned", "draining", "unreachable", "failed"},
    "cordoned": {"active", "draining", "unreachable", "failed"},
    "draining": {"drained", "active", "unreachable", "failed"},
    "drained": {"maintenance", "standby", "active", "retired", "unreachable", "failed"},
    "maintenance": {"active", "standby", "retired", "failed"},
    "unreachable": {"standby", "active", "cordoned", "draining", "drained", "maintenance", "failed", "retired"},
    "failed": {"maintenance", "retired"},
    "retired": set(),
}
_seq = itertools.count()


def _silence(node: Node) -> None:
    """No report for an hour: the heartbeat marks the node unreachable."""
    controllers.nodes_heartbeat(now=timezone.now() + dt.timedelta(hours=1))


def _resume(fleet: Fleet, node: Node) -> None:
    fleet.report(node, in_flight=0)
    controllers.nodes_heartbeat()


def _drain_done(fleet: Fleet, node: Node) -> dict[str, int]:
    fleet.report(node, in_flight=0, at=timezone.now() + dt.timedelta(seconds=1))
    return controllers.drains_advance()


def _setup(fleet: Fleet, start: str) -> Node:
    """A node brought to ``start`` through the entry points (``unreachable:<state>``: silent in that state)."""
    node = fleet.node(f"n-{next(_seq)}", state="standby", modules=1)
    state, _, before = start.partition(":")
    steps: dict[str, list[Callable[[], Any]]] = {
        "standby": [],
        "active": [lambda: lifecycle.node_activate(node=node.pk, actor="t", reason="serve")],
        "maintenance": [lambda: lifecycle.node_maintenance_enter(node=node, reason="fw", actor="t")],
        "failed": [lambda: lifecycle.node_mark_failed(node=node, reason="PSU", actor="health")],
        "retired": [lambda: lifecycle.node_retire(node=node, reason="end of life", actor="t")],
    }
    active = steps["active"]
    steps["cordoned"] = active + [lambda: lifecycle.node_cordon(node=node, reason="look", actor="t")]
    steps["draining"] = active + [lambda: lifecycle.node_drain(node=node, reason="fix", actor="t")]
    steps["drained"] = steps["draining"] + [lambda: _drain_done(fleet, node)]
    if state == "unreachable":
        steps["unreachable"] = steps[before] + [lambda: _silence(node)]
    for step in steps[state]:
        step()
    node.refresh_from_db()
    assert node.state == state, f"set-up of {start} ended in {node.state}"
    return node


def _actions(fleet: Fleet, node: Node) -> dict[str, Callable[[], Any]]:
    return {
        "activate": lambda: lifecycle.node_activate(node=node.pk, actor="op", reason="scale up"),
        "cordon": lambda: lifecycle.node_cordon(node=node, reason="look", actor="op"),
        "drain": lambda: lifecycle.node_drain(node=node, reason="fix", actor="op"),
        "drain then done": lambda: (lifecycle.node_drain(node=node, reason="fix", actor="op"),
                                    _drain_done(fleet, node)),
        "scale-down drain then done": lambda: (
            lifecycle.node_drain(node=node, reason="night", actor="op", after=AfterDrain.STANDBY),
            _drain_done(fleet, node)),
        "uncordon": lambda: lifecycle.node_uncordon(node=node, reason="back", actor="op"),
        "maintenance enter": lambda: lifecycle.node_maintenance_enter(node=node, reason="fw", actor="op"),
        "maintenance leave": lambda: lifecycle.node_maintenance_leave(node=node, reason="done", actor="op"),
        "retire": lambda: lifecycle.node_retire(node=node, reason="end of life", actor="op"),
        "mark failed": lambda: lifecycle.node_mark_failed(node=node, reason="PSU", actor="health"),
        "heartbeat: silent": lambda: _silence(node),
        "heartbeat: reports again": lambda: _resume(fleet, node),
    }


STARTS = ["standby", "active", "cordoned", "draining", "drained", "maintenance", "failed", "retired",
          "unreachable:standby", "unreachable:active", "unreachable:cordoned", "unreachable:draining",
          "unreachable:drained"]


def test_it_moves_nodes_only_along_the_allowed_transitions_and_makes_every_one(fleet: Fleet) -> None:
    seen: set[tuple[str, str]] = set()
    for start in STARTS:
        for name in _actions(fleet, Node(pk=0)):
            with transaction.atomic():
                node = _setup(fleet, start)
                before = node.state
                mark = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
                try:
                    _actions(fleet, node)[name]()
                except (Conflict, ValidationError):
                    node.refresh_from_db()
                    assert node.state == before, f"{name} on {start}: refused but moved to {node.state}"
                    assert not AuditEvent.objects.filter(pk__gt=mark, changes__has_key="state").exists()
                else:
                    pairs = [tuple(e.changes["state"]) for e in AuditEvent.objects.filter(
                        pk__gt=mark, target_type="node", target_id=str(node.pk), changes__has_key="state"
                    ).order_by("pk")]
                    for old, new in pairs:
                        assert new in ALLOWED[old], f"{name} on {start}: {old} -> {new} is not allowed"
                        seen.add((old, new))
                    node.refresh_from_db()
                    assert node.state == (pairs[-1][1] if pairs else before)
                    if pairs:
                        assert pairs[0][0] == before, f"{name} on {start}: the trail starts at {pairs[0][0]}"
                transaction.set_rollback(True)
    missing = {(a, b) for a, targets in ALLOWED.items() for b in targets} - seen
    assert not missing, f"no entry point makes {sorted(missing)}"


def test_it_refuses_the_same_state_change_twice_at_once_without_a_second_record(fleet: Fleet) -> None:
    node = _setup(fleet, "active")
    first = lifecycle.node_cordon(node=node, reason="look", actor="op")
    again = lifecycle.node_cordon(node=node, reason="look", actor="op")
    assert first.changed and not again.changed and first.obj.pk == again.obj.pk
    assert AuditEvent.objects.filter(action="node.cordon", target_id=str(node.pk)).count() == 1
