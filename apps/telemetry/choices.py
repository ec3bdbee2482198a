"""Choice classes of the telemetry app."""

from django.db import models


class AgentKind(models.TextChoices):
    NODE = "node", "Node agent"
    GATEWAY = "gateway", "Gateway"


class Stage(models.TextChoices):
    """The six stages of an agent request (DOMAIN.md), in request order."""

    PERCEPTION = "perception", "Perception"
    INTENT = "intent", "Intent"
    PLANNING = "planning", "Planning"
    TOOL_CALL = "tool_call", "Tool call"
    GENERATION = "generation", "Generation"
    MEMORY_UPDATE = "memory_update", "Memory update"


class CommandState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown to the agent"
    EXPIRED = "expired", "Expired"


# States an agent may report in an ack, and the states that are final.
ACK_STATES = (CommandState.SUCCEEDED, CommandState.FAILED, CommandState.UNKNOWN)
FINAL_COMMAND_STATES = frozenset({*ACK_STATES, CommandState.EXPIRED})

COMMAND_STATE_COLOURS = {
    CommandState.PENDING: "#8a94a6",
    CommandState.DELIVERED: "#5b6ee1",
    CommandState.SUCCEEDED: "#2e9d5b",
    CommandState.FAILED: "#c0392b",
    CommandState.UNKNOWN: "#d9a400",
    CommandState.EXPIRED: "#444b57",
}
