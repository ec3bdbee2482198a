"""``Authorization: Agent <key>``: node agents and the gateway.

request.user stays AnonymousUser (agents hold no role); request.auth is the
AgentToken. Keys are random (256 bits), so a SHA-256 lookup is enough.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication, get_authorization_header
from rest_framework.request import Request

from apps.agents.contract import VERSIONS
from apps.agents.models import AgentToken
from apps.common.authentication import TokenAuthentication
from apps.common.keys import hash_key, touch_due
from apps.inventory.models import Node

KEYWORD = "Agent"
_USER_AGENT = re.compile(r"^cp-agent/(\S{1,40})")


def agent_said(request: Any) -> tuple[str, int | None]:
    """Which agent this is, as its request says: the version in ``User-Agent: cp-agent/VERSION``
    ('' if another client) and the newest contract in ``X-Agent-Contract`` (None unless a version
    this server speaks)."""
    meta = getattr(request, "META", {})
    found = _USER_AGENT.match(str(meta.get("HTTP_USER_AGENT", "")))
    raw = str(meta.get("HTTP_X_AGENT_CONTRACT", "")).strip()
    contract = int(raw) if raw.isdigit() and int(raw) in VERSIONS else None
    return (found.group(1) if found else ""), contract


def agent_key(request: Any) -> str:
    """The key of an ``Authorization: Agent <key>`` header ('' if none)."""
    auth = get_authorization_header(request).split()
    if len(auth) != 2 or auth[0].lower() != KEYWORD.lower().encode():
        return ""
    try:
        return str(auth[1].decode())
    except UnicodeError:
        return ""


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
        now = timezone.now()
        if token is not None and token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("expired agent key: it was rotated; use its replacement")
        if token is None:
            raise exceptions.AuthenticationFailed("unknown or revoked agent key")
        if touch_due(token.last_used_at, now):
            AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        node = token.node
        version, contract = agent_said(request)
        if node is not None and version and (version, contract) != (node.agent_version, node.agent_contract):
            # what the node's agent says it is, written when it changes only (an upgrade, a downgrade)
            Node.objects.filter(pk=node.pk).update(agent_version=version, agent_contract=contract)
            node.agent_version, node.agent_contract = version, contract
        return AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.agents.authentication.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Node agent or gateway key: `Agent <key>`",
        }


# What agent endpoints authenticate with. User credentials are recognised too, so a user calling an
# agent endpoint gets 403, not 401.
AGENT_AUTH = [AgentTokenAuthentication, TokenAuthentication, SessionAuthentication]
