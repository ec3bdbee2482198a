"""The fleet inventory: racks, tiers, nodes, module types, modules, releases,
version combinations (pins), tier-3 endpoints and the admission rule settings.

Invariants live in ``clean()`` (via ``apps.inventory.admission``, which is handed
what it judges) so the admin,
the browser and the API enforce the same rules; state changes happen in
``services.py``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.inventory.admission import Findings, check_module, check_node, rule_settings
from apps.inventory.choices import (
    CombinationState,
    EndpointKind,
    Enforcement,
    FormFactor,
    ModuleCapability,
    ModuleState,
    NicKind,
    NodeState,
    RuleCode,
    TierKind,
)


def _labels_valid(value: Any) -> None:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError('labels must be an object of string keys and string values, e.g. {"zone": "a"}')


class Rack(models.Model):
    name = models.CharField(max_length=64, unique=True)
    row = models.CharField(max_length=32, blank=True, default="")
    position = models.PositiveIntegerField(default=0, help_text="Position of the rack in its row")
    power_budget_w = models.PositiveIntegerField(
        default=6000, validators=[MinValueValidator(1)], help_text="Power the rack may draw, in watts"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Tier(models.Model):
    kind = models.CharField(max_length=32, choices=TierKind.choices, unique=True)
    name = models.CharField(max_length=64, unique=True)
    level = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(3)])
    min_active_nodes = models.PositiveIntegerField(default=0)
    max_active_nodes = models.PositiveIntegerField(default=1000)
    description = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["level"]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_active_nodes__lte=models.F("max_active_nodes")),
                name="tier_min_le_max",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.min_active_nodes > self.max_active_nodes:
            raise ValidationError(
                {
                    "min_active_nodes": f"minimum {self.min_active_nodes} is above the maximum "
                    f"{self.max_active_nodes}"
                }
            )


class Node(models.Model):
    hostname = models.CharField(max_length=128, unique=True)
    rack = models.ForeignKey(Rack, on_delete=models.PROTECT, related_name="nodes")
    slot = models.PositiveIntegerField(help_text="Slot (unit) of the node in its rack")
    tier = models.ForeignKey(Tier, on_delete=models.PROTECT, related_name="nodes")
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.STANDBY)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    unreachable_from = models.CharField(
        max_length=16, choices=NodeState.choices, blank=True, default="", editable=False,
        help_text="While unreachable: the state the node returns to when its reports resume")

    cpu_model = models.CharField(max_length=128, blank=True, default="")
    cpu_cores = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    cpu_clock_ghz = models.DecimalField(
        max_digits=4, decimal_places=2, default=Decimal("3.00"),
        validators=[MinValueValidator(Decimal("0.10"))],
    )
    l3_cache_mb = models.PositiveIntegerField(default=32)
    memory_gb = models.PositiveIntegerField(default=64, validators=[MinValueValidator(1)])
    memory_channels = models.PositiveIntegerField(default=8, validators=[MinValueValidator(1)])
    ecc_memory = models.BooleanField(default=True)
    pcie_lanes = models.PositiveIntegerField(default=16, help_text="PCIe lanes the board gives its module slots")
    nic_kind = models.CharField(max_length=16, choices=NicKind.choices, default=NicKind.ROCE_V2)
    nic_speed_gbps = models.PositiveIntegerField(default=100)
    cpu_power_w = models.PositiveIntegerField(default=65, help_text="Node draw without its modules, in watts")
    power_budget_w = models.PositiveIntegerField(default=150, validators=[MinValueValidator(1)])
    omp_num_threads = models.PositiveIntegerField(null=True, blank=True)
    mkl_num_threads = models.PositiveIntegerField(null=True, blank=True)
    isolated_cores = models.CharField(
        max_length=64, blank=True, default="", help_text="Cores for backups/cron/log rotation, e.g. 0-1"
    )
    gray = models.BooleanField(
        default=False, editable=False,
        help_text="In the gray pool: a standby or maintenance node kept for validating version combinations, "
                  "never serving, never a scale-up candidate (set through the node lifecycle)")
    labels = models.JSONField(default=dict, blank=True, validators=[_labels_valid])
    # Soft admission findings, recomputed by services after every change.
    warnings = models.JSONField(default=list, blank=True, editable=False)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    agent_version = models.CharField(
        max_length=40, blank=True, default="", db_default="", editable=False,
        help_text="The version its node agent says it is (User-Agent cp-agent/VERSION); empty until it says")
    agent_contract = models.PositiveSmallIntegerField(
        null=True, blank=True, editable=False,
        help_text="The newest wire contract its agent speaks (its X-Agent-Contract header); null: it does not say")

    class Meta:
        ordering = ["hostname"]
        constraints = [models.UniqueConstraint(fields=["rack", "slot"], name="node_rack_slot_unique")]
        indexes = [models.Index(fields=["tier", "state"]), models.Index(fields=["state"])]

    def __str__(self) -> str:
        return self.hostname

    def installed_modules(self, *, exclude_pk: int | None = None) -> list[Module]:
        if not self.pk:
            return []
        qs = self.modules.select_related("module_type")
        if exclude_pk:
            qs = qs.exclude(pk=exclude_pk)
        return list(qs)

    def admission(self) -> Findings:
        """The admission rules on this node as it is now (hard errors and soft warnings)."""
        return check_node(self, installed=self.installed_modules(), settings=AdmissionRule.current())

    def clean(self) -> None:
        self.admission().raise_hard()


def all_capabilities() -> list[str]:
    """What a module type reports, by default everything (health checks use only what it declares)."""
    return list(ModuleCapability.values)


def _capabilities_valid(value: Any) -> None:
    if not isinstance(value, list) or not all(v in ModuleCapability.values for v in value):
        raise ValidationError(f"capabilities must be a list of {', '.join(ModuleCapability.values)}")


class ModuleType(models.Model):
    vendor = models.CharField(max_length=64)
    model = models.CharField(max_length=64)
    form_factor = models.CharField(max_length=16, choices=FormFactor.choices)
    int8_tops = models.DecimalField(max_digits=6, decimal_places=1, validators=[MinValueValidator(Decimal("0.1"))])
    power_w = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    pcie_lanes = models.PositiveIntegerField(default=4)
    capabilities = models.JSONField(
        default=all_capabilities, blank=True, validators=[_capabilities_valid],
        help_text="What the module reports: ecc, link_width, temperature, power, errors. Health checks of a "
                  "capability the type lacks are not run for its modules.")

    class Meta:
        ordering = ["vendor", "model"]
        constraints = [models.UniqueConstraint(fields=["vendor", "model"], name="module_type_unique")]

    def __str__(self) -> str:
        return f"{self.vendor} {self.model}"


class Module(models.Model):
    serial = models.CharField(max_length=64, unique=True)
    module_type = models.ForeignKey(ModuleType, on_delete=models.PROTECT, related_name="modules")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="modules", null=True, blank=True)
    slot = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(3)],
        help_text="Module slot on the node, 0-3",
    )
    state = models.CharField(max_length=16, choices=ModuleState.choices, default=ModuleState.HEALTHY)
    driver_version = models.CharField(max_length=64, blank=True, default="")
    framework_version = models.CharField(max_length=64, blank=True, default="")
    firmware_version = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["serial"]
        constraints = [
            models.UniqueConstraint(fields=["node", "slot"], name="module_node_slot_unique"),
            models.CheckConstraint(condition=Q(slot__lte=3), name="module_slot_max_3"),
            models.CheckConstraint(
                condition=Q(node__isnull=True) | Q(slot__isnull=False), name="module_in_node_has_slot"
            ),
        ]
        indexes = [models.Index(fields=["driver_version", "framework_version"])]

    def __str__(self) -> str:
        return self.serial

    def admission(self) -> Findings:
        """The admission rules on this module where it is placed (its slot, its node's limits)."""
        node = self.node if self.node_id else None
        others = node.installed_modules(exclude_pk=self.pk) if node is not None else []
        return check_module(self, node=node, others=others, settings=AdmissionRule.current())

    def clean(self) -> None:
        self.admission().raise_hard()


class DriverRelease(models.Model):
    vendor = models.CharField(max_length=64)
    version = models.CharField(max_length=64)
    released_on = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["vendor", "version"]
        constraints = [models.UniqueConstraint(fields=["vendor", "version"], name="driver_release_unique")]

    def __str__(self) -> str:
        return f"{self.vendor} driver {self.version}"


class FrameworkRelease(models.Model):
    name = models.CharField(max_length=64)
    version = models.CharField(max_length=64)
    released_on = models.DateField(null=True, blank=True)
    notes = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["name", "version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="framework_release_unique")]

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


class VersionCombination(models.Model):
    module_type = models.ForeignKey(ModuleType, on_delete=models.PROTECT, related_name="combinations")
    driver = models.ForeignKey(DriverRelease, on_delete=models.PROTECT, related_name="combinations")
    framework = models.ForeignKey(FrameworkRelease, on_delete=models.PROTECT, related_name="combinations")
    state = models.CharField(max_length=16, choices=CombinationState.choices, default=CombinationState.CANDIDATE)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    suspect = models.BooleanField(
        default=False, help_text="A version-regression check failed on modules running it: for an operator to "
                                 "decide (a flag beside the state, cleared by hand)")
    suspect_reason = models.TextField(blank=True, default="")
    notes = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["module_type", "-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["module_type", "driver", "framework"], name="combination_unique"),
            models.UniqueConstraint(
                fields=["module_type"],
                condition=Q(state=CombinationState.PINNED),
                name="one_pinned_combination_per_module_type",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.module_type}: driver {self.driver.version} + {self.framework}"


class ExternalEndpoint(models.Model):
    """Tier 3 holds endpoints (a GPU cluster or a cloud model API), not nodes."""

    name = models.CharField(max_length=64, unique=True)
    tier = models.ForeignKey(Tier, on_delete=models.PROTECT, related_name="endpoints")
    kind = models.CharField(max_length=16, choices=EndpointKind.choices)
    url = models.URLField(max_length=300)
    model = models.CharField(max_length=128)
    quota_requests_per_min = models.PositiveIntegerField(default=600)
    quota_tokens_per_min = models.PositiveIntegerField(default=1_000_000)
    latency_slo_ms = models.PositiveIntegerField(
        default=5000, validators=[MinValueValidator(1)],
        help_text="Latency objective: the p95 of its requests (ms) should stay at or below this")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.tier_id and self.tier.kind != TierKind.EXTERNAL_LARGE_MODEL:
            raise ValidationError({"tier": f"endpoints belong to the external large model tier, not {self.tier}"})


class AdmissionRule(models.Model):
    """Settings of the soft admission rules: threshold and whether to reject."""

    code = models.CharField(max_length=32, choices=RuleCode.choices, unique=True)
    enforcement = models.CharField(max_length=8, choices=Enforcement.choices, default=Enforcement.WARN)
    threshold = models.DecimalField(
        max_digits=8, decimal_places=2, null=True, blank=True,
        help_text="cpu_clock: minimum GHz; module_tops: minimum INT8 TOPS; others use node fields",
    )

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return f"{self.get_code_display()} ({self.enforcement})"

    @classmethod
    def current(cls) -> dict[str, tuple[str, Decimal | None]]:
        """Each rule's (enforcement, threshold), defaults filled in."""
        return rule_settings(cls.objects.values_list("code", "enforcement", "threshold"))
