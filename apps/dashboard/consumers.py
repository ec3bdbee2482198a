"""Websocket consumers under /ws/. Authorised before accept(); narrow groups.

Async, because one web process fans a 1 Hz snapshot out to hundreds of
clients; the ORM is only reached through database_sync_to_async.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from apps.common.events import FLEET_GROUP, node_group, tier_group
from apps.common.metrics import WEBSOCKET_CLIENTS, WEBSOCKET_FRAMES
from apps.common.roles import VIEWER, has_role


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """/ws/fleet/, /ws/tiers/<id>/, /ws/nodes/<id>/: server pushes only.

    Every connection joins the fleet group (snapshot + fleet events) and the
    narrow group of the page it is on.
    """

    groups_joined: list[str]

    async def connect(self) -> None:
        user = self.scope.get("user")
        allowed = await database_sync_to_async(has_role)(user, VIEWER)
        if not allowed:
            await self.close(code=4403)
            return
        kwargs = self.scope["url_route"]["kwargs"]
        self.groups_joined = [FLEET_GROUP]
        if "tier_id" in kwargs:
            self.groups_joined.append(tier_group(int(kwargs["tier_id"])))
        if "node_id" in kwargs:
            self.groups_joined.append(node_group(int(kwargs["node_id"])))
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        WEBSOCKET_CLIENTS.inc()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "groups_joined", None):
            WEBSOCKET_CLIENTS.dec()
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "t": content.get("t")})

    async def push(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": message["event"], "data": message["data"], "sent_at": message["sent_at"]})

    async def push_text(self, message: dict[str, Any]) -> None:
        """A frame already encoded by the sender (events.send_now): sent as it is to every client."""
        await self.send(text_data=message["text"])
        WEBSOCKET_FRAMES.inc()
