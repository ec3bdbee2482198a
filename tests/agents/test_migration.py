"""Agent keys and node commands moved from the telemetry app to the agents app keeping their tables:
a database holding the demo's keys, a rotated key, commands and a batch migrates with every row
unchanged, the demo's keys still work, and an agent still gets the command sent before the move."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from rest_framework.test import APIClient

from apps.agents.models import AgentToken, NodeCommand
from apps.inventory.demo import seed_inventory_demo
from apps.inventory.models import Node
from apps.rollouts.models import RolloutNode
from apps.telemetry import demo
from apps.telemetry.models import IngestBatch
from apps.vectors.models import RunTarget

TABLES = ("telemetry_agenttoken", "telemetry_nodecommand", "telemetry_ingestbatch")


def _migrate(target: Sequence[tuple[str, str | None]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _rows(table: str) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} ORDER BY id")
        return list(cur.fetchall())


@pytest.mark.django_db(transaction=True)
def test_it_keeps_the_demo_keys_and_commands_through_the_move(transactional_db: Any, tmp_path: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "VAR_DIR", tmp_path)
    monkeypatch.setattr(demo, "TOKENS_FILE", tmp_path / "agent-tokens.json")
    seed_inventory_demo(racks=1)
    demo.seed_telemetry_demo()
    keys = json.loads((tmp_path / "agent-tokens.json").read_text())
    node = Node.objects.order_by("hostname").first()
    assert node is not None

    _migrate([("agents", None)])  # back to before the move: the models are telemetry's again
    try:
        old = MigrationExecutor(connection).loader.project_state(
            [("telemetry", "0008_stage_per_node_breakdown")]).apps
        OldToken = old.get_model("telemetry", "AgentToken")
        OldCommand = old.get_model("telemetry", "NodeCommand")
        OldBatch = old.get_model("telemetry", "IngestBatch")
        now = timezone.now()
        replacement = OldToken.objects.create(kind="node", node_id=node.pk, key_hash="b" * 64, key_prefix="bbbbbbbb",
                                              note="replacement", created_by="test")
        rotated = OldToken.objects.create(kind="node", node_id=node.pk, key_hash="a" * 64, key_prefix="aaaaaaaa",
                                          note="rotated", created_by="test", expires_at=now, rotated_to=replacement)
        sent = OldCommand.objects.create(node_id=node.pk, kind="ping", args={"n": 1}, reason="before the move",
                                         created_by_name="test")
        done = OldCommand.objects.create(node_id=node.pk, kind="drain", args={"deadline_s": 60}, state="succeeded",
                                         created_by_name="test", finished_at=now, result={"in_flight": 0})
        OldBatch.objects.create(scope=f"node:{node.pk}", batch_id="before-the-move", token=replacement,
                                received_at=now, stored_at=now)
        before = {table: _rows(table) for table in TABLES}
        assert len(before["telemetry_agenttoken"]) == len(keys["nodes"]) + 1 + 2
        assert ContentType.objects.filter(app_label="telemetry", model="agenttoken").exists()
    finally:
        _migrate(_latest())

    assert {table: _rows(table) for table in TABLES} == before
    assert AgentToken.objects.get(pk=rotated.pk).rotated_to == AgentToken.objects.get(pk=replacement.pk)
    assert AgentToken.objects.get(pk=replacement.pk).rotated_from.pk == rotated.pk
    assert IngestBatch.objects.get(batch_id="before-the-move").token == AgentToken.objects.get(pk=replacement.pk)
    command = NodeCommand.objects.get(pk=done.pk)
    assert (command.node, command.kind, command.state, command.result) == (node, "drain", "succeeded",
                                                                           {"in_flight": 0})
    assert set(node.commands.values_list("pk", flat=True)) == {sent.pk, done.pk}
    assert ContentType.objects.get_for_model(AgentToken).app_label == "agents"
    assert not ContentType.objects.filter(app_label="telemetry", model__in=["agenttoken", "nodecommand"]).exists()
    # The foreign keys of other apps point at the moved model.
    assert RolloutNode._meta.get_field("install_command").related_model is NodeCommand
    assert RunTarget._meta.get_field("command").related_model is NodeCommand

    # The demo's keys still work, and the node's agent gets the command sent before the move.
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Agent {keys['nodes'][node.hostname]}")
    r = agent.get("/api/v1/agent/commands/")
    assert r.status_code == 200, r.content
    assert [(c["id"], c["kind"], c["args"]) for c in r.json()] == [(sent.pk, "ping", {"n": 1})]
    gateway = APIClient()
    gateway.credentials(HTTP_AUTHORIZATION=f"Agent {keys['gateway']}")
    assert gateway.get("/api/v1/agent/commands/").status_code == 403  # a gateway key: known, not a node's
