"""Agent keys rotate with an overlap window: the replacement is issued (shown once), both keys are
accepted during the overlap, on the DRF view and on the lean ASGI path, and the old key is refused
after it, also where its identity is cached. One key has one replacement: a second rotation (a
concurrent twin) is refused. Admins only; every rotation is audited."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.agents.identity import identities
from apps.agents.models import AgentToken
from apps.agents.services import agent_identity, agent_token_rotate
from apps.audit.models import AuditEvent
from tests.live.stack import wait_for
from tests.telemetry.conftest import Fleet, node_sample
from tests.telemetry.test_ingest_asgi import AsgiClient

_ids = itertools.count(1)
# The old key's overlap where a test asserts it still works: long enough that a stalled machine still
# posts within it; the test then waits it out (so not much longer: a quick test's budget is 30 s) and
# checks the key was not refused before its end.
OVERLAP_S = 6


def _batch(fleet: Fleet) -> dict[str, Any]:
    return {"batch_id": f"rot-{next(_ids):05d}", "node_samples": [node_sample("n-a")]}


def _post(fleet: Fleet, key: str) -> int:
    return int(fleet.client(key).post("/api/v1/telemetry/", _batch(fleet), format="json").status_code)


def _rotate(api: APIClient, token: AgentToken, overlap_s: int) -> Any:
    return api.post(f"/api/v1/agent-tokens/{token.pk}/rotate/", {"overlap_s": overlap_s}, format="json")


@pytest.mark.django_db
def test_both_keys_work_during_the_overlap_and_the_old_one_is_refused_after_it(
        fleet: Fleet, admin_api: APIClient) -> None:
    old = AgentToken.objects.get(node=fleet.node_a)
    assert _post(fleet, fleet.key_a) == 202
    r = _rotate(admin_api, old, OVERLAP_S)
    assert r.status_code == 201, r.json()
    body = r.json()
    new_key = body["key"]
    assert body["token"]["node"] == fleet.node_a.pk and body["replaces"]["id"] == old.pk
    assert body["replaces"]["expires_at"] is not None and body["replaces"]["rotated_to"] == body["token"]["id"]
    assert _post(fleet, new_key) == 202
    assert _post(fleet, fleet.key_a) == 202  # the overlap: the agent may not have its new key yet
    expires_at = dt.datetime.fromisoformat(body["replaces"]["expires_at"])
    wait_for(lambda: _post(fleet, fleet.key_a) == 401, timeout=OVERLAP_S + 30, what="the old key to be refused",
             interval=0.5)
    assert timezone.now() >= expires_at  # refused after the overlap, not before its end
    r = fleet.client(fleet.key_a).post("/api/v1/telemetry/", _batch(fleet), format="json")
    assert "expired agent key" in r.json()["detail"]
    assert _post(fleet, new_key) == 202
    event = AuditEvent.objects.get(action="agent_token.rotate", target_id=str(old.pk))
    assert event.changes["rotated_to"] == [None, body["token"]["id"]]


@pytest.mark.django_db
def test_a_cached_identity_carries_its_expiry(fleet: Fleet, settings: Any) -> None:
    settings.TELEMETRY_KEY_CACHE_REFRESH_S = 3600  # no reload meanwhile: the cached identity must know
    identities.clear()
    token = AgentToken.objects.get(node=fleet.node_a)
    agent_token_rotate(token=token, overlap_s=OVERLAP_S, actor="test")
    cached = agent_identity(key=fleet.key_a)  # cached in this process, with its expiry
    assert cached is not None and cached.expires_at is not None
    assert identities.cached(fleet.key_a)[1] == cached
    wait_for(lambda: agent_identity(key=fleet.key_a) is None, timeout=OVERLAP_S + 30,
             what="the cached key to expire", interval=0.5)
    assert dt.datetime.now(dt.UTC) >= cached.expires_at  # refused after the overlap, not before its end
    assert identities.cached(fleet.key_a)[1] is None  # and forgotten


@pytest.mark.django_db(transaction=True)
def test_the_lean_ingest_path_refuses_the_old_key_after_the_overlap(admin_api: APIClient) -> None:
    fleet = Fleet()
    asgi = AsgiClient()
    try:
        old = AgentToken.objects.get(node=fleet.node_a)
        assert asgi.post(_batch(fleet), key=fleet.key_a).status_code == 202
        r = _rotate(admin_api, old, 1)
        assert r.status_code == 201, r.json()
        assert asgi.post(_batch(fleet), key=r.json()["key"]).status_code == 202
        wait_for(lambda: asgi.post(_batch(fleet), key=fleet.key_a).status_code == 401, timeout=10,
                 what="the lean path to refuse the old key")
        assert asgi.post(_batch(fleet), key=r.json()["key"]).status_code == 202
    finally:
        asgi.close()


@pytest.mark.django_db
def test_a_key_has_one_replacement_and_a_revoked_key_none(fleet: Fleet, admin_api: APIClient) -> None:
    old = AgentToken.objects.get(node=fleet.node_a)
    assert _rotate(admin_api, old, 3600).status_code == 201
    twin = _rotate(admin_api, old, 3600)
    assert twin.status_code == 409 and "rotated already" in twin.json()["detail"], twin.json()
    assert AgentToken.objects.filter(node=fleet.node_a).count() == 2
    gw = AgentToken.objects.get(kind="gateway")
    assert admin_api.post(f"/api/v1/agent-tokens/{gw.pk}/revoke/").status_code == 200
    refused = _rotate(admin_api, gw, 60)
    assert refused.status_code == 409 and "revoked" in refused.json()["detail"]


@pytest.mark.django_db
def test_an_overlap_out_of_range_is_named(fleet: Fleet, admin_api: APIClient) -> None:
    old = AgentToken.objects.get(node=fleet.node_a)
    r = _rotate(admin_api, old, 10**12)
    assert r.status_code == 400 and "overlap_s" in r.json()["errors"], r.json()
    assert AgentToken.objects.get(pk=old.pk).expires_at is None


@pytest.mark.django_db
def test_only_admins_see_issue_rotate_and_revoke_keys(fleet: Fleet, operator_api: APIClient,
                                                      viewer_api: APIClient, admin_api: APIClient) -> None:
    old = AgentToken.objects.get(node=fleet.node_a)
    for api in (operator_api, viewer_api):
        assert api.get("/api/v1/agent-tokens/").status_code == 403
        assert _rotate(api, old, 60).status_code == 403
    listed = admin_api.get("/api/v1/agent-tokens/").json()
    assert {t["key_prefix"] for t in listed["results"]} >= {fleet.key_a[:8]}
    assert all("key_hash" not in t for t in listed["results"])
    r = admin_api.post("/api/v1/agent-tokens/", {"kind": "node", "node": fleet.node_b.pk}, format="json")
    assert r.status_code == 201 and len(r.json()["key"]) > 20
    r = admin_api.post("/api/v1/agent-tokens/", {"kind": "node"}, format="json")
    assert r.status_code == 400 and "node" in r.json()["errors"], r.json()


@pytest.mark.django_db
def test_the_admin_rotates_a_key_and_shows_the_new_one_once(fleet: Fleet, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    old = AgentToken.objects.get(node=fleet.node_a)
    r = client.post("/admin/agents/agenttoken/", {"action": "rotate", "_selected_action": [old.pk]}, follow=True)
    assert r.status_code == 200
    shown = [str(m) for m in r.context["messages"]]
    new = AgentToken.objects.get(rotated_from=old)
    assert any(f"replaced by {new}" in m and "shown only now" in m for m in shown), shown
    assert AgentToken.objects.get(pk=old.pk).expires_at is not None
    AuditEvent.objects.get(action="agent_token.rotate", target_id=str(old.pk), source="admin")
