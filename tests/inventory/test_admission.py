"""Admission rules, enforced the same way whatever the entry point (model full_clean)."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from apps.inventory import services
from apps.inventory.choices import Enforcement, NodeState, RuleCode, TierKind
from apps.inventory.models import AdmissionRule, Module, ModuleType, Node, Rack, Tier
from apps.operations import lifecycle

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(db):  # type: ignore[no-untyped-def]
    rack = Rack.objects.create(name="r1")
    hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    mtype = ModuleType.objects.create(vendor="V", model="M", form_factor="m2", int8_tops=Decimal("40"),
                                      power_w=10, pcie_lanes=4)
    node = Node.objects.create(hostname="n-r1-07", rack=rack, slot=7, tier=hybrid, pcie_lanes=8)
    return {"rack": rack, "tier": hybrid, "type": mtype, "node": node}


def _module(fleet, serial, slot):  # type: ignore[no-untyped-def]
    return services.inventory_create(
        instance=Module(serial=serial, module_type=fleet["type"], node=fleet["node"], slot=slot), actor="t")


def test_it_warns_when_modules_oversubscribe_lanes(fleet):  # type: ignore[no-untyped-def]
    _module(fleet, "a", 0)
    _module(fleet, "b", 1)
    _module(fleet, "c", 2)
    fleet["node"].refresh_from_db()
    assert fleet["node"].warnings == [{
        "rule": "pcie_lanes", "field": "pcie_lanes",
        "message": "modules need 12 PCIe lanes; node n-r1-07 provides 8 "
                   "(some modules will train at reduced link width)",
    }]


def test_it_rejects_lanes_when_rule_made_hard(fleet):  # type: ignore[no-untyped-def]
    AdmissionRule.objects.filter(code=RuleCode.PCIE_LANES).update(enforcement=Enforcement.REJECT)
    _module(fleet, "a", 0)
    _module(fleet, "b", 1)
    with pytest.raises(ValidationError) as exc:
        _module(fleet, "c", 2)
    assert "modules need 12 PCIe lanes; node n-r1-07 provides 8" in str(exc.value)
    assert Module.objects.count() == 2


def test_it_rejects_fifth_module_and_taken_slot(fleet):  # type: ignore[no-untyped-def]
    fleet["node"].pcie_lanes = 64
    fleet["node"].save()
    for i in range(4):
        _module(fleet, f"m{i}", i)
    with pytest.raises(ValidationError) as exc:
        _module(fleet, "m5", 3)
    assert "already holds 4 modules; the maximum is 4" in str(exc.value)
    assert "slot 3 of node n-r1-07 is taken by module m3" in str(exc.value)


def test_it_rejects_non_ecc_node_activation(fleet):  # type: ignore[no-untyped-def]
    node = fleet["node"]
    Node.objects.filter(pk=node.pk).update(ecc_memory=False)
    node.refresh_from_db()
    with pytest.raises(ValidationError) as exc:
        lifecycle.node_activate(node=node.pk, actor="t", reason="scale up", related=None)
    assert "has no ECC memory" in str(exc.value)
    node.refresh_from_db()
    assert node.state == NodeState.STANDBY
