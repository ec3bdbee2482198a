"""The command channel: operators send, node agents long-poll and ack."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from apps.agents import services
from apps.agents.models import NodeCommand
from apps.agents.services import node_command_send
from apps.audit.models import AuditEvent
from tests.live.stack import wait_for
from tests.telemetry.conftest import Fleet

POLL = "/api/v1/agent/commands/"


def ack_url(pk: int) -> str:
    return f"/api/v1/agent/commands/{pk}/ack/"


def test_it_lets_an_operator_send_a_command(fleet: Fleet, operator_api: Any, viewer_api: Any) -> None:
    r = operator_api.post("/api/v1/node-commands/", {"node": fleet.node_a.pk, "kind": "drain",
                                                     "args": {"deadline_s": 300}, "reason": "test"}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["state"] == "pending"
    assert AuditEvent.objects.filter(action="node_command.send", related_id=str(r.json()["id"])).count() == 1
    assert viewer_api.post("/api/v1/node-commands/", {"node": fleet.node_a.pk, "kind": "drain"},
                           format="json").status_code == 403
    assert [c["kind"] for c in viewer_api.get("/api/v1/node-commands/").json()["results"]] == ["drain"]


def test_it_delivers_commands_once_oldest_first(fleet: Fleet) -> None:
    first = node_command_send(node=fleet.node_a, kind="drain", args={"deadline_s": 60}, actor="test")
    second = node_command_send(node=fleet.node_a, kind="frobnicate", args={}, actor="test")
    node_command_send(node=fleet.node_b, kind="drain", args={}, actor="test")
    agent = fleet.client(fleet.key_a)
    r = agent.get(POLL)
    assert r.status_code == 200
    assert [(c["id"], c["kind"], c["args"]) for c in r.json()] == [
        (first.pk, "drain", {"deadline_s": 60}), (second.pk, "frobnicate", {})]
    assert agent.get(POLL).json() == []
    assert NodeCommand.objects.get(pk=first.pk).state == "delivered"


def test_it_redelivers_a_command_never_acknowledged(fleet: Fleet, settings: Any) -> None:
    settings.TELEMETRY_COMMAND_REDELIVER_AFTER_S = 30
    command = node_command_send(node=fleet.node_a, kind="drain", args={}, actor="test")
    agent = fleet.client(fleet.key_a)
    assert [c["id"] for c in agent.get(POLL).json()] == [command.pk]
    assert agent.get(POLL).json() == []  # delivered, not yet overdue
    # the agent died between fetch and ack: after the redelivery delay it comes again
    NodeCommand.objects.filter(pk=command.pk).update(delivered_at=timezone.now() - dt.timedelta(seconds=31))
    assert [c["id"] for c in agent.get(POLL).json()] == [command.pk]
    assert agent.post(ack_url(command.pk), {"status": "succeeded"}, format="json").status_code == 200
    NodeCommand.objects.filter(pk=command.pk).update(delivered_at=timezone.now() - dt.timedelta(seconds=31))
    assert agent.get(POLL).json() == []  # acknowledged commands never come back


def test_it_records_acks_idempotently(fleet: Fleet) -> None:
    command = node_command_send(node=fleet.node_a, kind="frobnicate", args={}, actor="test")
    agent = fleet.client(fleet.key_a)
    agent.get(POLL)
    body = {"status": "unknown", "result": {"message": "unknown command frobnicate"}}
    r1 = agent.post(ack_url(command.pk), body, format="json")
    r2 = agent.post(ack_url(command.pk), body, format="json")
    assert r1.status_code == r2.status_code == 200
    assert r1.json() == r2.json()
    assert r1.json()["state"] == "unknown"
    assert agent.post(ack_url(command.pk), {"status": "succeeded"}, format="json").status_code == 409
    assert AuditEvent.objects.filter(action="node_command.finish").count() == 1


def test_it_hides_other_nodes_commands(fleet: Fleet) -> None:
    command = node_command_send(node=fleet.node_b, kind="drain", args={}, actor="test")
    assert fleet.client(fleet.key_a).get(POLL).json() == []
    r = fleet.client(fleet.key_a).post(ack_url(command.pk), {"status": "succeeded"}, format="json")
    assert r.status_code == 404
    assert NodeCommand.objects.get(pk=command.pk).state == "pending"


def test_it_keeps_the_agent_endpoints_for_node_agents(fleet: Fleet, admin_api: Any) -> None:
    assert fleet.client(fleet.key_gw).get(POLL).status_code == 403
    assert admin_api.get(POLL).status_code == 403
    assert fleet.client(fleet.key_a).get(POLL + "?wait=60").status_code == 400


@pytest.mark.django_db(transaction=True)
def test_it_long_polls_until_a_command_arrives(transactional_db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    wait_s = 20
    # Only the send's wake-up can answer the poll before its wait runs out: no periodic database recheck.
    monkeypatch.setattr(services, "_DB_RECHECK_S", 3600.0)
    claims: list[tuple[float, list[int]]] = []  # (when, what) each look into the database of the poll found
    claim = services.node_command_claim

    def watched_claim(**kwargs: Any) -> list[NodeCommand]:
        found = claim(**kwargs)
        claims.append((time.monotonic(), [c.pk for c in found]))
        return found

    monkeypatch.setattr(services, "node_command_claim", watched_claim)
    fleet = Fleet()
    got: list[Any] = []

    def poll() -> None:
        try:
            started = time.monotonic()  # the poll's deadline is later than started + wait_s
            r = fleet.client(fleet.key_a).get(POLL + f"?wait={wait_s}")
            got.append((r.status_code, r.json(), started, time.monotonic()))
        finally:
            connection.close()

    poller = threading.Thread(target=poll)
    poller.start()
    # The poll looked, found nothing, and waits (it read the wake-up marker before it looked).
    assert wait_for(lambda: claims, timeout=30, what="the poll to look for commands")[0][1] == []
    sent_at = time.monotonic()
    command = node_command_send(node=fleet.node_a, kind="diagnose", args={"what": "pcie"}, actor="test")
    poller.join(wait_s + 30)
    [(status, body, started, answered)] = got
    assert status == 200
    assert [c["id"] for c in body] == [command.pk]
    # Woken by the send: it looked again once, after the send and before its wait ran out.
    [(_, first), (looked_at, found)] = claims
    assert first == [] and found == [command.pk]
    assert started < sent_at < looked_at < started + wait_s, (started, sent_at, looked_at, answered)


def test_it_returns_nothing_after_waiting(fleet: Fleet) -> None:
    started = time.monotonic()
    assert fleet.client(fleet.key_a).get(POLL + "?wait=1").json() == []
    took = time.monotonic() - started
    assert 1.0 <= took < 30, took  # it waited its second; the upper bound only says it did not hang


def test_it_tells_an_agent_its_own_node_and_modules(fleet: Fleet, viewer_api: Any) -> None:
    r = fleet.client(fleet.key_a).get("/api/v1/agent/self/")
    assert r.status_code == 200
    body = r.json()
    assert body["node"]["hostname"] == "n-a"
    assert [(m["serial"], m["slot"], m["pcie_lanes"]) for m in body["modules"]] == [("A-0", 0, 4), ("A-1", 1, 4)]
    assert fleet.client(fleet.key_gw).get("/api/v1/agent/self/").status_code == 403
    assert viewer_api.get("/api/v1/agent/self/").status_code == 403


def test_it_shows_a_long_command_in_progress_and_then_its_hook_result(fleet: Fleet, viewer_api: Any,
                                                                        settings: Any) -> None:
    settings.TELEMETRY_COMMAND_REDELIVER_AFTER_S = 30
    command = node_command_send(node=fleet.node_a, kind="drain", args={"deadline": None}, actor="test")
    agent = fleet.client(fleet.key_a)
    assert [c["id"] for c in agent.get(POLL).json()] == [command.pk]
    progress = {"message": "drain running for 6 s", "running_s": 6.0,
                "hook": {"command": "/usr/local/bin/gw-drain", "timeout_s": 600}}
    r = agent.post(ack_url(command.pk), {"status": "in_progress", "result": progress}, format="json")
    assert r.status_code == 200 and r.json()["state"] == "in_progress" and r.json()["finished_at"] is None
    seen = viewer_api.get(f"/api/v1/node-commands/{command.pk}/").json()
    assert seen["state"] == "in_progress" and seen["result"] == progress and seen["progress_at"]

    # In progress and heard from: not redelivered, however long ago it was delivered.
    NodeCommand.objects.filter(pk=command.pk).update(delivered_at=timezone.now() - dt.timedelta(hours=1))
    assert agent.get(POLL).json() == []
    # Progress acks repeat while the hook runs; none of them is an audit record.
    assert agent.post(ack_url(command.pk), {"status": "in_progress", "result": progress},
                      format="json").status_code == 200
    assert not AuditEvent.objects.filter(action="node_command.finish").exists()

    final = {"message": "drain hook exited 0 in 41.2 s",
             "hook": {"command": "/usr/local/bin/gw-drain", "exit_code": 0, "timed_out": False, "timeout_s": 600,
                      "duration_s": 41.2, "output_tail": "removed n-a from the pool\n"}}
    r = agent.post(ack_url(command.pk), {"status": "succeeded", "result": final}, format="json")
    assert r.status_code == 200 and r.json()["state"] == "succeeded"
    seen = viewer_api.get(f"/api/v1/node-commands/{command.pk}/").json()
    assert seen["result"]["hook"]["output_tail"] == "removed n-a from the pool\n" and seen["finished_at"]
    # A progress ack that arrives late changes nothing; the audit has one record of the finish.
    late = agent.post(ack_url(command.pk), {"status": "in_progress", "result": progress}, format="json")
    assert late.status_code == 200 and late.json()["state"] == "succeeded"
    assert late.json()["result"] == final
    assert AuditEvent.objects.filter(action="node_command.finish").count() == 1


def test_it_redelivers_a_command_whose_agent_stopped_reporting_progress(fleet: Fleet, settings: Any) -> None:
    settings.TELEMETRY_COMMAND_REDELIVER_AFTER_S = 30
    command = node_command_send(node=fleet.node_a, kind="install_versions", args={}, actor="test")
    agent = fleet.client(fleet.key_a)
    agent.get(POLL)
    agent.post(ack_url(command.pk), {"status": "in_progress", "result": {}}, format="json")
    NodeCommand.objects.filter(pk=command.pk).update(progress_at=timezone.now() - dt.timedelta(seconds=31))
    assert [c["id"] for c in agent.get(POLL).json()] == [command.pk]  # the agent died running it
    assert NodeCommand.objects.get(pk=command.pk).state == "delivered"
