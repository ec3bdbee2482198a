"""Demo autoscaler policies (idempotent): one per serving tier, in dry run, so the
decisions show up at once and nothing scales until an operator turns dry run off."""

from __future__ import annotations

from typing import Any

from apps.inventory.choices import TierKind
from apps.inventory.models import Tier
from apps.operations.models import AutoscalerPolicy
from apps.operations.services import policy_save

ACTOR = "seed_demo"
TARGETS = {TierKind.ACCESS_LOGIC: 3.0, TierKind.HYBRID_INFERENCE: 4.0}


def seed_operations_demo() -> dict[str, Any]:
    created = 0
    for kind, target in TARGETS.items():
        tier = Tier.objects.filter(kind=kind).first()
        if tier is None or AutoscalerPolicy.objects.filter(tier=tier).exists():
            continue
        policy_save(policy=AutoscalerPolicy(tier=tier, target_queue_per_node=target, dry_run=True), actor=ACTOR,
                    created=True)
        created += 1
    return {"autoscaler_policies_created": created}
