"""The actions the pages enable and the API lists for a node or a module (``allowed_actions``)
are exactly those the lifecycle accepts: each action is tried on a node (a module) brought to
each state through the lifecycle, and it changes something if and only if the state allows it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.common.errors import Conflict
from apps.inventory.choices import ModuleState, module_allowed_actions, node_allowed_actions
from apps.inventory.models import Module, Node
from apps.operations import lifecycle

from .conftest import Fleet
from .test_lifecycle_matrix import STARTS, _setup

pytestmark = pytest.mark.django_db


def _node_actions(node: Node) -> dict[str, Callable[[], Any]]:
    return {
        "cordon": lambda: lifecycle.node_cordon(node=node, reason="look", actor="op"),
        "drain": lambda: lifecycle.node_drain(node=node, reason="fix", actor="op"),
        "uncordon": lambda: lifecycle.node_uncordon(node=node, reason="back", actor="op"),
        "maintenance": lambda: lifecycle.node_maintenance_enter(node=node, reason="fw", actor="op"),
        "maintenance-leave": lambda: lifecycle.node_maintenance_leave(node=node, reason="done", actor="op"),
    }


def _accepted(action: Callable[[], Any]) -> bool:
    try:
        return bool(action().changed)
    except (Conflict, ValidationError):
        return False


def test_a_nodes_allowed_actions_are_those_the_lifecycle_accepts_in_each_state(fleet: Fleet) -> None:
    wrong = {}
    for start in STARTS:
        for name in _node_actions(Node(pk=0)):
            with transaction.atomic():
                node = _setup(fleet, start)
                listed = name in node_allowed_actions(node.state)
                if _accepted(_node_actions(node)[name]) != listed:
                    wrong[f"{name} on {start}"] = "listed, refused" if listed else "accepted, not listed"
                transaction.set_rollback(True)
    assert wrong == {}


def _module_actions(module: Module) -> dict[str, Callable[[], Any]]:
    return {
        "quarantine": lambda: lifecycle.module_quarantine(module=module, reason="look", actor="op"),
        "release": lambda: lifecycle.module_release(module=module, reason="back", actor="op"),
    }


def _module_in(fleet: Fleet, state: str) -> Module:
    node = fleet.node(f"m-{state}", state="standby", modules=1)
    module = Module.objects.get(node=node)
    if state == ModuleState.QUARANTINED:
        lifecycle.module_quarantine(module=module, reason="look", actor="op")
    elif state != ModuleState.HEALTHY:
        lifecycle.module_mark(module=module, state=state, reason="seen", actor="health")
    module.refresh_from_db()
    assert module.state == state
    return module


def test_a_modules_allowed_actions_are_those_the_lifecycle_accepts_in_each_state(fleet: Fleet) -> None:
    wrong = {}
    for state in ModuleState.values:
        for name in ("quarantine", "release"):
            with transaction.atomic():
                module = _module_in(fleet, state)
                listed = name in module_allowed_actions(state)
                if _accepted(_module_actions(module)[name]) != listed:
                    wrong[f"{name} on {state}"] = "listed, refused" if listed else "accepted, not listed"
                transaction.set_rollback(True)
    assert wrong == {}
