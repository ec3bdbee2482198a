"""Service accounts: created by admins, no login, tokens shown once, stored hashed, expiring,
revocable, last use written cheaply, every action audited with the account and the token's id."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ServiceAccount, ServiceToken
from apps.audit.models import AuditEvent
from apps.common.keys import TOUCH_EVERY_S, hash_key
from apps.inventory.choices import NodeState, TierKind
from apps.inventory.models import Node, Rack, Tier

pytestmark = pytest.mark.django_db


def _create(admin_api: APIClient, **body: Any) -> dict[str, Any]:
    response = admin_api.post("/api/v1/service-accounts/", {"name": "ci-pin", "role": "operator", **body},
                              format="json")
    assert response.status_code == 201, response.json()
    return dict(response.json())


def _issue(admin_api: APIClient, account_id: int, **body: Any) -> dict[str, Any]:
    response = admin_api.post(f"/api/v1/service-accounts/{account_id}/tokens/", body, format="json")
    assert response.status_code == 201, response.json()
    return dict(response.json())


def _bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_it_creates_an_account_that_cannot_log_in(admin_api: APIClient, admin_user: User) -> None:
    account = _create(admin_api, scope={"kind": "tiers", "values": ["hybrid_inference"]})
    assert account["role"] == "operator"
    assert account["owner"] == admin_user.username
    assert account["scope"] == {"kind": "tiers", "values": ["hybrid_inference"]}
    user = ServiceAccount.objects.get(pk=account["id"]).user
    assert not user.has_usable_password()
    browser = Client()
    page = browser.post("/login/", {"username": "ci-pin", "password": "anything"})
    assert page.status_code == 200 and "_auth_user_id" not in browser.session
    listed = admin_api.get("/api/v1/service-accounts/").json()
    assert [a["name"] for a in listed["results"]] == ["ci-pin"]
    assert admin_api.get(f"/api/v1/service-accounts/{account['id']}/").json()["name"] == "ci-pin"
    event = AuditEvent.objects.get(action="service_account.create")
    assert event.actor_name == admin_user.username


def test_it_refuses_a_taken_name_and_a_bad_scope(admin_api: APIClient, operator_user: User) -> None:
    taken = admin_api.post("/api/v1/service-accounts/", {"name": operator_user.username, "role": "viewer"},
                           format="json")
    assert taken.status_code == 409
    bad = admin_api.post("/api/v1/service-accounts/", {"name": "x", "role": "viewer", "scope": {"kind": "racks"}},
                         format="json")
    assert bad.status_code == 400
    assert "scope.values" in bad.json()["errors"]


def test_it_is_for_admins_only(operator_api: APIClient) -> None:
    assert operator_api.post("/api/v1/service-accounts/", {"name": "x", "role": "viewer"},
                             format="json").status_code == 403
    assert operator_api.get("/api/v1/service-accounts/").status_code == 403


def test_it_shows_a_token_once_and_stores_only_its_hash(admin_api: APIClient) -> None:
    account = _create(admin_api)
    issued = _issue(admin_api, account["id"], note="pipeline")
    token = issued["token"]
    stored = ServiceToken.objects.get(pk=issued["id"])
    assert stored.key_hash == hash_key(token) and token not in stored.key_hash
    listed = admin_api.get(f"/api/v1/service-accounts/{account['id']}/tokens/").json()
    assert [t["id"] for t in listed] == [issued["id"]]
    assert "token" not in listed[0]
    me = _bearer(token).get("/api/v1/me/").json()
    assert me == {"username": "ci-pin", "role": "operator", "service_account": True,
                  "scope": {"kind": "fleet", "values": []}}


def test_it_refuses_a_token_past_its_expiry_with_401(admin_api: APIClient) -> None:
    account = _create(admin_api)
    issued = _issue(admin_api, account["id"], expires_at=(timezone.now() + dt.timedelta(hours=1)).isoformat())
    assert _bearer(issued["token"]).get("/api/v1/me/").status_code == 200
    ServiceToken.objects.filter(pk=issued["id"]).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    response = _bearer(issued["token"]).get("/api/v1/me/")
    assert response.status_code == 401
    assert "expired service token" in response.json()["detail"]
    past = admin_api.post(f"/api/v1/service-accounts/{account['id']}/tokens/",
                          {"expires_at": (timezone.now() - dt.timedelta(minutes=1)).isoformat()}, format="json")
    assert past.status_code == 409 and "expires_at" in past.json()["errors"]


def test_it_refuses_a_revoked_token(admin_api: APIClient) -> None:
    account = _create(admin_api)
    issued = _issue(admin_api, account["id"])
    revoked = admin_api.post(f"/api/v1/service-accounts/{account['id']}/tokens/{issued['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["is_active"] is False
    response = _bearer(issued["token"]).get("/api/v1/me/")
    assert response.status_code == 401
    assert "unknown or revoked service token" in response.json()["detail"]
    assert AuditEvent.objects.filter(action="service_token.revoke", target_id=str(issued["id"])).count() == 1


def test_it_writes_the_last_use_at_most_once_a_minute(admin_api: APIClient) -> None:
    account = _create(admin_api)
    issued = _issue(admin_api, account["id"])
    client = _bearer(issued["token"])
    client.get("/api/v1/me/")
    first = ServiceToken.objects.get(pk=issued["id"]).last_used_at
    assert first is not None
    client.get("/api/v1/me/")
    assert ServiceToken.objects.get(pk=issued["id"]).last_used_at == first
    ServiceToken.objects.filter(pk=issued["id"]).update(last_used_at=first - dt.timedelta(seconds=TOUCH_EVERY_S + 1))
    client.get("/api/v1/me/")
    later = ServiceToken.objects.get(pk=issued["id"]).last_used_at
    assert later is not None and later > first


def test_the_audit_trail_names_the_account_and_the_token(admin_api: APIClient) -> None:
    tier = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    Tier.objects.filter(pk=tier.pk).update(min_active_nodes=0)
    rack = Rack.objects.create(name="r-audit")
    node = Node.objects.create(hostname="n-audit", rack=rack, slot=1, tier=tier, state=NodeState.ACTIVE)
    account = _create(admin_api)
    issued = _issue(admin_api, account["id"])
    response = _bearer(issued["token"]).post(f"/api/v1/nodes/{node.pk}/cordon/", {"reason": "pipeline"},
                                             format="json")
    assert response.status_code == 200, response.json()
    event = AuditEvent.objects.filter(target_type="node", target_id=str(node.pk)).latest("id")
    assert event.actor_name == "ci-pin"
    assert event.credential == f"service token {issued['id']}"
    listed = admin_api.get("/api/v1/audit-events/", {"actor": "ci-pin"}).json()["results"]
    assert listed and listed[0]["credential"] == f"service token {issued['id']}"


def test_personal_tokens_keep_working(operator_api: APIClient) -> None:
    me = operator_api.get("/api/v1/me/")
    assert me.status_code == 200 and me.json()["role"] == "operator"
    assert me.json()["service_account"] is False
