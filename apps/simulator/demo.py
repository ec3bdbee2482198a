"""The whole demo, in order: the inventory's fleet and users, agent keys, the
serving nodes activated through the node lifecycle, autoscaler policies, the vector
suites and the gray pool.
Idempotent; ``manage.py seed_demo`` (run by ``make up``) calls it."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.inventory.demo import RACKS, seed_inventory_demo
from apps.operations.demo import seed_operations_demo
from apps.telemetry.demo import seed_telemetry_demo
from apps.vectors.demo import seed_vectors_demo


@transaction.atomic
def seed_demo(*, racks: int = RACKS) -> dict[str, Any]:
    result = seed_inventory_demo(racks=racks)
    seed_telemetry_demo()
    result.update(seed_operations_demo(activate=result.pop("to_activate")))
    result.update(seed_vectors_demo())
    return result
