"""The production layout on one machine: two web processes on two ports, two workers, two beats,
two broadcasters and two writers against one PostgreSQL and Redis, a simulated fleet reporting.

- an action taken through web A reaches a websocket client of web B;
- with two beats a schedule fires once per period;
- the active broadcaster SIGKILLed, then a writer: frames resume from the standby within two
  lease times to live, samples keep being stored, and every accepted batch is stored exactly once.
(A leader paused past its lease: tests/dashboard/test_leases_live.py.)"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from django.db.models import Sum
from django.test import Client
from rest_framework.authtoken.models import Token
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from apps.accounts.services import user_ensure
from apps.common.events import EventType
from apps.common.leases import lease_holders
from apps.inventory.choices import NodeState
from apps.inventory.demo import seed_inventory_demo
from apps.inventory.models import Node
from apps.operations.demo import seed_operations_demo
from apps.telemetry.models import IngestBatch, NodeSample
from tests.dashboard.test_leases_live import beat_sends, proc_of_holder
from tests.live.stack import LiveStack, wait_for

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.django_db(transaction=True)]

TTL = 4.0
# The seeded nodes wait for the whole stack to start before their first report: a heartbeat
# timeout longer than that keeps them active meanwhile (the heartbeat's firing is what is measured).
ENV = {"LEASE_TTL_S": str(TTL), "NODE_HEARTBEAT_TIMEOUT_S": "600"}
HEARTBEAT = "apps.operations.tasks.nodes_heartbeat"


def _socket(url: str) -> ClientConnection:
    user_ensure(username="two-viewer", password="two-viewer-pw-1", role="viewer")
    client = Client()
    assert client.login(username="two-viewer", password="two-viewer-pw-1")
    return connect(url.replace("http://", "ws://") + "/ws/fleet/", origin=Origin(url), open_timeout=30,
                   additional_headers={"Cookie": f"sessionid={client.cookies['sessionid'].value}"})


def _next(ws: ClientConnection, want: Any, timeout: float) -> dict[str, Any]:
    """The first frame ``want(frame)`` accepts within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            frame = json.loads(ws.recv(timeout=min(left, 1.0)))
        except TimeoutError:
            continue
        if want(frame):
            return dict(frame)
    raise AssertionError(f"no such frame within {timeout:.0f} s")



def test_two_of_every_process_share_the_work_and_survive_losing_one(live_stack: LiveStack) -> None:
    made = seed_inventory_demo(racks=1)
    seed_operations_demo(activate=made["to_activate"])
    operator, _ = user_ensure(username="two-operator", password="two-operator-pw-1", role="operator")
    token = Token.objects.get_or_create(user=operator)[0].key

    live_stack.web(env=ENV)  # with the first writer
    url_a = live_stack.url
    writers = [p for p in live_stack.procs if p.name.startswith("writer")]
    writers.append(live_stack.writer(env=ENV))
    live_stack.web(env=ENV, writer=False)
    url_b = live_stack.url
    for _ in range(2):
        live_stack.worker(env=ENV)
    beats = [live_stack.beat(every={HEARTBEAT: 1}, only=[HEARTBEAT], env=ENV) for _ in range(2)]
    broadcasters = [live_stack.broadcaster(interval=0.5, env=ENV) for _ in range(2)]
    live_stack.url = url_a
    simulator = live_stack.simulator()
    wait_for(lambda: NodeSample.objects.exists(), timeout=120, what="the fleet's first samples stored")

    with _socket(url_b) as ws:
        # An action through web A reaches web B's client.
        node = wait_for(lambda: Node.objects.filter(state=NodeState.ACTIVE).order_by("pk").first(), timeout=60,
                        what="an active node")
        assert node is not None  # wait_for returns only a node it found; the type checker cannot tell
        answer = httpx.post(f"{url_a}/api/v1/nodes/{node.pk}/cordon/",  # the capacity floor: an override
                            json={"reason": "two of everything", "override": True},
                            headers={"Authorization": f"Token {token}"}, timeout=30)
        assert answer.status_code == 200, answer.text[:300]
        _next(ws, lambda f: f["type"] == EventType.NODE_STATE and f["data"].get("id") == node.pk, timeout=30)

        # Two beats, one firing: over five periods only one of them sent the schedule.
        wait_for(lambda: sum(beat_sends(b) for b in beats) >= 5, timeout=60, what="five fires of the heartbeat")
        assert sorted(beat_sends(b) > 0 for b in beats) == [False, True], [beat_sends(b) for b in beats]

        # The active broadcaster dies, then a writer: frames resume, samples keep being stored.
        holder = next(h.holder for h in lease_holders() if h.name == "broadcaster")
        assert holder
        active = proc_of_holder(broadcasters, holder)
        killed_at = time.monotonic()
        active.kill()
        writers[0].kill()
        frame = _next(ws, lambda f: f["type"] == EventType.SNAPSHOT and f["data"].get("by") not in (None, holder),
                      timeout=60)
        assert time.monotonic() - killed_at <= 2 * TTL + 1, "frames resumed later than two lease times to live"
        assert frame["data"]["by"] != holder
        stored = NodeSample.objects.count()
        wait_for(lambda: NodeSample.objects.count() > stored, timeout=60, what="samples stored by the other writer")

    # Nothing lost or doubled: with the fleet stopped, the surviving writer stores every accepted
    # batch, each batch's rows once.
    simulator.stop()
    live_stack.wait_stored(timeout=60)
    expected = IngestBatch.objects.aggregate(n=Sum("node_samples"))["n"]
    assert NodeSample.objects.count() == expected
