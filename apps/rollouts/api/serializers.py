from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.common.serializers import ErrorSerializer
from apps.inventory.models import ModuleType, Node, Rack, Tier, VersionCombination
from apps.rollouts import selectors
from apps.rollouts.choices import OnFailure
from apps.rollouts.gates import OVERRIDABLE_GATES
from apps.rollouts.models import Rollout, RolloutNode
from apps.rollouts.planner import PlanError, canary_text, parse_canary, parse_max_unavailable
from apps.vectors.models import Suite

# What the planner reads (``_nodes_or_percentage``), as the schema states it: a percentage above 0 and at
# most 100; for max_unavailable, or a number of nodes (1-999999).
_PCT = r"(?:100(?:\.0+)?|[1-9]\d?(?:\.\d+)?|0\.\d*[1-9]\d*)%"
PERCENTAGE = rf"^{_PCT}$"
MAX_UNAVAILABLE = rf"^(?:[1-9]\d{{0,5}}|{_PCT})$"


@extend_schema_field({"oneOf": [{"type": "integer", "minimum": 1, "maximum": 999999},
                                {"type": "string", "pattern": PERCENTAGE}],
                      "description": "Canary per tier in scope: a number of nodes (1) or a percentage of the tier's "
                                     "nodes in scope ('10%', rounded up, at least 1)"})
class CanaryField(serializers.Field):  # type: ignore[type-arg]
    """``n`` (nodes per tier) or ``"10%"`` (of each tier's nodes in scope); 400 naming ``canary`` otherwise."""

    def to_internal_value(self, data: Any) -> int | str:
        try:
            parse_canary(data)
        except PlanError as exc:
            raise serializers.ValidationError(exc.message) from exc
        text = canary_text(data)
        return text if text.endswith("%") else int(text)

    def to_representation(self, value: Any) -> int | str:
        text = str(value)
        return text if text.endswith("%") else int(text)


class RolloutInputSerializer(serializers.Serializer[Any]):
    """A preview or a create: the combination, its scope and the strategy."""

    combination = serializers.PrimaryKeyRelatedField(
        queryset=VersionCombination.objects.select_related("module_type", "driver", "framework"))
    module_type = serializers.PrimaryKeyRelatedField(queryset=ModuleType.objects.all())
    tiers = serializers.PrimaryKeyRelatedField(queryset=Tier.objects.all(), many=True, required=False)
    racks = serializers.PrimaryKeyRelatedField(queryset=Rack.objects.all(), many=True, required=False)
    nodes = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all(), many=True, required=False)
    suite = serializers.PrimaryKeyRelatedField(queryset=Suite.objects.all(), required=False, allow_null=True,
                                               help_text="Default: the suite that validated the combination")
    canary = CanaryField(default=1)
    wave_size = serializers.IntegerField(min_value=1, max_value=10000, default=4)
    max_unavailable = serializers.RegexField(
        MAX_UNAVAILABLE, max_length=16, default="25%",
        error_messages={"invalid": "a number of nodes (1-999999) or a percentage above 0 and at most 100, like '25%%'"},
        help_text="'25%' of a tier's active nodes, or a number; never past the capacity floor")
    bake_s = serializers.IntegerField(min_value=0, max_value=7 * 86400, default=600)
    on_failure = serializers.ChoiceField(choices=OnFailure.choices, default=OnFailure.ROLLBACK)
    cohort_tolerance_pct = serializers.IntegerField(
        min_value=0, max_value=1000, default=20,
        help_text="Cohort gate: the upgraded nodes' per-stage p95 and error rate within this % of the rest's")
    max_failures = serializers.IntegerField(min_value=1, max_value=10000, default=3,
                                            help_text="Circuit breaker: stop after this many failed nodes")
    drain_deadline_s = serializers.IntegerField(min_value=10, max_value=86400, default=900)
    install_timeout_s = serializers.IntegerField(min_value=10, max_value=86400, default=600)
    vectors_timeout_s = serializers.IntegerField(min_value=10, max_value=86400, default=600)
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")

    def validate_max_unavailable(self, value: str) -> str:
        try:
            parse_max_unavailable(value)
        except PlanError as exc:
            raise serializers.ValidationError(exc.message) from exc
        return value


