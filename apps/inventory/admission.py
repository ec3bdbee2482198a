"""Admission checks from DOMAIN.md, in one place.

Hard rules always reject: a node without ECC memory in a serving state, a
fifth module on a node, two modules in one slot.  Soft rules produce warnings
stored on the node; an admin can make any of them reject the change
(``AdmissionRule.enforcement``).  Messages name the field and the numbers.

Model ``clean()`` calls these, so the admin, the browser and the API (whose
serializers run ``full_clean()``) apply the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError

from apps.inventory.choices import (
    MAX_MODULES_PER_NODE,
    SERVING_STATES,
    Enforcement,
    NodeState,
    RuleCode,
    TierKind,
)

if TYPE_CHECKING:
    from apps.inventory.models import Module, ModuleType, Node

DEFAULT_THRESHOLDS = {
    RuleCode.CPU_CLOCK: Decimal("3.0"),
    RuleCode.MODULE_TOPS: Decimal("30"),
}


@dataclass
class Findings:
    errors: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def error(self, field_name: str, message: str) -> None:
        self.errors.setdefault(field_name, []).append(message)

    def raise_hard(self) -> None:
        if self.errors:
            raise ValidationError(self.errors)


def rule_settings() -> dict[str, tuple[str, Decimal | None]]:
    from apps.inventory.models import AdmissionRule

    out: dict[str, tuple[str, Decimal | None]] = {
        code: (Enforcement.WARN, DEFAULT_THRESHOLDS.get(RuleCode(code))) for code in RuleCode.values
    }
    for rule in AdmissionRule.objects.all():
        out[rule.code] = (rule.enforcement, rule.threshold if rule.threshold is not None else out[rule.code][1])
    return out


def _soft(findings: Findings, settings: dict[str, tuple[str, Decimal | None]], code: str,
          field_name: str, message: str) -> None:
    if settings[code][0] == Enforcement.REJECT:
        findings.error(field_name, message)
    else:
        findings.warnings.append({"rule": code, "field": field_name, "message": message})


def _fmt(value: Decimal | float | int) -> str:
    return f"{Decimal(value).normalize():f}"


def evaluate(node: Node, modules: Iterable[tuple[ModuleType, int | None]],
             *, module_field: str | None = None) -> Findings:
    """Evaluate every rule for ``node`` carrying ``modules`` (type, slot) pairs.

    ``module_field``: report soft-rule rejections on this field (a module
    change) instead of the node field the rule is about.
    """
    findings = Findings()
    mods = list(modules)
    settings = rule_settings()
    name = node.hostname or "(new node)"

    if node.state in SERVING_STATES and not node.ecc_memory:
        findings.error(
            "ecc_memory",
            f"node {name} has no ECC memory and cannot be {NodeState(node.state).label.lower()}; "
            "non-ECC memory crashes long-running services",
        )

    lanes = sum(t.pcie_lanes for t, _ in mods)
    if mods and lanes > node.pcie_lanes:
        _soft(findings, settings, RuleCode.PCIE_LANES, module_field or "pcie_lanes",
              f"modules need {lanes} PCIe lanes; node {name} provides {node.pcie_lanes} "
              "(some modules will train at reduced link width)")

    power = node.cpu_power_w + sum(t.power_w for t, _ in mods)
    if power > node.power_budget_w:
        _soft(findings, settings, RuleCode.POWER_BUDGET, module_field or "power_budget_w",
              f"node {name} draws {power} W with its modules ({node.cpu_power_w} W node + "
              f"{power - node.cpu_power_w} W modules); budget is {node.power_budget_w} W")

    tier = node.tier if node.tier_id else None
    min_clock = settings[RuleCode.CPU_CLOCK][1]
    if tier is not None and tier.kind == TierKind.ACCESS_LOGIC and min_clock is not None \
            and Decimal(node.cpu_clock_ghz) < min_clock:
        _soft(findings, settings, RuleCode.CPU_CLOCK, "cpu_clock_ghz",
              f"access & logic node {name} runs at {_fmt(node.cpu_clock_ghz)} GHz; "
              f"at least {_fmt(min_clock)} GHz is recommended")

    min_tops = settings[RuleCode.MODULE_TOPS][1]
    if tier is not None and tier.kind == TierKind.HYBRID_INFERENCE and min_tops is not None:
        for mtype, slot in mods:
            if Decimal(mtype.int8_tops) < min_tops:
                where = f" in slot {slot}" if slot is not None else ""
                _soft(findings, settings, RuleCode.MODULE_TOPS, module_field or "tier",
                      f"module type {mtype}{where} gives {_fmt(mtype.int8_tops)} INT8 TOPS; "
                      f"the hybrid tier needs at least {_fmt(min_tops)}")
    return findings


def _installed(node: Node, exclude_pk: int | None = None) -> list[Module]:
    if not node.pk:
        return []
    qs = node.modules.select_related("module_type")
    if exclude_pk:
        qs = qs.exclude(pk=exclude_pk)
    return list(qs)


def check_node(node: Node) -> Findings:
    return evaluate(node, [(m.module_type, m.slot) for m in _installed(node)])


def check_module(module: Module) -> Findings:
    if module.node_id is None:
        findings = Findings()
        if module.slot is not None:
            findings.error("slot", "a module outside a node has no slot")
        return findings
    node = module.node
    assert node is not None
    others = _installed(node, exclude_pk=module.pk)
    findings = Findings()
    if len(others) >= MAX_MODULES_PER_NODE:
        findings.error("node", f"node {node.hostname} already holds {len(others)} modules; "
                               f"the maximum is {MAX_MODULES_PER_NODE}")
    if module.slot is None:
        findings.error("slot", f"a module on node {node.hostname} needs a slot (0-3)")
    else:
        taken = next((m for m in others if m.slot == module.slot), None)
        if taken is not None:
            findings.error("slot", f"slot {module.slot} of node {node.hostname} is taken by module {taken.serial}")
    if module.module_type_id is None:
        return findings
    soft = evaluate(node, [(m.module_type, m.slot) for m in others] + [(module.module_type, module.slot)],
                    module_field="node")
    soft.errors.pop("ecc_memory", None)  # a node-level rule; reported on node changes
    for k, v in soft.errors.items():
        for msg in v:
            findings.error(k, msg)
    findings.warnings = soft.warnings
    return findings
