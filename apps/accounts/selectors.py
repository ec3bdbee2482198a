from typing import Any

from apps.common.roles import role_of


def user_profile(*, user: Any) -> dict[str, Any]:
    return {"username": user.get_username(), "role": role_of(user)}
