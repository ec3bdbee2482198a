"""The broadcaster: each tick pushes the fleet snapshot to websocket clients, and
pushes what changed since the last tick (node state, drain progress, audit) to
the narrow group of the node concerned."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.utils import timezone

from apps.agents.services import agent_token_issue
from apps.common.events import FLEET_GROUP
from apps.dashboard.broadcaster import Broadcaster
from apps.inventory.choices import TierKind
from apps.operations.lifecycle import node_drain
from apps.telemetry.ingest.receive import telemetry_ingest
from controlplane.asgi import application
from tests.agent.fleet import make_node
from tests.dashboard.test_consumers import _headers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.anyio]


async def _socket(path: str, user: User) -> WebsocketCommunicator:
    headers = await database_sync_to_async(_headers)(user)
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    return comm


async def _until(comm: WebsocketCommunicator, event: str, timeout: float = 5) -> dict[str, Any]:
    """The next frame of type ``event`` (skipping others)."""
    while True:
        msg = await comm.receive_json_from(timeout=timeout)
        if msg["type"] == event:
            return dict(msg)


def _post_telemetry(node_hostname: str, batch_id: str) -> None:
    from apps.inventory.models import Node

    node = Node.objects.get(hostname=node_hostname)
    now = timezone.now().replace(microsecond=0)
    node_token, _ = agent_token_issue(kind="node", node=node, actor="test")
    gateway, _ = agent_token_issue(kind="gateway", node=None, actor="test")
    module = node.modules.first()
    assert module is not None
    telemetry_ingest(token=node_token, payload={"batch_id": batch_id + "-n", "node_samples": [
        {"time": now.isoformat(), "node": node.hostname, "cpu_util": 0.42, "mem_util": 0.3, "load1": 1.0,
         "in_flight": 3, "threads": 40, "modules": [
             {"serial": module.serial, "util": 0.55, "temp_c": 61.0, "power_w": 9.5, "link_width": 2,
              "link_width_expected": 4, "ecc_corrected": 1, "ecc_uncorrected": 0, "errors": 0}]}]})
    telemetry_ingest(token=gateway, payload={"batch_id": batch_id, "tier_samples": [
        {"time": now.isoformat(), "tier": TierKind.HYBRID_INFERENCE, "queue_depth": 17, "arrivals": 300,
         "completions": 290, "window_s": 10}],
        "stage_samples": [{"time": now.isoformat(), "tier": TierKind.HYBRID_INFERENCE, "stage": stage,
                           "window_s": 10, "count": 100, "p50_ms": 10.0 * (i + 1), "p95_ms": 20.0 * (i + 1),
                           "p99_ms": 30.0 * (i + 1), "max_ms": 40.0 * (i + 1)}
                          for i, stage in enumerate(["perception", "intent", "planning", "tool_call", "generation",
                                                     "memory_update"])]})


async def test_it_pushes_a_snapshot_that_reflects_the_newest_batch(viewer_user: User) -> None:
    await database_sync_to_async(make_node)("n-b-01", modules=1, slot=1)
    await database_sync_to_async(_post_telemetry)("n-b-01", "batch-0001")
    comm = await _socket("/ws/fleet/", viewer_user)
    broadcaster = Broadcaster()
    sent = await database_sync_to_async(broadcaster.tick)()
    assert (FLEET_GROUP, "fleet.snapshot") in sent
    msg = await _until(comm, "fleet.snapshot")
    snap = msg["data"]
    assert "batch-0001" in snap["ingest"]["recent_batches"]
    hybrid = next(t for t in snap["tiers"] if t["kind"] == TierKind.HYBRID_INFERENCE)
    assert hybrid["queue_depth"] == 17 and hybrid["requests_per_s"] == 30.0
    assert hybrid["cpu_util"] == 0.42 and hybrid["module_util"] == 0.55 and hybrid["active"] == 1
    assert [s["stage"] for s in hybrid["stages"]][:2] == ["perception", "intent"]
    assert hybrid["stages"][4]["p95_ms"] == 100.0
    row = dict(zip(snap["node_fields"], snap["nodes"][0], strict=True))
    assert row["hostname"] == "n-b-01" and row["temp_c"] == 61.0 and row["in_flight"] == 3
    # the frame is plain JSON: times are ISO strings
    assert dt.datetime.fromisoformat(snap["time"]) <= timezone.now()
    await comm.disconnect()


async def test_it_pushes_a_drain_to_the_node_page_as_it_commits(viewer_user: User, operator_user: User) -> None:
    node = await database_sync_to_async(make_node)("n-b-02", modules=1, slot=2)
    other = await database_sync_to_async(make_node)("n-b-03", modules=1, slot=3)
    mine = await _socket(f"/ws/nodes/{node.pk}/", viewer_user)
    theirs = await _socket(f"/ws/nodes/{other.pk}/", viewer_user)
    broadcaster = Broadcaster()
    await database_sync_to_async(broadcaster.tick)()  # the baseline: only a snapshot
    await _until(mine, "fleet.snapshot")
    await _until(theirs, "fleet.snapshot")

    await database_sync_to_async(node_drain)(node=node, reason="bad DIMM", actor=operator_user)
    # The lifecycle publishes the state change itself when it commits; the broadcaster adds the
    # drain's progress and the audit record.
    state = await _until(mine, "node.state")
    sent = await database_sync_to_async(broadcaster.tick)()
    assert (FLEET_GROUP, "node.state") not in sent and (f"node.{node.pk}", "drain.progress") in sent
    assert state["data"]["id"] == node.pk
    assert state["data"]["state"] == "draining" and state["data"]["previous"] == "active"
    progress = await _until(mine, "drain.progress")
    assert progress["data"]["reason"] == "bad DIMM"
    assert "waiting for" in progress["data"]["waiting_for"]
    audit = await _until(mine, "audit.event")
    assert audit["data"]["reason"] == "bad DIMM"
    # the other node's page gets the fleet-wide news (state, audit) once, not the drain's progress
    seen = []
    while not await theirs.receive_nothing(timeout=0.3):
        seen.append(await theirs.receive_json_from())
    assert [m["data"]["id"] for m in seen if m["type"] == "node.state"] == [node.pk]
    assert not [m for m in seen if m["type"] == "drain.progress"]

    # nothing changed: the next tick pushes the snapshot only
    sent = await database_sync_to_async(broadcaster.tick)()
    assert [e for _, e in sent] == ["fleet.snapshot"]
    await mine.disconnect()
    await theirs.disconnect()



async def test_it_pushes_a_scale_request_to_the_tier_page(viewer_user: User, operator_user: User) -> None:
    from apps.inventory.choices import NodeState
    from apps.operations.scaling import tier_scale

    await database_sync_to_async(make_node)("n-b-10", tier=TierKind.ACCESS_LOGIC, modules=0, slot=10)
    spare = await database_sync_to_async(make_node)("n-b-11", tier=TierKind.ACCESS_LOGIC, modules=0, slot=11,
                                                     state=NodeState.STANDBY)
    tier_page = await _socket(f"/ws/tiers/{spare.tier_id}/", viewer_user)
    broadcaster = Broadcaster()
    await database_sync_to_async(broadcaster.tick)()
    await _until(tier_page, "fleet.snapshot")

    await database_sync_to_async(tier_scale)(tier=spare.tier, desired=2, actor=operator_user, reason="peak")
    sent = await database_sync_to_async(broadcaster.tick)()
    assert (f"tier.{spare.tier_id}", "scale.decision") in sent
    frames = []
    while not await tier_page.receive_nothing(timeout=0.5):
        frames.append(await tier_page.receive_json_from())
    scale = [f["data"] for f in frames if f["type"] == "scale.decision"]
    assert scale and scale[0]["desired"] == 2 and scale[0]["reason"] == "peak"
    states = [f["data"] for f in frames if f["type"] == "node.state"]
    assert [(s["hostname"], s["state"]) for s in states] == [("n-b-11", "active")]
    await tier_page.disconnect()


COUNTS = ["total", "active", "standby", "cordoned", "draining", "drained", "maintenance", "unreachable", "failed",
          "held", "out", "serving", "reporting", "serving_modules", "by_state"]


def _fleet_in_every_state() -> None:
    from apps.operations import lifecycle

    nodes = [make_node(f"n-c-{i:02d}", modules=1, slot=i + 1) for i in range(6)]
    lifecycle.node_cordon(node=nodes[1], reason="look", actor="alice")
    lifecycle.node_drain(node=nodes[2], reason="fix", actor="alice")
    lifecycle.node_maintenance_enter(node=nodes[3], reason="fw", actor="alice")
    lifecycle.node_mark_failed(node=nodes[4], reason="PSU", actor="health")
    make_node("n-c-10", modules=0, slot=11, tier=TierKind.ACCESS_LOGIC, state="standby")
    _post_telemetry("n-c-00", "batch-count-01")


async def test_it_counts_the_fleet_alike_in_the_rest_snapshot_and_a_websocket_frame(viewer_user: User) -> None:
    from rest_framework.test import APIClient

    await database_sync_to_async(_fleet_in_every_state)()
    comm = await _socket("/ws/fleet/", viewer_user)
    await database_sync_to_async(Broadcaster().tick)()
    frame = (await _until(comm, "fleet.snapshot"))["data"]

    def rest() -> dict[str, Any]:
        client = APIClient()
        client.force_authenticate(viewer_user)
        return dict(client.get("/api/v1/fleet/snapshot/").json())

    body = await database_sync_to_async(rest)()
    pushed = {t["kind"]: {k: t[k] for k in COUNTS} for t in frame["tiers"]}
    served = {t["kind"]: {k: t[k] for k in COUNTS} for t in body["tiers"]}
    assert pushed == served
    hybrid = served[TierKind.HYBRID_INFERENCE]
    assert (hybrid["active"], hybrid["cordoned"], hybrid["draining"], hybrid["maintenance"], hybrid["failed"]) == \
        (2, 1, 2, 0, 1)  # maintenance on an active node drains it first
    assert hybrid["held"] == 3 and hybrid["out"] == 1 and hybrid["serving"] == 5 and hybrid["reporting"] == 1
    assert served[TierKind.ACCESS_LOGIC]["standby"] == 1
    await comm.disconnect()
