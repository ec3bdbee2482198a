from typing import Any

from django.http import HttpRequest

from apps.common.roles import ADMIN, OPERATOR, has_role, role_of


def roles(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    return {
        "role": role_of(user),
        "can_operate": has_role(user, OPERATOR),
        "can_admin": has_role(user, ADMIN),
        "break_glass": bool(getattr(request, "session", {}).get("break_glass")),
    }
