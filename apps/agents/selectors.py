"""Reads of the agents app."""

from __future__ import annotations

from typing import Any

from apps.inventory.models import Node


def agent_self(*, node: Node) -> dict[str, Any]:
    """What a node agent needs to know about its own node: identity and modules in their slots."""
    modules = node.modules.select_related("module_type").order_by("slot")
    return {
        "node": {"id": node.pk, "hostname": node.hostname, "state": node.state, "tier": node.tier.kind},
        "modules": [
            {"serial": m.serial, "slot": m.slot, "module_type": str(m.module_type),
             "pcie_lanes": m.module_type.pcie_lanes, "state": m.state,
             "driver_version": m.driver_version, "framework_version": m.framework_version}
            for m in modules
        ],
    }
