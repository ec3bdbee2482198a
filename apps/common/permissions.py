"""Every endpoint declares one of these. Nothing is writable anonymously."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from apps.common.roles import ADMIN, OPERATOR, VIEWER, has_role


class _RolePermission(BasePermission):
    read_role = VIEWER
    write_role = ADMIN

    def has_permission(self, request: Any, view: Any) -> bool:
        needed = self.read_role if request.method in SAFE_METHODS else self.write_role
        if has_role(request.user, needed):
            return True
        if request.user and request.user.is_authenticated:
            self.message = f"this action needs the {needed} role"
        return False


class IsViewer(_RolePermission):
    """Reads for viewers and up; writes for admins (inventory, pins, releases)."""


class ViewerReadOperatorWrite(_RolePermission):
    """Reads for viewers; writes (fleet actions) for operators and up."""

    write_role = OPERATOR


class ViewerAll(_RolePermission):
    """Read-only computations a viewer may POST to (planner)."""

    write_role = VIEWER


class AdminOnly(_RolePermission):
    read_role = ADMIN
