"""The admin pages of the agents app: agent keys, node commands, bootstrap tokens and enrolments."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.apps import apps
from django.test import Client
from django.utils import timezone

from apps.agents.enrolments import bootstrap_token_issue
from apps.agents.models import AgentToken, BootstrapToken
from apps.inventory.models import Rack
from tests.telemetry.conftest import Fleet

# Rows the admin only reads: bootstrap tokens are issued through the API (shown once, with their scope),
# enrolments come from joining agents. Their add pages answer 403.
READ_ONLY = {"bootstraptoken", "enrolment"}


def test_it_renders_every_agents_admin_page(fleet: Fleet, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    for model in apps.get_app_config("agents").get_models():
        name = model._meta.model_name
        assert client.get(f"/admin/agents/{name}/").status_code == 200, name
        assert client.get(f"/admin/agents/{name}/add/").status_code == (403 if name in READ_ONLY else 200), name


def test_it_issues_an_agent_key_from_the_admin_and_shows_it_once(fleet: Fleet, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    r = client.post("/admin/agents/agenttoken/add/", {"kind": "gateway", "note": "second gateway"}, follow=True)
    assert r.status_code == 200
    text = [str(m) for m in r.context["messages"]]
    assert any("shown only now" in t for t in text), text
    assert AgentToken.objects.filter(note="second gateway").count() == 1
    r = client.post("/admin/agents/agenttoken/add/", {"kind": "gateway", "node": fleet.node_a.pk})
    assert r.status_code == 200  # the form comes back with an error: a gateway key has no node
    assert AgentToken.objects.filter(kind="gateway").count() == 2


def test_it_shows_and_revokes_a_bootstrap_token_in_the_admin(admin_user: Any) -> None:
    token, _key = bootstrap_token_issue(tier=None, racks=[Rack.objects.create(name="r-admin")], uses=2,
                                        expires_at=timezone.now() + dt.timedelta(hours=1), reason="rack r-admin",
                                        auto_approve=False, actor="test")
    client = Client()
    client.force_login(admin_user)
    assert client.get(f"/admin/agents/bootstraptoken/{token.pk}/change/").status_code == 200
    client.post("/admin/agents/bootstraptoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert BootstrapToken.objects.get().revoked_at is not None
