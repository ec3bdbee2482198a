"""Switching faults of the simulated fleet on and off (audited)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import audit_record, diff, snapshot
from apps.common.errors import CONFLICT
from apps.inventory import scopes
from apps.inventory.choices import CombinationState, NodeState, TierKind
from apps.inventory.models import ExternalEndpoint, Node, VersionCombination
from apps.simulator.choices import ENDPOINT_FAULTS, FAULT_DEFAULT_PARAMS, NODE_FAULTS, FaultKind
from apps.simulator.models import Fault


def _default_node(kind: str) -> Node:
    """A sensible target when none is named: the first active node the pattern fits."""
    nodes = Node.objects.filter(state=NodeState.ACTIVE).select_related("tier").order_by("hostname")
    if kind == FaultKind.PCIE_DEGRADED or kind == FaultKind.ECC_RISING:
        nodes = nodes.filter(modules__isnull=False).distinct()
    elif kind == FaultKind.RUNAWAY_PARSING or kind == FaultKind.NOISY_NEIGHBOUR:
        nodes = nodes.filter(tier__kind=TierKind.ACCESS_LOGIC)
    node = nodes.first() or Node.objects.filter(state=NodeState.ACTIVE).order_by("hostname").first()
    if node is None:
        raise ValidationError({"node": ValidationError("no active node to inject the fault into; name one",
                                                       code=CONFLICT)})
    return node


def _default_combination() -> VersionCombination | None:
    return (VersionCombination.objects.select_related("driver", "framework")
            .filter(state__in=[CombinationState.CANDIDATE, CombinationState.VALIDATING])
            .order_by("-created_at").first())


def _params(kind: str, params: dict[str, Any] | None, combination: VersionCombination | None) -> dict[str, Any]:
    if params is not None and not isinstance(params, dict):
        raise ValidationError({"params": "must be an object"})
    out: dict[str, Any] = {**FAULT_DEFAULT_PARAMS.get(kind, {}), **(params or {})}
    if kind == FaultKind.BAD_COMBINATION:
        if combination is not None:
            out.setdefault("driver", combination.driver.version)
            out.setdefault("framework", combination.framework.version)
            out.setdefault("module_type", f"{combination.module_type.vendor} {combination.module_type.model}")
        if not out.get("driver") or not out.get("framework"):
            raise ValidationError({"combination": "name a version combination, or give params driver and framework"})
        if not isinstance(out.get("operator"), str) or not out["operator"]:
            raise ValidationError({"params": "operator must name an INT8 operator, e.g. QLinearMatMul"})
    if kind in ENDPOINT_FAULTS:
        _endpoint_params(kind, out)
    return out


# The endpoint faults' numeric parameter and its range.
_ENDPOINT_RANGES: dict[str, tuple[str, float, float]] = {FaultKind.ENDPOINT_SLOW: ("latency_factor", 1.0, 100.0),
                    FaultKind.ENDPOINT_ERRORS: ("error_rate", 0.0, 1.0), FaultKind.ENDPOINT_QUOTA: ("use", 0.0, 2.0)}


def _endpoint_params(kind: str, out: dict[str, Any]) -> None:
    if not out.get("endpoint"):
        first = ExternalEndpoint.objects.filter(enabled=True).order_by("name").values_list("name", flat=True).first()
        if first is None:
            raise ValidationError({"params.endpoint": ValidationError(
                "no enabled external endpoint to strike; name one", code=CONFLICT)})
        out["endpoint"] = first
    elif not isinstance(out["endpoint"], str) or not ExternalEndpoint.objects.filter(name=out["endpoint"]).exists():
        raise ValidationError({"params.endpoint": f"no external endpoint {out['endpoint']!r}"})
    key, lo, hi = _ENDPOINT_RANGES[kind]
    value = out.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise ValidationError({f"params.{key}": f"a number from {lo:g} to {hi:g}"})


@transaction.atomic
def fault_set(*, kind: str, enabled: bool = True, node: Node | None = None,
              combination: VersionCombination | None = None, params: dict[str, Any] | None = None,
              actor: Any, source: str = Source.API, reason: str = "") -> Fault:
    """Switch a fault on (creating it, or re-arming it with a fresh clock) or off."""
    if kind not in FaultKind.values:
        raise ValidationError({"kind": f"unknown fault {kind!r}; one of {', '.join(FaultKind.values)}"})
    if kind in NODE_FAULTS:
        if combination is not None:
            raise ValidationError({"combination": f"{kind} strikes a node, not a combination"})
        if node is None:
            existing = Fault.objects.filter(kind=kind, enabled=True).select_related("node").first()
            node = existing.node if (existing is not None and not enabled) else None
            node = node or _default_node(kind)
    elif kind in ENDPOINT_FAULTS:
        if node is not None or combination is not None:
            raise ValidationError({"node" if node is not None else "combination":
                                   f"{kind} strikes an external endpoint (params endpoint), not a node or a "
                                   f"combination"})
    else:
        if node is not None:
            raise ValidationError({"node": f"{kind} strikes a version combination, not a node"})
        if combination is None and params is None:
            existing = Fault.objects.filter(kind=kind).select_related("combination").order_by("-updated_at").first()
            combination = existing.combination if existing is not None else _default_combination()
    if combination is not None:
        combination = VersionCombination.objects.select_related("driver", "framework", "module_type").get(
            pk=combination.pk)

    fault = (Fault.objects.select_for_update().order_by("pk")
             .filter(kind=kind, node=node, combination=combination).first())
    if fault is None:
        if not enabled:
            raise ValidationError({"kind": ValidationError(f"no {kind} fault on that target to switch off",
                                                           code=CONFLICT)})
        fault = Fault(kind=kind, node=node, combination=combination)
    return _apply(fault, enabled=enabled, params=params, actor=actor, source=source, reason=reason)


@transaction.atomic
def fault_switch(*, fault: Fault, enabled: bool, params: dict[str, Any] | None = None, actor: Any,
                 source: str = Source.API, reason: str = "") -> Fault:
    """Switch one existing fault on or off (and/or retune it)."""
    locked = (Fault.objects.select_for_update(of=("self",)).order_by("pk")
              .select_related("node", "combination__driver", "combination__framework", "combination__module_type")
              .get(pk=fault.pk))
    return _apply(locked, enabled=enabled, params=params, actor=actor, source=source, reason=reason)


def _apply(fault: Fault, *, enabled: bool, params: dict[str, Any] | None, actor: Any, source: str,
           reason: str) -> Fault:
    kind, combination = fault.kind, fault.combination
    scopes.require_subject(actor=actor, what=f"the {kind} fault (it strikes no one node)", node=fault.node)
    before = snapshot(fault) if fault.pk else None
    if enabled:
        fault.params = _params(kind, params if params is not None else (fault.params or None), combination)
        if not fault.enabled or fault.started_at is None:
            fault.started_at = timezone.now()
    elif params is not None:
        fault.params = _params(kind, params, combination)
    fault.enabled = enabled
    fault.save()
    after = snapshot(fault)
    changes = diff(before, after)
    if changes:
        audit_record(actor=actor, action=f"fault.{'enable' if enabled else 'disable'}", target=fault,
                     changes=changes, source=source, reason=reason)
    return fault


@transaction.atomic
def fault_disable_all(*, actor: Any, source: str = Source.API, reason: str = "") -> int:
    """Switch every fault off; returns how many were on."""
    count = 0
    for fault in Fault.objects.select_for_update().filter(enabled=True).order_by("pk"):
        before = snapshot(fault)
        fault.enabled = False
        fault.save(update_fields=["enabled", "updated_at"])
        audit_record(actor=actor, action="fault.disable", target=fault, changes=diff(before, snapshot(fault)),
                     source=source, reason=reason)
        count += 1
    return count
