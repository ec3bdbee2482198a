"""Every API answer names the API's version, which the schema states too: a client reads it
before trusting an answer (cpctl refuses a server of another major version)."""

from __future__ import annotations

import pytest
from django.conf import settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.accounts.services import user_ensure

pytestmark = pytest.mark.django_db


def test_it_names_the_version_on_answers_refusals_and_unknown_routes_but_not_on_pages() -> None:
    user, _ = user_ensure(username="v-viewer", password="v-viewer-pw-123456", role="viewer")
    client = APIClient()
    assert client.get("/api/v1/nodes/")["X-API-Version"] == settings.API_VERSION  # 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    for path in ("/api/v1/nodes/", "/api/v1/no-such-route/", "/api/schema/"):
        assert client.get(path)["X-API-Version"] == "1.0.0", path
    assert client.get("/api/schema/?format=json").json()["info"]["version"] == settings.API_VERSION
    assert "X-API-Version" not in client.get("/login/")
