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
    IN_PROGRESS = "in_progress", "In progress on the agent"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown to the agent"
    EXPIRED = "expired", "Expired"


# States an agent may report in an ack, and the states that are final.
FINAL_ACK_STATES = (CommandState.SUCCEEDED, CommandState.FAILED, CommandState.UNKNOWN)
ACK_STATES = (CommandState.IN_PROGRESS, *FINAL_ACK_STATES)
FINAL_COMMAND_STATES = frozenset({*FINAL_ACK_STATES, CommandState.EXPIRED})
