"""The provider's claims: the user's groups (Django groups of the provider's database) as ``groups``.
Three users misbehave on purpose, so the relying party's checks meet real bad tokens: ``mallory-issuer``
gets an ID token from another issuer, ``mallory-expired`` one that expired an hour ago,
``mallory-signature`` one whose signature does not match the provider's key."""

from __future__ import annotations

import datetime as dt
from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator


class Validator(OAuth2Validator):
    oidc_claim_scope = None  # every claim, whatever the scopes asked

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {"preferred_username": user.username, "email": user.email,
                "groups": sorted(user.groups.values_list("name", flat=True))}

    def get_id_token_dictionary(self, token: Any, token_handler: Any, request: Any) -> tuple[dict[str, Any], Any]:
        claims, expiration = super().get_id_token_dictionary(token, token_handler, request)
        if request.user.username == "mallory-issuer":
            claims["iss"] = "http://127.0.0.1:1/not-the-issuer"
        if request.user.username == "mallory-expired":
            claims["exp"] = int((dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).timestamp())
        return claims, expiration

    def finalize_id_token(self, id_token: Any, token: Any, token_handler: Any, request: Any) -> str:
        signed = str(super().finalize_id_token(id_token, token, token_handler, request))
        if request.user.username == "mallory-signature":
            head, body, signature = signed.split(".")
            signature = ("A" if signature[0] != "A" else "B") + signature[1:]
            signed = ".".join((head, body, signature))
        return signed
