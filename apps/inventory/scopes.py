"""Scopes against the inventory: whether a node, a module or a tier lies within where a user may act.

A scope (``apps.accounts``: the whole fleet, tiers by kind, racks by name) is declared below the
inventory, so the check of an object against it lives here. Reading stays fleet-wide: only actions
call these. System actors (the autoscaler, health, rollouts' controller: names, not users) have no
scope; their work was allowed when a user started it. The pages ask the same functions which actions
to offer (``may_act_on_node``, ``may_act_on_subject``, ``tier_refusal``, ``nodes_refusal``), so a page
offers what the API would take and names the same reason where it does not."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.exceptions import PermissionDenied

from apps.accounts.choices import ScopeKind
from apps.accounts.selectors import scope_of, scope_text
from apps.inventory.models import Module, Node, Tier


class OutOfScope(PermissionDenied):
    """403 naming the user's scope and what lies outside it (``scope``, ``outside`` beside ``detail``)."""

    def __init__(self, detail: str, *, scope: dict[str, Any], outside: list[str]) -> None:
        super().__init__(detail)
        self.extra = {"scope": scope, "outside": outside}


def _scope(actor: Any) -> dict[str, Any] | None:
    """The actor's scope; None when it may act on the whole fleet (or is no user)."""
    if not getattr(actor, "is_authenticated", False):
        return None
    scope = scope_of(user=actor)
    return None if scope["kind"] == ScopeKind.FLEET else scope


def node_within(scope: dict[str, Any], *, tier_kind: str, rack_name: str) -> bool:
    if scope["kind"] == ScopeKind.TIERS:
        return tier_kind in scope["values"]
    if scope["kind"] == ScopeKind.RACKS:
        return rack_name in scope["values"]
    return True


def tier_within(scope: dict[str, Any] | None, *, tier_kind: str) -> bool:
    """A whole tier is within the whole fleet (None) and a scope of that tier; a rack scope holds no whole tier."""
    return scope is None or (scope["kind"] == ScopeKind.TIERS and tier_kind in scope["values"])


def may_act_on_node(*, actor: Any, node: Node | None) -> bool:
    """Whether the actor may act on ``node`` and its modules; on a module seated in no node (None) only
    within the whole fleet. The pages ask this to offer an action the API would take."""
    scope = _scope(actor)
    if scope is None:
        return True
    return node is not None and node_within(scope, tier_kind=node.tier.kind, rack_name=node.rack.name)


def tier_refusal(*, actor: Any, tier_kind: str) -> str | None:
    """Why the actor may not act on the whole tier ``tier_kind`` (the 403's detail), or None when it may."""
    scope = _scope(actor)
    if tier_within(scope, tier_kind=tier_kind):
        return None
    return f"tier {tier_kind} outside your scope ({scope_text(scope_of(user=actor))})"


def nodes_outside(*, actor: Any, nodes: Iterable[Node]) -> list[Node]:
    """The nodes of ``nodes`` that lie outside the actor's scope."""
    return [n for n in nodes if not may_act_on_node(actor=actor, node=n)]


def nodes_refusal(*, actor: Any, nodes: Iterable[Node]) -> str | None:
    """Why the actor may not act on ``nodes`` (the 403's detail, naming those outside its scope), or None."""
    outside = [n.hostname for n in nodes_outside(actor=actor, nodes=nodes)]
    if not outside:
        return None
    what = "node" if len(outside) == 1 else "nodes"
    return f"{what} {', '.join(outside)} outside your scope ({scope_text(scope_of(user=actor))})"


def require_nodes(*, actor: Any, nodes: Iterable[Node]) -> None:
    """Refuse (403) when any of ``nodes`` lies outside the actor's scope, naming them and the scope."""
    nodes = list(nodes)
    detail = nodes_refusal(actor=actor, nodes=nodes)
    if detail is not None:
        raise OutOfScope(detail, scope=scope_of(user=actor),
                         outside=[n.hostname for n in nodes_outside(actor=actor, nodes=nodes)])


def require_tier(*, actor: Any, tier: Tier) -> None:
    """Refuse (403) an action on the whole tier unless the actor's scope holds it (``tier_refusal``)."""
    detail = tier_refusal(actor=actor, tier_kind=tier.kind)
    if detail is not None:
        raise OutOfScope(detail, scope=scope_of(user=actor), outside=[tier.kind])


def require_fleet(*, actor: Any, what: str) -> None:
    """Refuse (403) ``what`` (work on the whole fleet) unless the actor's scope is the whole fleet."""
    scope = _scope(actor)
    if scope is not None:
        raise OutOfScope(f"{what} is outside your scope ({scope_text(scope)})", scope=scope, outside=[])


def require_module(*, actor: Any, module: Module) -> None:
    """A module is within the scope of its node; a module seated in no node only within the fleet's."""
    if module.node_id is None:
        scope = _scope(actor)
        if scope is not None:
            raise OutOfScope(f"module {module.serial} is in no node, outside your scope ({scope_text(scope)})",
                             scope=scope, outside=[module.serial])
        return
    node = Node.objects.select_related("tier", "rack").get(pk=module.node_id)
    require_nodes(actor=actor, nodes=[node])


def may_act_on_subject(*, actor: Any, node: Node | None = None, module: Module | None = None,
                       tier: Tier | None = None) -> bool:
    """Whether the actor may act about a module (within its node's scope), a node, a whole tier, or (none
    of them) the whole fleet: the rule ``require_subject`` enforces, for the pages to ask too."""
    scope = _scope(actor)
    if scope is None:
        return True
    if module is not None:
        return module.node_id is not None and may_act_on_node(actor=actor, node=module.node)
    if node is not None:
        return may_act_on_node(actor=actor, node=node)
    if tier is not None:
        return tier_within(scope, tier_kind=tier.kind)
    return False


def require_subject(*, actor: Any, what: str, node: Node | None = None, module: Module | None = None,
                    tier: Tier | None = None) -> None:
    """An action about a module, a node, a tier, or (none of them) the whole fleet: refused (403) outside
    the actor's scope (``may_act_on_subject``), naming what lies outside it."""
    if may_act_on_subject(actor=actor, node=node, module=module, tier=tier):
        return
    if module is not None:
        require_module(actor=actor, module=module)
    elif node is not None:
        require_nodes(actor=actor, nodes=nodes_for_check([node.pk]))
    elif tier is not None:
        require_tier(actor=actor, tier=tier)
    else:
        require_fleet(actor=actor, what=what)


def nodes_for_check(ids: Iterable[int]) -> list[Node]:
    """The nodes of ``ids`` with what a scope names of them (tier, rack)."""
    return list(Node.objects.select_related("tier", "rack").filter(pk__in=list(ids)).order_by("hostname"))
