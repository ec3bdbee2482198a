"""The demo seed issues agent keys that work, and keeps them on a second run."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.test import APIClient

from apps.agents.models import AgentToken
from apps.telemetry import demo
from tests.telemetry.conftest import Fleet


def test_it_writes_working_agent_keys_and_keeps_them(fleet: Fleet, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(demo, "TOKENS_FILE", tmp_path / "agent-tokens.json")
    demo.seed_telemetry_demo()
    first = json.loads((tmp_path / "agent-tokens.json").read_text())
    assert set(first["nodes"]) == {"n-a", "n-b"}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {first['nodes']['n-b']}")
    assert client.get("/api/v1/agent/commands/").status_code == 200
    tokens = AgentToken.objects.count()
    demo.seed_telemetry_demo()
    assert json.loads((tmp_path / "agent-tokens.json").read_text()) == first
    assert AgentToken.objects.count() == tokens
