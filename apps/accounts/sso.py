"""Single sign-on (OpenID Connect): what the identity provider's groups grant.

``OIDC_GROUP_MAP`` maps groups to a role and an optional scope, e.g.
``team-hybrid=operator:tiers:hybrid_inference,fleet-admins=admin,rack-crew=operator:racks:r01+r02``.
A user in several mapped groups gets the highest role and the union of the scopes (the whole fleet if
any group gives it); groups that would give tiers and racks at once are refused (say which in one
group). Pure functions, no Django: the views and the login service call them."""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.accounts.choices import ScopeKind
from apps.common.roles import ROLES

_RANK = {r: i for i, r in enumerate(ROLES)}
_KINDS = {"tier": ScopeKind.TIERS, "tiers": ScopeKind.TIERS, "rack": ScopeKind.RACKS, "racks": ScopeKind.RACKS}


@dataclass(frozen=True)
class Grant:
    role: str
    scope_kind: str = ScopeKind.FLEET
    scope_values: tuple[str, ...] = ()


@dataclass
class Resolved:
    """What a login's groups grant: a role and scope, or why nothing."""

    role: str | None
    scope_kind: str = ScopeKind.FLEET
    scope_values: list[str] = field(default_factory=list)
    refusal: str = ""


def parse_group_map(text: str) -> dict[str, Grant]:
    """``group=role[:tiers|racks:value+value]`` items, comma-separated. Raises ValueError naming the bad item."""
    out: dict[str, Grant] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        group, sep, grant = item.partition("=")
        parts = grant.split(":")
        if not sep or not group.strip() or parts[0] not in ROLES:
            raise ValueError(f"OIDC_GROUP_MAP item {item!r}: expected group=role[:tiers|racks:name+name], "
                             f"role one of {', '.join(ROLES)}")
        if len(parts) == 1:
            out[group.strip()] = Grant(parts[0])
        elif len(parts) == 3 and parts[1] in _KINDS and parts[2]:
            values = tuple(v.strip() for v in parts[2].split("+") if v.strip())
            out[group.strip()] = Grant(parts[0], _KINDS[parts[1]], values)
        else:
            raise ValueError(f"OIDC_GROUP_MAP item {item!r}: the scope is tiers:<kind>[+<kind>] "
                             "or racks:<name>[+<name>]")
    return out


def resolve(groups: list[str], group_map: dict[str, Grant]) -> Resolved:
    grants = [group_map[g] for g in groups if g in group_map]
    if not grants:
        shown = ", ".join(sorted(groups)[:10]) or "none"
        return Resolved(None, refusal=f"none of your groups ({shown}) is mapped to a role on this control plane; "
                                      "ask an admin to map one (OIDC_GROUP_MAP)")
    role = max((g.role for g in grants), key=_RANK.__getitem__)
    if any(g.scope_kind == ScopeKind.FLEET for g in grants):
        return Resolved(role)
    kinds = {g.scope_kind for g in grants}
    if len(kinds) > 1:
        return Resolved(None, refusal="your groups give scopes of tiers and of racks at once; a scope is one or "
                                      "the other: ask an admin to map one group with the scope you need")
    values = sorted({v for g in grants for v in g.scope_values})
    return Resolved(role, kinds.pop(), values)
