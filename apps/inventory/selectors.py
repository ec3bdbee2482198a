"""Reads of the inventory that are more than a filter."""

from __future__ import annotations

from django.db.models import Count, F, OuterRef, Prefetch, Q, QuerySet, Subquery

from apps.inventory.choices import CombinationState
from apps.inventory.models import Module, Node, VersionCombination


def node_list() -> QuerySet[Node]:
    return Node.objects.select_related("rack", "tier").annotate(module_count=Count("modules"))


def node_detail(*, pk: int) -> Node:
    return (
        Node.objects.select_related("rack", "tier")
        .prefetch_related(Prefetch("modules", queryset=module_list()))
        .get(pk=pk)
    )


def _pinned(field: str) -> Subquery:
    return Subquery(
        VersionCombination.objects.filter(module_type=OuterRef("module_type"), state=CombinationState.PINNED)
        .values(field)[:1]
    )


def module_list() -> QuerySet[Module]:
    """Modules with their type and node, annotated with their type's pinned versions."""
    return Module.objects.select_related("module_type", "node").annotate(
        pinned_driver=_pinned("driver__version"),
        pinned_framework=_pinned("framework__version"),
    )


def version_drift() -> QuerySet[Module]:
    """Modules whose driver or framework differs from their type's pinned combination."""
    return module_list().filter(
        Q(pinned_driver__isnull=False)
        & (~Q(driver_version=F("pinned_driver")) | ~Q(framework_version=F("pinned_framework")))
    )


def combination_list() -> QuerySet[VersionCombination]:
    return VersionCombination.objects.select_related("module_type", "driver", "framework")


def fleet_counts() -> dict[str, dict[str, int]]:
    """Node counts per tier and state: {tier name: {state: n}}."""
    out: dict[str, dict[str, int]] = {}
    for row in Node.objects.values("tier__name", "state").annotate(n=Count("id")):
        out.setdefault(row["tier__name"], {})[row["state"]] = row["n"]
    return out
