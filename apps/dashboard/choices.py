"""Websocket groups and event types pushed to them."""

FLEET_GROUP = "fleet"


def tier_group(tier_id: int) -> str:
    return f"tier.{tier_id}"


def node_group(node_id: int) -> str:
    return f"node.{node_id}"


class EventType:
    SNAPSHOT = "fleet.snapshot"
    NODE_STATE = "node.state"
    DRAIN_PROGRESS = "drain.progress"
    SCALE_DECISION = "scale.decision"
    AUTOSCALER_DECISION = "autoscaler.decision"
    AUDIT = "audit.event"