class RolloutCreateSerializer(RolloutInputSerializer):
    reason = serializers.CharField(max_length=2000, help_text="Why: recorded with the rollout and every step")
    override = serializers.ListField(
        child=serializers.ChoiceField(choices=OVERRIDABLE_GATES), required=False, default=list, max_length=10,
        help_text="Failing dry-run gates to start past, by name (the reason says why); without it a failing gate "
                  "is a 409 naming it, and overriding a gate that passes is a 400")

    def validate_reason(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("say why the rollout starts")
        return value


class RolloutSerializer(serializers.ModelSerializer[Rollout]):
    canary = CanaryField(read_only=True)
    combination_name = serializers.CharField(source="combination.__str__", read_only=True)
    module_type_name = serializers.CharField(source="module_type.__str__", read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Rollout
        fields = ["id", "combination", "combination_name", "module_type", "module_type_name", "suite", "scope",
                  "canary", "wave_size", "max_unavailable", "bake_s", "on_failure", "cohort_tolerance_pct",
                  "max_failures", "drain_deadline_s", "install_timeout_s", "vectors_timeout_s", "state", "current_wave",
                  "wave_count", "wave_finished_at", "reason", "overrides", "message", "waiting_for", "waiting_until",
                  "plan", "gates", "progress", "created_by_name", "created_at", "started_at", "finished_at"]
        read_only_fields = fields

    def get_progress(self, obj: Rollout) -> dict[str, Any]:
        return selectors.progress(obj)


class RolloutNodeSerializer(serializers.ModelSerializer[RolloutNode]):
    hostname = serializers.CharField(source="node.hostname", read_only=True)
    tier = serializers.IntegerField(source="node.tier_id", read_only=True)
    node_state = serializers.CharField(source="node.state", read_only=True)

    class Meta:
        model = RolloutNode
        fields = ["id", "node", "hostname", "tier", "node_state", "wave", "serving", "step", "rollback_phase",
                  "failure_kind", "needs_hand", "hold", "reason", "waiting_for", "modules", "lkg_driver",
                  "lkg_framework", "install_command", "restore_command", "vector_run", "started_at",
                  "step_changed_at", "finished_at"]
        read_only_fields = fields


class ControlInputSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class PreviewSerializer(serializers.Serializer[Any]):
    combination = serializers.IntegerField()
    module_type = serializers.IntegerField()
    target = serializers.DictField(child=serializers.CharField())
    suite = serializers.IntegerField(allow_null=True)
    waves = serializers.ListField(child=serializers.DictField(),
                                  help_text="index, canary, nodes (node, hostname, tier, serving, from, to) and "
                                            "capacity per tier (active_before, out, active_during, need, floor, ok)")
    skipped = serializers.ListField(child=serializers.DictField(), help_text="node, hostname, reason")
    tiers = serializers.ListField(child=serializers.DictField())
    pinned = serializers.DictField(child=serializers.CharField(), allow_null=True,
                                   help_text="The module type's pinned driver and framework, if any")
    gates = serializers.DictField(help_text="Each gate evaluated now on the current fleet (a dry run): ok, detail, "
                                            "overridable (an operator may start past it, naming it in override)")
    failing = serializers.ListField(child=serializers.CharField(),
                                    help_text="The gates that fail now: a start needs each overridden, or is a 409")
    window = serializers.DictField(
        help_text="The change window that governs the canary's start: actor, allowed (now), why (naming the window "
                  "or freeze), window (the one it is inside), governing (every window that governs it), freeze (id), "
                  "until (when it may start, or when its window closes)")


class RolloutConflictSerializer(ErrorSerializer):
    detail = serializers.CharField()
    field = serializers.CharField(required=False)
    state = serializers.CharField(required=False)
    rollout = serializers.IntegerField(required=False)
    gates = serializers.ListField(child=serializers.CharField(), required=False,
                                  help_text="The failing dry-run gates a start did not override")


class CohortSerializer(serializers.Serializer[Any]):
    nodes = serializers.IntegerField()
    points = serializers.ListField(child=serializers.DictField(),
                                   help_text="minute, p95_ms per stage, error_rate over all stages")


class CohortLatencySerializer(serializers.Serializer[Any]):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    tolerance_pct = serializers.IntegerField()
    cohorts = serializers.DictField(child=CohortSerializer(), help_text="upgraded and control")
    gate = serializers.DictField(allow_null=True, help_text="The newest cohort gate's evidence")
