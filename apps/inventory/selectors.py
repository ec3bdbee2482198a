"""Reads of the inventory that are more than a filter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db.models import Case, Count, F, OuterRef, Prefetch, Q, QuerySet, Subquery, TextField, Value, When
from django.db.models.functions import Coalesce

from apps.inventory.choices import (
    CombinationState,
    ModuleState,
    NodeState,
    module_allowed_actions,
    node_allowed_actions,
)
from apps.inventory.models import ExternalEndpoint, Module, ModuleType, Node, Rack, Tier, VersionCombination


def _allowed_actions(states: list[str], allowed: Callable[[str], list[str]]) -> Case:
    """Each row's ``allowed_actions`` (choices.py's rule) computed from its state in SQL, so the
    API's lists, read with values(), carry them like any column."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for state in states:
        groups.setdefault(tuple(allowed(state)), []).append(state)
    field = ArrayField(TextField())
    return Case(*[When(state__in=group, then=Value(list(actions), output_field=field))
                  for actions, group in groups.items() if actions],
                default=Value([], output_field=field), output_field=field)


def node_list() -> QuerySet[Node]:
    # A correlated subquery, not Count("modules"): a JOIN + GROUP BY aggregates every node before
    # LIMIT (and makes count() a subquery over it); this is computed for the page's rows only.
    modules = Module.objects.filter(node=OuterRef("pk")).order_by().values("node").annotate(n=Count("pk"))
    return Node.objects.select_related("rack", "tier").annotate(
        module_count=Coalesce(Subquery(modules.values("n")), 0),
        allowed_actions=_allowed_actions(NodeState.values, node_allowed_actions),
    )


def node_detail(*, pk: int) -> Node:
    return (
        Node.objects.select_related("rack", "tier")
        .prefetch_related(Prefetch("modules", queryset=module_list()))
        .get(pk=pk)
    )


def _pinned(field: str) -> Subquery:
    return Subquery(
        VersionCombination.objects.filter(module_type=OuterRef("module_type"), state=CombinationState.PINNED)
        .order_by().values(field)[:1]  # at most one pin per type (a constraint): no sort, no join for it
    )


def module_list() -> QuerySet[Module]:
    """Modules with their type and node, annotated with their type's pinned versions."""
    return Module.objects.select_related("module_type", "node").annotate(
        pinned_driver=_pinned("driver__version"),
        pinned_framework=_pinned("framework__version"),
        allowed_actions=_allowed_actions(ModuleState.values, module_allowed_actions),
    )


def version_drift() -> QuerySet[Module]:
    """Modules whose driver or framework differs from their type's pinned combination."""
    return module_list().filter(
        Q(pinned_driver__isnull=False)
        & (~Q(driver_version=F("pinned_driver")) | ~Q(framework_version=F("pinned_framework")))
    )


def drift_back_to_pin() -> list[dict[str, Any]]:
    """Per module type with drifted modules in nodes: its pinned combination, the nodes holding them
    (ids, hostnames) and how many modules; what a rollout of the pin to those nodes would put right."""
    by_type: dict[int, dict[int, str]] = {}
    counts: dict[int, int] = {}
    for type_id, node_id, hostname in version_drift().filter(node__isnull=False).values_list(
            "module_type_id", "node_id", "node__hostname"):
        by_type.setdefault(type_id, {})[node_id] = hostname
        counts[type_id] = counts.get(type_id, 0) + 1
    pins = {c.module_type_id: c for c in combination_list().filter(
        module_type_id__in=by_type, state=CombinationState.PINNED)}
    return [{"combination": pins[t], "module_type": pins[t].module_type, "modules": counts[t],
             "node_ids": sorted(nodes), "hostnames": sorted(nodes.values())}
            for t, nodes in sorted(by_type.items()) if t in pins]


def combination_list() -> QuerySet[VersionCombination]:
    return VersionCombination.objects.select_related("module_type", "driver", "framework")


def node_states() -> dict[int, tuple[str, int, str]]:
    """{node id: (state, tier id, hostname)} of every node."""
    return {pk: (state, tier_id, host)
            for pk, state, tier_id, host in Node.objects.values_list("pk", "state", "tier_id", "hostname")}


# --- Pages (fleet overview, node detail, combinations) ---------------------------------------------------


