"""Who may call the agent endpoints: node agents, the gateway, either."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from apps.agents.choices import AgentKind
from apps.agents.models import AgentToken


def agent_token(request: Any) -> AgentToken | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, AgentToken) else None


def agent_token_of(request: Any) -> AgentToken:
    """The calling agent's token, on a view whose permission classes admit only agents."""
    token = agent_token(request)
    assert token is not None  # guaranteed by the permission classes
    return token


class IsAgent(BasePermission):
    message = "this endpoint is for node agents and the gateway (Authorization: Agent <key>)"
    kinds: tuple[str, ...] = (AgentKind.NODE, AgentKind.GATEWAY)

    def has_permission(self, request: Any, view: Any) -> bool:
        token = agent_token(request)
        return token is not None and token.kind in self.kinds


class IsNodeAgent(IsAgent):
    message = "this endpoint is for node agents (a node's Agent key)"
    kinds = (AgentKind.NODE,)


class IsGatewayAgent(IsAgent):
    message = "this endpoint is for the gateway (the gateway's Agent key)"
    kinds = (AgentKind.GATEWAY,)
