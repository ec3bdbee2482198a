from django.db import models


class ScopeKind(models.TextChoices):
    """Where a user may act: the whole fleet, some tiers (by kind) or some racks (by name).
    Reading is fleet-wide whatever the scope."""

    FLEET = "fleet", "Whole fleet"
    TIERS = "tiers", "Tiers"
    RACKS = "racks", "Racks"


class ListPage(models.TextChoices):
    """The list pages a user may keep a saved view of (filters and sort, as a query string)."""

    NODES = "nodes", "Nodes"
