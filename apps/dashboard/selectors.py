"""Reads for the live dashboard, all through the other apps' selectors (the
dashboard has no tables and reads none of theirs). The 1 Hz frame is the fleet
snapshot of apps.telemetry.selectors (the same function behind the REST
snapshot), with node rows, plus each tier's autoscaler policy and the newest
ingest batches."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Case, F, OrderBy, QuerySet, Value, When
from django.utils import timezone

import apps.telemetry.selectors.snapshot as telemetry
from apps.inventory.choices import NodeState, module_allowed_actions, node_allowed_actions
from apps.inventory.models import Module, Node
from apps.operations import selectors as operations
from apps.telemetry.selectors.common import iso


def live_snapshot(*, now: dt.datetime | None = None) -> dict[str, Any]:
    """The small fleet snapshot pushed about once a second, JSON-safe (ISO times): the fleet snapshot
    with a row per node (for the rack heat map), each tier's autoscaler policy, and the newest ingest
    batches, so a client (or bench/live.py) can tell which telemetry a frame reflects."""
    now = now or timezone.now()
    snapshot = telemetry.fleet_snapshot(now=now, window_minutes=None, nodes=True)
    policies = operations.policy_briefs()
    for tier in snapshot["tiers"]:
        tier["autoscaler"] = policies.get(tier["id"])
    snapshot["ingest"] = telemetry.ingest_recent(now=now)
    return snapshot


# The node list's columns it sorts by (``?sort=key``, ``-key`` descending): what each orders by.
# A figure not known (no report) sorts last either way; the hostname breaks ties.
_STATE_ORDER = Case(*[When(state=s, then=Value(i)) for i, s in enumerate(NodeState.values)])
NODE_SORTS: dict[str, list[Any]] = {
    "hostname": [F("hostname")],
    "tier": [F("tier__level")],
    "rack": [F("rack__name"), F("slot")],
    "state": [_STATE_ORDER],
    "modules": [F("module_count")],
    "cpu": [F("cpu")],
    "module_util": [F("module_util")],
    "in_flight": [F("in_flight")],
}
NODE_SORT_DEFAULT = "hostname"


class UnknownSort(ValueError):
    """A ``?sort=`` the node list does not know: reported, never ignored."""


def node_sort_check(sort: str) -> str:
    """``sort`` as given when the node list knows it (``key`` or ``-key``); UnknownSort otherwise."""
    if sort.removeprefix("-") not in NODE_SORTS:
        known = ", ".join(NODE_SORTS)
        raise UnknownSort(f'unknown sort "{sort}": sort by one of {known}, with "-" before it for descending')
    return sort


def node_list(*, nodes: QuerySet[Node], sort: str = NODE_SORT_DEFAULT) -> QuerySet[Node]:
    """The node list's rows: ``nodes`` (the inventory's node list, filtered) with the figures of
    their newest report (cpu, module_util, in_flight), in the order ``sort`` names."""
    descending = node_sort_check(sort).startswith("-")
    order: list[OrderBy] = [
        OrderBy(expr, descending=descending, nulls_last=True) for expr in NODE_SORTS[sort.removeprefix("-")]]
    return telemetry.nodes_with_load(nodes).order_by(*order, "hostname")


def node_live(*, node: Node, now: dt.datetime | None = None) -> dict[str, Any]:
    """The live parts of the node page: state, the actions it allows, the active hold and what it
    waits for, each module's state, actions, versions and newest telemetry."""
    now = now or timezone.now()
    node.refresh_from_db(fields=["state", "state_changed_at"])
    hold = operations.node_active_hold(node=node)
    latest = telemetry.node_latest(node=node, now=now)
    modules = [{"id": m.pk, "serial": m.serial, "slot": m.slot, "state": m.state, "driver": m.driver_version,
                "framework": m.framework_version, "firmware": m.firmware_version,
                "allowed_actions": module_allowed_actions(m.state), "latest": latest["modules"].get(m.pk)}
               for m in Module.objects.filter(node=node).order_by("slot")]
    return {
        "id": node.pk, "hostname": node.hostname, "state": node.state,
        "allowed_actions": node_allowed_actions(node.state),
        "state_changed_at": iso(node.state_changed_at),
        "hold": None if hold is None else {
            "id": hold.pk, "kind": hold.kind, "owner": hold.owner, "state": hold.state, "reason": hold.reason,
            "by": hold.created_by_name, "started_at": iso(hold.started_at),
            "waiting_for": operations.drain_waiting_for(hold, now=now)},
        "latest": latest["node"],
        "modules": modules,
    }
