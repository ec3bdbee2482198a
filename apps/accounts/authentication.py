"""``Authorization: Bearer <token>``: a service account's token.

The token's account, its user and the user's groups come in one query; the role is set on the user
(as the personal-token path does), and the token's id is kept on it, so the audit trail names the
token on every action. A revoked or unknown token is 401 ``unknown or revoked service token``; one
past its ``expires_at`` is 401 ``expired service token``. ``last_used_at`` is written at most once a
minute per token (``apps.common.keys``)."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.aggregates import ArrayAgg
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from apps.accounts.models import ServiceToken
from apps.common.keys import hash_key, touch_due
from apps.common.roles import ROLES

KEYWORD = "Bearer"


def credential_of(token: ServiceToken) -> str:
    """How the audit trail names the credential an action came with."""
    return f"service token {token.pk}"


class ServiceTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ServiceToken] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() != KEYWORD.lower().encode():
            return None
        if len(auth) != 2:
            raise exceptions.AuthenticationFailed("invalid Bearer header: expected 'Bearer <token>'")
        try:
            key = auth[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed("invalid service token") from exc
        token = (ServiceToken.objects.select_related("account__user")
                 .annotate(group_names=ArrayAgg("account__user__groups__name", default=[]))
                 .filter(key_hash=hash_key(key), revoked_at__isnull=True).first())
        if token is None:
            raise exceptions.AuthenticationFailed("unknown or revoked service token")
        now = timezone.now()
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed(
                f"expired service token: it expired at {token.expires_at:%Y-%m-%dT%H:%M:%SZ}")
        user = token.account.user
        if not user.is_active:
            raise exceptions.AuthenticationFailed("the service account is deactivated")
        names = set(getattr(token, "group_names", None) or [])
        role = None
        for name in ROLES:  # ordered low to high
            if name in names:
                role = name
        user._cp_role = role  # type: ignore[attr-defined]
        user._cp_credential = credential_of(token)  # type: ignore[attr-defined]
        if touch_due(token.last_used_at, now):
            ServiceToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return user, token

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD


class ServiceTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.accounts.authentication.ServiceTokenAuthentication"
    name = "serviceToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer",
                "description": "A service account's token: `Bearer <token>` "
                               "(POST /api/v1/service-accounts/{id}/tokens/)"}
