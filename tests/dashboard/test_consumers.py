"""The live websocket: authorised before accept, narrow groups, pushes after commit."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from apps.common.events import FLEET_GROUP, node_group, send_now
from controlplane.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.anyio]


def _headers(user: User | None) -> list[tuple[bytes, bytes]]:
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if user is not None:
        client = Client()
        client.force_login(user)
        cookie = client.cookies["sessionid"].value
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    return headers


async def _connect(path: str, user: User | None) -> tuple[WebsocketCommunicator, Any]:
    comm = WebsocketCommunicator(application, path, headers=_headers(user))
    connected = await comm.connect(timeout=5)
    return comm, connected


async def test_it_refuses_anonymous_before_accept() -> None:
    comm, (connected, code) = await _connect("/ws/fleet/", None)
    assert connected is False
    assert code == 4403
    await comm.disconnect()


async def test_it_refuses_a_user_without_role() -> None:
    from channels.db import database_sync_to_async as sync_to_async

    nobody = await sync_to_async(User.objects.create_user)("nobody", password="x")
    headers = await sync_to_async(_headers)(nobody)
    comm = WebsocketCommunicator(application, "/ws/fleet/", headers=headers)
    connected, code = await comm.connect(timeout=5)
    assert connected is False
    await comm.disconnect()


async def test_it_pushes_fleet_and_node_events_to_a_viewer(viewer_user: User) -> None:
    from channels.db import database_sync_to_async as sync_to_async

    headers = await sync_to_async(_headers)(viewer_user)
    comm = WebsocketCommunicator(application, "/ws/nodes/7/", headers=headers)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    await sync_to_async(send_now)(FLEET_GROUP, "fleet.snapshot", {"tiers": []})
    msg = await comm.receive_json_from(timeout=5)
    assert msg["type"] == "fleet.snapshot"
    assert msg["data"] == {"tiers": []}
    await sync_to_async(send_now)(node_group(7), "node.state", {"node": 7, "state": "draining"})
    msg = await comm.receive_json_from(timeout=5)
    assert msg == {"type": "node.state", "data": {"node": 7, "state": "draining"}, "sent_at": msg["sent_at"]}
    # another node's events do not reach this page
    await sync_to_async(send_now)(node_group(8), "node.state", {"node": 8, "state": "draining"})
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()


async def test_it_answers_ping(viewer_user: User) -> None:
    from channels.db import database_sync_to_async as sync_to_async

    headers = await sync_to_async(_headers)(viewer_user)
    comm = WebsocketCommunicator(application, "/ws/fleet/", headers=headers)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    await comm.send_json_to({"type": "ping", "t": 42})
    assert await comm.receive_json_from(timeout=5) == {"type": "pong", "t": 42}
    await comm.disconnect()


async def test_a_quiet_socket_stays_open_and_still_gets_events(viewer_user: User) -> None:
    """A page whose groups say nothing for longer than the channel layer's blocking read (5 s)
    keeps its socket: the wait for the next message must not end in a Redis read timeout."""
    from channels.db import database_sync_to_async as sync_to_async

    headers = await sync_to_async(_headers)(viewer_user)
    comm = WebsocketCommunicator(application, "/ws/nodes/7/", headers=headers)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    assert await comm.receive_nothing(timeout=12, interval=0.5)  # two blocking reads of the layer go by
    await sync_to_async(send_now)(node_group(7), "node.state", {"node": 7, "state": "cordoned"})
    msg = await comm.receive_json_from(timeout=5)
    assert msg["data"] == {"node": 7, "state": "cordoned"}
    await comm.disconnect()
