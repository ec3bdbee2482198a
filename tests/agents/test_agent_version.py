"""Which agent is speaking: every request of cp-agent names its version (User-Agent) and the newest
contract it speaks (X-Agent-Contract); the node keeps both when they change, the node API and the
node list show them, and an agent whose newest contract is older than the server's is named by
the ``agent_contract`` check (observe only)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.agents.contract import CURRENT
from apps.health import checks
from apps.health.inputs import FAIL, PASS, Context, NodeView
from apps.inventory.models import Node
from tests.telemetry.conftest import Fleet

POLL = "/api/v1/agent/commands/"


def test_the_node_keeps_what_its_agent_says_and_writes_only_on_a_change(fleet: Fleet, viewer_api: Any) -> None:
    agent = fleet.client(fleet.key_a)
    assert agent.get(POLL, headers={"User-Agent": "cp-agent/0.8.1", "X-Agent-Contract": "2"}).status_code == 200
    node = Node.objects.get(pk=fleet.node_a.pk)
    assert (node.agent_version, node.agent_contract) == ("0.8.1", 2)
    with CaptureQueriesContext(connection) as queries:  # the same again: read, not written
        agent.get(POLL, headers={"User-Agent": "cp-agent/0.8.1", "X-Agent-Contract": "2"})
    assert not [q for q in queries.captured_queries if q["sql"].startswith('UPDATE "inventory_node"')]
    # an upgrade is seen on its first request; a contract this server does not speak is not kept
    agent.get(POLL, headers={"User-Agent": "cp-agent/0.9.0", "X-Agent-Contract": "99"})
    node.refresh_from_db()
    assert (node.agent_version, node.agent_contract) == ("0.9.0", None)
    # another client with the node's key (a script) changes nothing
    agent.get(POLL, headers={"User-Agent": "curl/8.5.0"})
    node.refresh_from_db()
    assert node.agent_version == "0.9.0"
    rows = {n["hostname"]: n for n in viewer_api.get("/api/v1/nodes/").json()["results"]}
    assert (rows[node.hostname]["agent_version"], rows[node.hostname]["agent_contract"]) == ("0.9.0", None)
    assert rows[fleet.node_b.hostname]["agent_version"] == ""


def _view(contract: int | None, version: str = "0.8.1") -> NodeView:
    return NodeView(id=1, hostname="n-1", tier_id=1, state="active", age_s=1.0, cpu=0.2, in_flight=0, cpu_minutes=[],
                    module_utils=[], modules=1, agent_version=version, agent_contract=contract)


def test_an_agent_speaking_an_older_contract_is_named_and_one_that_does_not_say_is_not_judged() -> None:
    ctx = Context(now=None, stale_s=30)  # type: ignore[arg-type]
    old = checks.agent_contract(_view(CURRENT - 1), {}, ctx)
    assert old is not None and old.status == FAIL
    assert old.summary == f"n-1's agent cp-agent 0.8.1 speaks contract {CURRENT - 1} at most; this server speaks " \
                          f"{CURRENT}"
    current = checks.agent_contract(_view(CURRENT, "0.9.0"), {}, ctx)
    assert current is not None and current.status == PASS
    assert checks.agent_contract(_view(None), {}, ctx) is None
    assert checks.CHECKS["agent_contract"].policy == "observe"


def test_the_node_list_shows_each_nodes_agent(fleet: Fleet, viewer_user: Any, client: Any) -> None:
    Node.objects.filter(pk=fleet.node_a.pk).update(agent_version="0.9.0", agent_contract=3)
    client.force_login(viewer_user)
    html = client.get("/nodes/").content.decode()
    assert "<th>Agent</th>" in html or ">Agent<" in html
    assert '0.9.0 <span class="muted small" title="the newest wire contract it speaks">contract 3</span>' in html
