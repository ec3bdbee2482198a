from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.health.advisor import advice
from apps.health.checks import CHECKS
from apps.health.choices import Policy
from apps.health.models import Finding, Silence


class CheckSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(read_only=True)
    title = serializers.CharField(read_only=True)
    subject = serializers.CharField(read_only=True, help_text="node, module or tier")
    evidence = serializers.CharField(read_only=True, help_text="Where its numbers come from (latest state, rollups)")
    severity = serializers.CharField(read_only=True)
    capability = serializers.CharField(read_only=True, allow_null=True,
                                       help_text="The module type capability it needs, if any")
    defaults = serializers.DictField(read_only=True)
    params = serializers.DictField(help_text="Its parameters now (defaults with the changes); PATCH merges")
    policy = serializers.ChoiceField(choices=Policy.choices)
    enabled = serializers.BooleanField()
    raise_n = serializers.IntegerField(min_value=1, max_value=20, help_text="Raise on N failing of the last M")
    raise_m = serializers.IntegerField(min_value=1, max_value=20)
    clear_k = serializers.IntegerField(min_value=1, max_value=100, help_text="Resolve after K passes in a row")


class CheckPatchSerializer(serializers.Serializer[Any]):
    params = serializers.DictField(required=False)
    policy = serializers.ChoiceField(choices=Policy.choices, required=False)
    enabled = serializers.BooleanField(required=False)
    raise_n = serializers.IntegerField(min_value=1, max_value=20, required=False)
    raise_m = serializers.IntegerField(min_value=1, max_value=20, required=False)
    clear_k = serializers.IntegerField(min_value=1, max_value=100, required=False)


class AdviceSerializer(serializers.Serializer[Any]):
    rank = serializers.IntegerField()
    cause = serializers.CharField()
    confirm = serializers.CharField()
    remedy = serializers.CharField()
    link = serializers.CharField()


class FindingSerializer(serializers.ModelSerializer[Finding]):
    check = serializers.CharField(source="check_name")
    node_hostname = serializers.CharField(source="node.hostname", default=None)
    module_serial = serializers.CharField(source="module.serial", default=None)
    tier_name = serializers.CharField(source="tier.name", default=None)
    advice = serializers.SerializerMethodField()

    class Meta:
        model = Finding
        fields = ["id", "check", "subject_kind", "subject_key", "node", "node_hostname", "module", "module_serial",
                  "tier", "tier_name", "state", "severity", "status", "summary", "evidence", "first_seen",
                  "last_seen", "resolved_at", "acknowledged_at", "acknowledged_by_name", "acknowledge_reason",
                  "reopened", "flapping", "action", "holds", "advice"]
        read_only_fields = fields

    @extend_schema_field(AdviceSerializer(many=True))
    def get_advice(self, obj: Finding) -> list[dict[str, Any]]:
        return advice(obj.check_name, node_id=obj.node_id, tier_id=obj.tier_id)


class AcknowledgeSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(help_text="What you are doing about it")


class BreakerResetSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(help_text="What tripped the breaker and what was found or fixed")


class SilenceSerializer(serializers.ModelSerializer[Silence]):
    check = serializers.ChoiceField(
        source="check_name", choices=["", *CHECKS], required=False, default="",
        help_text="A check's name; empty: every check",
        error_messages={"invalid_choice": f"no check {{input!r}} (known: {', '.join(CHECKS)})"})

    class Meta:
        model = Silence
        fields = ["id", "check", "node", "tier", "reason", "expires_at", "created_at", "created_by_name"]
        read_only_fields = ["id", "created_at", "created_by_name"]
