"""Token authentication that reads the token, its user and the user's role in
one query (the role is needed by every permission check)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from apps.common.roles import ROLES


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        groups = Group.objects.filter(user=OuterRef("user_id")).values("name")
        token = (
            Token.objects.select_related("user")
            .annotate(group_names=ArraySubquery(groups))
            .filter(key=key)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        user = token.user
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        names = set(token.group_names or [])  # type: ignore[attr-defined]
        role = None
        for name in ROLES:  # ordered low to high
            if name in names:
                role = name
        user._cp_role = role
        return user, token
