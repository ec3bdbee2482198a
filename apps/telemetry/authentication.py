"""``Authorization: Agent <key>``: node agents and the gateway.

request.user stays AnonymousUser (agents hold no role); request.auth is the
AgentToken. Keys are random (256 bits), so a SHA-256 lookup is enough.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from apps.telemetry.models import AgentToken

KEYWORD = "Agent"
# last_used_at is written at most this often per token (seconds).
_TOUCH_EVERY_S = 60


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class AgentTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, AgentToken] | None:
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() != KEYWORD.lower().encode():
            return None
        if len(auth) != 2:
            raise exceptions.AuthenticationFailed("invalid Agent header: expected 'Agent <key>'")
        try:
            key = auth[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed("invalid Agent key") from exc
        token = (
            AgentToken.objects.select_related("node")
            .filter(key_hash=hash_key(key), revoked_at__isnull=True)
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("unknown or revoked agent key")
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > _TOUCH_EVERY_S:
            AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.telemetry.authentication.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Node agent or gateway key: `Agent <key>`",
        }
