"""API shapes of the inventory.

Serializers check shapes, types and references; the services
(``apps.inventory.services``) run the model's ``full_clean()`` (admission
rules, uniqueness) and write the audit record, so the API enforces what the
admin and the pages enforce.  References are ids, or the natural key
operators use: a rack by name, a tier by kind, a node by hostname.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.common.errors import MISSING
from apps.common.serializers import storable
from apps.inventory.choices import CombinationState, ModuleCapability
from apps.inventory.models import (
    DriverRelease,
    ExternalEndpoint,
    FrameworkRelease,
    Module,
    ModuleType,
    Node,
    Rack,
    Tier,
    VersionCombination,
)

_MAX_ID = 2**63 - 1


class RefField(serializers.PrimaryKeyRelatedField):  # type: ignore[type-arg]
    """A reference given as an id, or as the natural key named by ``natural_key``.

    An unknown reference (well formed, naming no object) is an error on this field that says what was
    looked for, with the code that makes it a 404 (``apps.common.errors.MISSING``).
    """

    def __init__(self, *, natural_key: str | None = None, **kwargs: Any) -> None:
        self.natural_key = natural_key
        super().__init__(**kwargs)

    def get_queryset(self) -> QuerySet[Any]:
        queryset = super().get_queryset()
        assert queryset is not None, "a RefField needs a queryset"
        return queryset

    def _what(self) -> str:
        name = self.get_queryset().model._meta.verbose_name
        return f"{name} id or {self.natural_key}" if self.natural_key else f"{name} id"

    def to_internal_value(self, data: Any) -> Model:
        queryset = self.get_queryset()
        model_name = queryset.model._meta.verbose_name
        if isinstance(data, bool) or not isinstance(data, (int, str)):
            raise serializers.ValidationError(
                f"expected a {self._what()}, got {type(data).__name__}")
        if isinstance(data, str) and not storable(data):  # no stored key holds it: an unknown reference
            raise serializers.ValidationError(f"unknown {model_name}: no {model_name} has this "
                                              f"{'id or ' + self.natural_key if self.natural_key else 'id'}",
                                              code=MISSING)
        if isinstance(data, str) and len(data) > 200:
            raise serializers.ValidationError(f"expected a {self._what()}: at most 200 characters")
        obj = None
        if isinstance(data, str) and self.natural_key:
            obj = queryset.filter(**{self.natural_key: data}).first()
        if obj is None:
            text = str(data).strip()
            if text.isdigit() and 0 < int(text) <= _MAX_ID:
                obj = queryset.filter(pk=int(text)).first()
        if obj is None:
            raise serializers.ValidationError(f"unknown {model_name} {data!r}: no {model_name} has this "
                                              f"{'id or ' + self.natural_key if self.natural_key else 'id'}",
                                              code=MISSING)
        return obj  # type: ignore[no-any-return]


class RefFieldSchema(OpenApiSerializerFieldExtension):
    """Requests may send an id or a natural key; responses always carry the id."""

    target_class = RefField

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        field: RefField = self.target
        schema: dict[str, Any] = {"type": "integer"}
        if direction == "request" and field.natural_key:  # ("" is no key: DRF reads it as null)
            schema = {"oneOf": [{"type": "integer"}, {"type": "string", "minLength": 1, "maxLength": 200}],
                      "description": f"{field.get_queryset().model._meta.verbose_name} id or "
                                     f"{field.natural_key}"}
        if field.allow_null:
            schema["nullable"] = True
        return schema


class AdmissionWarningSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A soft admission finding: the rule, the field it is about, and why."""

    rule = serializers.CharField()
    field = serializers.CharField()
    message = serializers.CharField()


@extend_schema_field({"type": "object", "additionalProperties": {"type": "string", "pattern": "^[^\\x00]*$"},
                      "description": 'Labels: string keys and string values, e.g. {"zone": "a"} (no NUL characters)'})
class LabelsField(serializers.JSONField):
    """A node's labels (a JSON object of strings: ``_labels_ok``), typed in the schema."""


