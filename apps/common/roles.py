"""Roles are Django groups: viewer < operator < admin. Superusers are admins."""

from __future__ import annotations

from typing import Any

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
_RANK = {VIEWER: 1, OPERATOR: 2, ADMIN: 3}


def role_of(user: Any) -> str | None:
    """The highest role a user holds, or None."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached = getattr(user, "_cp_role", "unset")
    if cached != "unset":
        return cached  # type: ignore[no-any-return]
    names = set(user.groups.values_list("name", flat=True))
    best = None
    for name in ROLES:
        if name in names:
            best = name
    user._cp_role = best
    return best


def has_role(user: Any, role: str) -> bool:
    current = role_of(user)
    return current is not None and _RANK[current] >= _RANK[role]
