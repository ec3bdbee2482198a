"""Choice classes of the telemetry app."""

from django.db import models


class Stage(models.TextChoices):
    """The six stages of an agent request (docs/domain.md), in request order."""

    PERCEPTION = "perception", "Perception"
    INTENT = "intent", "Intent"
    PLANNING = "planning", "Planning"
    TOOL_CALL = "tool_call", "Tool call"
    GENERATION = "generation", "Generation"
    MEMORY_UPDATE = "memory_update", "Memory update"
