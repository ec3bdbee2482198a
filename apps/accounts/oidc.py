"""The OpenID Connect relying party (Authlib): the authorization code flow with PKCE (S256), state and
nonce kept in the session, the ID token's signature (the provider's JWKS), issuer, audience, expiry
and nonce checked by Authlib's ``parse_id_token``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from authlib.integrations.django_client import OAuth
from django.conf import settings

_clients: dict[tuple[str, str, str], Any] = {}


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER and settings.OIDC_CLIENT_ID)


def client() -> Any:
    """The provider's client for the current settings (its discovery document and keys are fetched on first
    use and kept with it)."""
    discovery = settings.OIDC_DISCOVERY_URL or f"{settings.OIDC_ISSUER}/.well-known/openid-configuration"
    key = (discovery, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET)
    if key not in _clients:
        oauth = OAuth()
        oauth.register("sso", client_id=settings.OIDC_CLIENT_ID, client_secret=settings.OIDC_CLIENT_SECRET,
                       server_metadata_url=discovery,
                       client_kwargs={"scope": settings.OIDC_SCOPES, "code_challenge_method": "S256",
                                      "timeout": settings.OIDC_TIMEOUT_S})
        _clients[key] = oauth.create_client("sso")
    return _clients[key]


def end_session_url(*, id_token: str, after: str) -> str:
    """Where to send the browser to end the provider's session too ('' when it offers no end-session
    endpoint, or cannot be reached: the local session is ended either way)."""
    try:
        endpoint = client().load_server_metadata().get("end_session_endpoint")
    except Exception:  # the provider is away: logging out locally must still work
        return ""
    if not endpoint:
        return ""
    query = urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": after,
                       "client_id": settings.OIDC_CLIENT_ID})
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def forget() -> None:
    """Drop the kept clients (and their discovery documents and keys): the next login fetches them again."""
    _clients.clear()
