"""A small fleet for live tests, created through the inventory services (committed rows)."""

from __future__ import annotations

from decimal import Decimal

from apps.audit.choices import Source
from apps.inventory import services
from apps.inventory.choices import FormFactor, NodeState, TierKind
from apps.inventory.models import Module, ModuleType, Node, Rack, Tier
from apps.operations import lifecycle


def tiers() -> dict[str, Tier]:
    out = {}
    for level, kind in enumerate([TierKind.ACCESS_LOGIC, TierKind.HYBRID_INFERENCE, TierKind.EXTERNAL_LARGE_MODEL], 1):
        out[kind.value], _ = Tier.objects.get_or_create(kind=kind, defaults={"name": kind.label, "level": level})
    return out


def make_node(hostname: str, *, tier: str = TierKind.HYBRID_INFERENCE, modules: int = 1, slot: int = 1,
              state: str = NodeState.ACTIVE, rack: str = "rack-t") -> Node:
    t = tiers()
    rack_obj, _ = Rack.objects.get_or_create(name=rack)
    node = services.inventory_create(
        instance=Node(hostname=hostname, rack=rack_obj, slot=slot, tier=t[tier], state=NodeState.STANDBY,
                      cpu_cores=16, cpu_clock_ghz=Decimal("3.20")),
        actor="test", source=Source.SYSTEM)
    if state == NodeState.ACTIVE:  # put to work the way any node is: through the lifecycle
        lifecycle.node_activate(node=node.pk, actor="test", reason="test fleet", related=None)
        node.refresh_from_db()
    mtype, _ = ModuleType.objects.get_or_create(vendor="Axon", model="AX-40", defaults={
        "form_factor": FormFactor.M2, "int8_tops": Decimal("40"), "power_w": 10, "pcie_lanes": 4})
    for i in range(modules):
        services.inventory_create(
            instance=Module(serial=f"{hostname}-m{i}", module_type=mtype, node=node, slot=i,
                            driver_version="2.3.1", framework_version="1.18.0"),
            actor="test", source=Source.SYSTEM)
    return node
