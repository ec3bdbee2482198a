"""Admission checks (docs/domain.md, "Node rules"), in one place.

Hard rules always reject: a node without ECC memory in a serving state, a
fifth module on a node, two modules in one slot.  Soft rules produce warnings
stored on the node; an admin can make any of them reject the change
(``AdmissionRule.enforcement``).  Messages name the field and the numbers.

Model ``clean()`` calls these (through ``Node.admission()`` and
``Module.admission()``, which read the installed modules and the rule settings
and hand them in), so the admin, the browser and the API (whose serializers run
``full_clean()``) apply the same rules. Nothing here reads the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from django.core.exceptions import ValidationError

from apps.inventory.choices import (
    MAX_MODULES_PER_NODE,
    SERVING_STATES,
    Enforcement,
    NodeState,
    RuleCode,
    TierKind,
)


# What the rules read of a tier, a node, a module type and a module (the inventory's models have these).
class TierFacts(Protocol):
    @property
    def kind(self) -> str: ...


class NodeFacts(Protocol):
    @property
    def hostname(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def ecc_memory(self) -> bool: ...
    @property
    def pcie_lanes(self) -> int: ...
    @property
    def cpu_power_w(self) -> int: ...
    @property
    def power_budget_w(self) -> int: ...
    @property
    def cpu_clock_ghz(self) -> Decimal: ...
    @property
    def tier_id(self) -> int | None: ...
    @property
    def tier(self) -> TierFacts: ...


class ModuleTypeFacts(Protocol):
    @property
    def pcie_lanes(self) -> int: ...
    @property
    def power_w(self) -> int: ...
    @property
    def int8_tops(self) -> Decimal: ...


class ModuleFacts(Protocol):
    @property
    def serial(self) -> str: ...
    @property
    def slot(self) -> int | None: ...
    @property
    def module_type(self) -> ModuleTypeFacts: ...


class PlacedModuleFacts(ModuleFacts, Protocol):
    @property
    def node_id(self) -> int | None: ...
    @property
    def module_type_id(self) -> int | None: ...


RuleSettings = dict[str, tuple[str, Decimal | None]]

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


def rule_settings(rules: Iterable[tuple[str, str, Decimal | None]]) -> RuleSettings:
    """Each rule's (enforcement, threshold): the stored ``(code, enforcement, threshold)`` rows over
    the defaults."""
    out: RuleSettings = {
        code: (Enforcement.WARN, DEFAULT_THRESHOLDS.get(RuleCode(code))) for code in RuleCode.values
    }
    for code, enforcement, threshold in rules:
        out[code] = (enforcement, threshold if threshold is not None else out[code][1])
    return out


def _soft(findings: Findings, settings: RuleSettings, code: str,
          field_name: str, message: str) -> None:
    if settings[code][0] == Enforcement.REJECT:
        findings.error(field_name, message)
    else:
        findings.warnings.append({"rule": code, "field": field_name, "message": message})


def _fmt(value: Decimal | float | int) -> str:
    return f"{Decimal(value).normalize():f}"


def evaluate(node: NodeFacts, modules: Iterable[tuple[ModuleTypeFacts, int | None]],
             *, settings: RuleSettings, module_field: str | None = None) -> Findings:
    """Evaluate every rule for ``node`` carrying ``modules`` (type, slot) pairs.

    ``module_field``: report soft-rule rejections on this field (a module
    change) instead of the node field the rule is about.
    """
    findings = Findings()
    mods = list(modules)
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


def check_node(node: NodeFacts, *, installed: Sequence[ModuleFacts], settings: RuleSettings) -> Findings:
    """Every rule for ``node`` carrying its ``installed`` modules."""
    return evaluate(node, [(m.module_type, m.slot) for m in installed], settings=settings)


def check_module(module: PlacedModuleFacts, *, node: NodeFacts | None, others: Sequence[ModuleFacts],
                 settings: RuleSettings) -> Findings:
    """Every rule for ``module`` placed on ``node`` beside the node's ``others`` modules."""
    if module.node_id is None or node is None:
        findings = Findings()
        if module.slot is not None:
            findings.error("slot", "a module outside a node has no slot")
        return findings
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
                    settings=settings, module_field="node")
    soft.errors.pop("ecc_memory", None)  # a node-level rule; reported on node changes
    for k, v in soft.errors.items():
        for msg in v:
            findings.error(k, msg)
    findings.warnings = soft.warnings
    return findings
