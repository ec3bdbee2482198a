"""API token authentication: the token, its user and the user's role in one query."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.accounts.services import user_ensure
from apps.common.authentication import TokenAuthentication

pytestmark = pytest.mark.django_db


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_token_gives_its_user_and_highest_role_in_one_query(django_assert_num_queries):  # type: ignore[no-untyped-def]
    user, _ = user_ensure(username="ops", password="ops-pw-123456", role="viewer")
    user.groups.add(Group.objects.get(name="operator"))
    token = Token.objects.create(user=user)
    with django_assert_num_queries(1):
        authed, _ = TokenAuthentication().authenticate_credentials(token.key)
    assert authed.username == "ops" and authed._cp_role == "operator"
    # /me/ answers two more facts, each one read: the user's scope and whether it is a service account.
    with django_assert_num_queries(3):
        body = _client(token.key).get("/api/v1/me/").json()
    assert body["username"] == "ops" and body["role"] == "operator"


def test_a_user_without_a_role_is_refused_and_an_unknown_token_is_401():  # type: ignore[no-untyped-def]
    user, _ = user_ensure(username="nobody", password="nobody-pw-123456", role="viewer")
    user.groups.clear()
    token = Token.objects.create(user=user)
    assert _client(token.key).get("/api/v1/nodes/").status_code == 403
    response = _client("0" * 40).get("/api/v1/nodes/")
    assert response.status_code == 401 and response.json()["detail"] == "Invalid token."


def test_an_inactive_user_is_refused():  # type: ignore[no-untyped-def]
    user, _ = user_ensure(username="gone", password="gone-pw-123456", role="admin")
    token = Token.objects.create(user=user)
    assert _client(token.key).get("/api/v1/nodes/").status_code == 200
    user.is_active = False
    user.save()
    response = _client(token.key).get("/api/v1/nodes/")
    assert response.status_code == 401 and response.json()["detail"] == "User inactive or deleted."