def _labels_ok(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise serializers.ValidationError('labels must be an object of string keys and string values, '
                                          'e.g. {"zone": "a"}')
    if any("\x00" in k or "\x00" in v for k, v in value.items()):
        raise serializers.ValidationError("labels cannot contain NUL characters")
    return value


class RackSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    node_count = serializers.IntegerField(read_only=True, help_text="Nodes in the rack")

    class Meta:
        model = Rack
        fields = ["id", "name", "row", "position", "power_budget_w", "node_count", "created_at", "updated_at"]


class TierSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Tier
        fields = ["id", "kind", "name", "level", "min_active_nodes", "max_active_nodes", "description"]
        read_only_fields = ["kind", "level"]
        validators: list[Any] = []


class NodeSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    rack = RefField(natural_key="name", queryset=Rack.objects.all())
    rack_name = serializers.CharField(source="rack.name", read_only=True)
    tier = RefField(natural_key="kind", queryset=Tier.objects.all())
    tier_kind = serializers.CharField(source="tier.kind", read_only=True)
    tier_name = serializers.CharField(source="tier.name", read_only=True)
    labels = LabelsField(required=False)
    warnings = AdmissionWarningSerializer(many=True, read_only=True,
                                          help_text="Soft admission findings, recomputed after every change")
    module_count = serializers.IntegerField(read_only=True, help_text="Modules installed in the node")
    allowed_actions = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="The actions the node's state accepts (POST /api/v1/nodes/{id}/<action>/; "
                  "maintenance-leave is /maintenance/leave/); who holds the node and the tier's floor "
                  "can still refuse one")

    class Meta:
        model = Node
        fields = [
            "id", "hostname", "rack", "rack_name", "slot", "tier", "tier_kind", "tier_name", "state",
            "state_changed_at",
            "cpu_model", "cpu_cores", "cpu_clock_ghz", "l3_cache_mb", "memory_gb", "memory_channels",
            "ecc_memory", "pcie_lanes", "nic_kind", "nic_speed_gbps", "cpu_power_w", "power_budget_w",
            "omp_num_threads", "mkl_num_threads", "isolated_cores", "labels", "warnings", "module_count",
            "allowed_actions", "agent_version", "agent_contract", "created_at", "updated_at",
        ]
        read_only_fields = ["state_changed_at"]
        extra_kwargs = {"state": {"help_text": "Where a new node starts (standby or maintenance); read-only after "
                                               "that: the node's actions change it (/api/v1/nodes/{id}/cordon/, "
                                               "/drain/, /uncordon/, /maintenance/, tier scaling)"}}
        validators: list[Any] = []  # (rack, slot) uniqueness: the model's full_clean says it in plain words

    def validate_labels(self, value: Any) -> dict[str, str]:
        return _labels_ok(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        instance = self.instance
        rack = attrs.get("rack", getattr(instance, "rack", None))
        slot = attrs.get("slot", getattr(instance, "slot", None))
        if rack is not None and slot is not None:
            taken = Node.objects.filter(rack=rack, slot=slot)
            if instance is not None:
                taken = taken.exclude(pk=instance.pk)
            hostname = taken.values_list("hostname", flat=True).first()
            if hostname is not None:
                raise serializers.ValidationError({"slot": f"slot {slot} of rack {rack} is taken by node {hostname}"})
        return attrs


class ModuleTypeSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    capabilities = serializers.ListField(
        child=serializers.ChoiceField(choices=ModuleCapability.choices), required=False,
        help_text=f"What the module reports: {', '.join(ModuleCapability.values)}. Health checks of a capability "
                  f"the type lacks are not run for its modules.")

    class Meta:
        model = ModuleType
        fields = ["id", "vendor", "model", "form_factor", "int8_tops", "power_w", "pcie_lanes", "capabilities"]
        validators: list[Any] = []


class ModuleSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    module_type = RefField(queryset=ModuleType.objects.all())
    node = RefField(natural_key="hostname", queryset=Node.objects.all(), allow_null=True, required=False)
    node_hostname = serializers.CharField(source="node.hostname", read_only=True, allow_null=True)
    pinned_driver = serializers.CharField(read_only=True, allow_null=True,
                                          help_text="Driver version of the type's pinned combination")
    pinned_framework = serializers.CharField(read_only=True, allow_null=True,
                                             help_text="Framework version of the type's pinned combination")
    drift = serializers.BooleanField(read_only=True,
                                     help_text="True when driver or framework differs from the type's pin")
    allowed_actions = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="The actions the module's state accepts: POST /api/v1/modules/{id}/<action>/")

    class Meta:
        model = Module
        fields = [
            "id", "serial", "module_type", "node", "node_hostname", "slot", "state", "driver_version",
            "framework_version", "firmware_version", "pinned_driver", "pinned_framework", "drift",
            "allowed_actions", "created_at", "updated_at",
        ]
        extra_kwargs = {"state": {"help_text": "Where a new module starts (healthy, degraded or failed); read-only "
                                               "after that: /api/v1/modules/{id}/quarantine/ and /release/"}}
        validators: list[Any] = []  # (node, slot): the admission rules name the module holding the slot


class DriverReleaseSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = DriverRelease
        fields = ["id", "vendor", "version", "released_on", "notes"]
        validators: list[Any] = []


class FrameworkReleaseSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = FrameworkRelease
        fields = ["id", "name", "version", "released_on", "notes"]
        validators: list[Any] = []


class VersionCombinationSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A driver + framework combination for a module type. It starts as a
    candidate; its state moves only through ``set-state``."""

    module_type = RefField(queryset=ModuleType.objects.all())
    driver = RefField(queryset=DriverRelease.objects.all())
    framework = RefField(queryset=FrameworkRelease.objects.all())
    driver_version = serializers.CharField(source="driver.version", read_only=True)
    framework_name = serializers.CharField(source="framework.name", read_only=True)
    framework_version = serializers.CharField(source="framework.version", read_only=True)

    class Meta:
        model = VersionCombination
        fields = ["id", "module_type", "driver", "driver_version", "framework", "framework_name",
                  "framework_version", "state", "state_changed_at", "suspect", "suspect_reason", "notes",
                  "created_at"]
        read_only_fields = ["state", "state_changed_at"]
        validators: list[Any] = []


class VersionCombinationUpdateSerializer(VersionCombinationSerializer):
    """Updates change the notes and the suspect flag only: another driver or framework is another combination."""

    module_type = serializers.IntegerField(source="module_type_id", read_only=True)  # type: ignore[assignment]
    driver = serializers.IntegerField(source="driver_id", read_only=True)  # type: ignore[assignment]
    framework = serializers.IntegerField(source="framework_id", read_only=True)  # type: ignore[assignment]


class CombinationSetStateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    state = serializers.ChoiceField(choices=CombinationState.choices,
                                    help_text="validated, pinned (only from validated; demotes the previous pin), "
                                              "blocked, ...")
    reason = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")


class ExternalEndpointSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    tier = RefField(natural_key="kind", queryset=Tier.objects.all())

    class Meta:
        model = ExternalEndpoint
        fields = ["id", "name", "tier", "kind", "url", "model", "quota_requests_per_min", "quota_tokens_per_min",
                  "latency_slo_ms", "enabled"]
        validators: list[Any] = []


class NodeBulkSerializer(serializers.Serializer):  # type: ignore[type-arg]
    items = NodeSerializer(many=True, allow_empty=False, max_length=1000)  # type: ignore[call-arg]


class ModuleBulkSerializer(serializers.Serializer):  # type: ignore[type-arg]
    items = ModuleSerializer(many=True, allow_empty=False, max_length=1000)  # type: ignore[call-arg]


class NodeBulkResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    created = serializers.IntegerField()
    items = NodeSerializer(many=True)


class ModuleBulkResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    created = serializers.IntegerField()
    items = ModuleSerializer(many=True)