def nodes_with_warnings() -> QuerySet[Node]:
    """Nodes carrying at least one soft admission finding."""
    return node_list().exclude(warnings=[]).order_by("hostname")


def tier_overview() -> list[dict[str, Any]]:
    """Per tier, in level order: node counts by state, module and warning counts.

    Five queries whatever the fleet size.
    """
    tiers = list(Tier.objects.all())
    states: dict[int, dict[str, int]] = {}
    for row in Node.objects.order_by().values("tier_id", "state").annotate(n=Count("id")):
        states.setdefault(row["tier_id"], {})[row["state"]] = row["n"]
    modules = dict(
        Module.objects.filter(node__isnull=False).order_by().values_list("node__tier_id").annotate(n=Count("id"))
    )
    warned = dict(Node.objects.exclude(warnings=[]).order_by().values_list("tier_id").annotate(n=Count("id")))
    endpoints: dict[int, list[ExternalEndpoint]] = {}
    for endpoint in ExternalEndpoint.objects.filter(enabled=True):
        endpoints.setdefault(endpoint.tier_id, []).append(endpoint)
    out = []
    for tier in tiers:
        counts = states.get(tier.pk, {})
        out.append({
            "tier": tier,
            "nodes": sum(counts.values()),
            "active": counts.get(NodeState.ACTIVE, 0),
            "states": [
                {"value": s.value, "label": s.label, "colour": s.colour, "count": counts[s.value]}
                for s in NodeState if counts.get(s.value)
            ],
            "modules": modules.get(tier.pk, 0),
            "warnings": warned.get(tier.pk, 0),
            "endpoints": endpoints.get(tier.pk, []),
        })
    return out


def module_drifted(module: Module) -> bool:
    """True when a module from ``module_list()`` runs other versions than its type's pin."""
    pinned_driver = getattr(module, "pinned_driver", None)
    if pinned_driver is None:
        return False
    return bool(module.driver_version != pinned_driver
                or module.framework_version != getattr(module, "pinned_framework", None))


def combination_overview() -> list[dict[str, Any]]:
    """Per module type: its combinations (pinned first, then newest), the pin, and how many
    modules run each combination's driver + framework."""
    running: dict[tuple[int, str, str], int] = {
        (row["module_type_id"], row["driver_version"], row["framework_version"]): row["n"]
        for row in Module.objects.order_by().values("module_type_id", "driver_version", "framework_version")
        .annotate(n=Count("id"))
    }
    totals: dict[int, int] = {}
    for (type_id, _, _), n in running.items():
        totals[type_id] = totals.get(type_id, 0) + n
    by_type: dict[int, list[VersionCombination]] = {}
    for combo in combination_list().order_by("module_type_id", "-created_at"):
        combo.module_count = running.get(  # type: ignore[attr-defined]
            (combo.module_type_id, combo.driver.version, combo.framework.version), 0)
        by_type.setdefault(combo.module_type_id, []).append(combo)
    out = []
    for mtype in ModuleType.objects.all():
        combos = by_type.get(mtype.pk, [])
        combos.sort(key=lambda c: c.state != CombinationState.PINNED)
        pinned = next((c for c in combos if c.state == CombinationState.PINNED), None)
        on_pin = pinned.module_count if pinned is not None else 0  # type: ignore[attr-defined]
        out.append({
            "module_type": mtype,
            "combinations": combos,
            "pinned": pinned,
            "candidates": [c for c in combos if c.state in (CombinationState.CANDIDATE, CombinationState.VALIDATING)],
            "modules": totals.get(mtype.pk, 0),
            "off_pin": totals.get(mtype.pk, 0) - on_pin if pinned is not None else 0,
        })
    return out


def node_filter_choices() -> dict[str, list[Any]]:
    """The menus of the node list's filter form."""
    return {
        "tiers": list(Tier.objects.all()),
        "racks": list(Rack.objects.all()),
        "module_types": list(ModuleType.objects.all()),
    }


def endpoint_list(*, tier_id: int) -> QuerySet[ExternalEndpoint]:
    """The enabled external endpoints of a tier (tier 3's GPU clusters and cloud APIs), by name."""
    return ExternalEndpoint.objects.filter(tier_id=tier_id, enabled=True).order_by("name")
