"""Demo operations (idempotent): the demo's serving nodes activated through the node
lifecycle, and one autoscaler policy per serving tier, in dry run, so the decisions
show up at once and nothing scales until an operator turns dry run off."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.audit.choices import Source
from apps.inventory.choices import NodeState, TierKind
from apps.inventory.models import Node, Tier
from apps.operations import lifecycle
from apps.operations.models import AutoscalerPolicy
from apps.operations.scaling import policy_save

ACTOR = "seed_demo"
TARGETS = {TierKind.ACCESS_LOGIC: 3.0, TierKind.HYBRID_INFERENCE: 4.0}


@transaction.atomic
def seed_operations_demo(*, activate: list[str] | None = None) -> dict[str, Any]:
    """``activate``: hostnames of standby nodes the demo puts to work (those the inventory seed just made)."""
    activated = 0
    for pk in Node.objects.filter(hostname__in=activate or [], state=NodeState.STANDBY).values_list("pk", flat=True):
        lifecycle.node_activate(node=pk, actor=ACTOR, reason="demo: a serving node",
                                related=None, source=Source.SYSTEM)
        activated += 1
    created = 0
    for kind, target in TARGETS.items():
        tier = Tier.objects.filter(kind=kind).first()
        if tier is None or AutoscalerPolicy.objects.filter(tier=tier).exists():
            continue
        policy_save(policy=AutoscalerPolicy(tier=tier, target_queue_per_node=target, dry_run=True), actor=ACTOR,
                    created=True)
        created += 1
    return {"nodes_activated": activated, "autoscaler_policies_created": created}
