"""Live events for the browser: websocket groups, event types, and pushing to
them, only after the change commits. Any layer may publish (a state change in
the lifecycle, a finding in health); the dashboard's consumers deliver.

Delivery is at-most-once: browsers re-fetch the snapshot over REST when they
reconnect, so a lost message never leaves a stale screen.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

log = logging.getLogger(__name__)

FLEET_GROUP = "fleet"


def tier_group(tier_id: int) -> str:
    return f"tier.{tier_id}"


def node_group(node_id: int) -> str:
    return f"node.{node_id}"


class EventType:
    SNAPSHOT = "fleet.snapshot"
    NODE_STATE = "node.state"
    MODULE_STATE = "module.state"
    DRAIN_PROGRESS = "drain.progress"
    SCALE_DECISION = "scale.decision"
    AUTOSCALER_DECISION = "autoscaler.decision"
    AUDIT = "audit.event"
    BROADCAST_HEALTH = "broadcast.health"
    HEALTH_FINDING = "health.finding"


def send_now(group: str, event_type: str, data: dict[str, Any]) -> None:
    """Push now. The frame is JSON-encoded once here, not once per client in the web process."""
    layer = get_channel_layer()
    if layer is None:
        return
    frame = json.dumps({"type": event_type, "data": data, "sent_at": time.time()}, separators=(",", ":"),
                       cls=DjangoJSONEncoder)
    message = {"type": "push.text", "text": frame}
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # a broadcast must never break the change it reports
        log.exception("could not push %s to %s", event_type, group)


def publish(event_type: str, data: dict[str, Any], *, groups: list[str]) -> None:
    """Send ``event_type`` to ``groups`` once the current transaction commits."""

    def _send() -> None:
        for group in groups:
            send_now(group, event_type, data)

    transaction.on_commit(_send)
