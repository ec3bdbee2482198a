"""Reads of the agents app."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from apps.agents.choices import (
    COMMAND_EXPECTED_DEFAULT_S,
    COMMAND_EXPECTED_S,
    CommandKind,
    CommandState,
    EnrolmentState,
)
from apps.agents.models import BootstrapToken, Enrolment, NodeCommand
from apps.inventory.models import Node


def agent_self(*, node: Node) -> dict[str, Any]:
    """What a node agent needs to know about its own node: identity and modules in their slots."""
    modules = node.modules.select_related("module_type").order_by("slot")
    return {
        "node": {"id": node.pk, "hostname": node.hostname, "state": node.state, "tier": node.tier.kind},
        "modules": [
            {"serial": m.serial, "slot": m.slot, "module_type": str(m.module_type),
             "pcie_lanes": m.module_type.pcie_lanes, "state": m.state,
             "driver_version": m.driver_version, "framework_version": m.framework_version}
            for m in modules
        ],
    }


def enrolment_list(*, state: str = "") -> QuerySet[Enrolment]:
    """Enrolments, newest first, with what the enrolment page and the API show beside each."""
    qs = Enrolment.objects.select_related("tier", "rack", "node", "token").order_by("-created_at", "-id")
    return qs.filter(state=state) if state else qs


def enrolment_counts() -> dict[str, int]:
    """How many enrolments are in each state (every state named, zero included)."""
    counts = dict(Enrolment.objects.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    return {s: int(counts.get(s, 0)) for s in EnrolmentState.values}


def bootstrap_tokens_active() -> QuerySet[BootstrapToken]:
    """Tokens that still admit joins: not revoked, not expired, uses left."""
    return (BootstrapToken.objects.filter(revoked_at__isnull=True, expires_at__gt=timezone.now(), used__lt=F("uses"))
            .select_related("tier").prefetch_related("racks").order_by("expires_at"))


def commands_overdue(*, now: dt.datetime, factor: float) -> list[tuple[NodeCommand, float]]:
    """Commands an agent has (delivered, or acked in_progress) for longer than ``factor`` × the kind's
    expected duration, with that duration. Drains are judged by their own deadline."""
    out = []
    # Only those past the shortest expectation are read (at fleet scale most commands are younger).
    shortest = now - dt.timedelta(seconds=factor * min(COMMAND_EXPECTED_DEFAULT_S, *COMMAND_EXPECTED_S.values()))
    for c in (NodeCommand.objects.filter(state__in=(CommandState.DELIVERED, CommandState.IN_PROGRESS))
              .filter(Q(delivered_at__lt=shortest) | Q(delivered_at__isnull=True, created_at__lt=shortest))
              .exclude(kind=CommandKind.DRAIN).select_related("node").order_by("pk")):
        expected = COMMAND_EXPECTED_S.get(c.kind, COMMAND_EXPECTED_DEFAULT_S)
        since = c.delivered_at or c.created_at
        if (now - since).total_seconds() > factor * expected:
            out.append((c, expected))
    return out
