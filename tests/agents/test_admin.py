"""The admin pages of the agents app: agent keys and node commands."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.test import Client

from apps.agents.models import AgentToken
from tests.telemetry.conftest import Fleet


def test_it_renders_every_agents_admin_page(fleet: Fleet, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    for model in apps.get_app_config("agents").get_models():
        for url in (f"/admin/agents/{model._meta.model_name}/", f"/admin/agents/{model._meta.model_name}/add/"):
            assert client.get(url).status_code == 200, url


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
