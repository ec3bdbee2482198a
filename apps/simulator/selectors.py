"""Reads of the simulator: faults, and the fleet as the engine sees it."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from apps.inventory.models import ExternalEndpoint, Module, Node
from apps.simulator.models import Fault
from apps.simulator.specs import EndpointSpec, FaultSpec, ModuleSpec, NodeSpec


def fault_list() -> QuerySet[Fault]:
    return Fault.objects.select_related("node", "combination__driver", "combination__framework",
                                        "combination__module_type")


def active_faults() -> list[FaultSpec]:
    out = []
    for f in fault_list().filter(enabled=True):
        out.append(FaultSpec(
            kind=f.kind,
            node=f.node.hostname if f.node is not None else None,
            params=dict(f.params or {}),
            started_at=f.started_at.timestamp() if f.started_at else 0.0,
        ))
    return out


def fleet_specs() -> list[NodeSpec]:
    """Every node with its modules, in the engine's terms (3 queries)."""
    modules = Module.objects.select_related("module_type").order_by("slot")
    nodes = Node.objects.select_related("tier").prefetch_related(Prefetch("modules", queryset=modules))
    out = []
    for node in nodes.order_by("hostname"):
        out.append(NodeSpec(
            hostname=node.hostname,
            tier=node.tier.kind,
            state=node.state,
            cpu_cores=node.cpu_cores,
            cpu_clock_ghz=float(node.cpu_clock_ghz),
            pcie_lanes=node.pcie_lanes,
            modules=tuple(
                ModuleSpec(serial=m.serial, state=m.state, slot=m.slot if m.slot is not None else 0,
                           driver_version=m.driver_version, framework_version=m.framework_version,
                           module_type=f"{m.module_type.vendor} {m.module_type.model}",
                           lanes=m.module_type.pcie_lanes, tops=float(m.module_type.int8_tops),
                           power_w=float(m.module_type.power_w))
                for m in node.modules.all()
            ),
        ))
    return out


def endpoint_specs() -> list[EndpointSpec]:
    """The enabled external endpoints the gateway sends large-model requests to."""
    return [EndpointSpec(name=name, quota_rpm=rpm, quota_tpm=tpm) for name, rpm, tpm in
            ExternalEndpoint.objects.filter(enabled=True).order_by("name").values_list(
                "name", "quota_requests_per_min", "quota_tokens_per_min")]


def world() -> tuple[list[NodeSpec], list[FaultSpec], list[EndpointSpec]]:
    """What the engine needs each tick: the fleet, the faults switched on and the external endpoints."""
    return fleet_specs(), active_faults(), endpoint_specs()
