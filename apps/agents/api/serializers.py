"""API shapes of the agents app: the command channel, agent keys and an agent's own node."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.agents.choices import ACK_STATES, AgentKind
from apps.agents.models import AgentToken, NodeCommand
from apps.agents.services import MAX_ROTATION_OVERLAP_S
from apps.inventory.models import Node

# ---- command channel --------------------------------------------------------------------------


class AgentCommandSerializer(serializers.ModelSerializer):
    class Meta:
        model = NodeCommand
        fields = ["id", "kind", "args", "created_at"]


class CommandAckSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=[(s.value, s.label) for s in ACK_STATES])
    result = serializers.JSONField(required=False, default=dict)


class NodeCommandSerializer(serializers.ModelSerializer):
    node_hostname = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = NodeCommand
        fields = ["id", "node", "node_hostname", "kind", "args", "reason", "state", "created_at",
                  "created_by_name", "expires_at", "delivered_at", "progress_at", "finished_at", "result"]
        read_only_fields = ["state", "created_at", "created_by_name", "delivered_at", "progress_at", "finished_at",
                            "result"]
        extra_kwargs = {"reason": {"required": False}, "expires_at": {"required": False}}

    def validate_kind(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank")
        return value.strip()

    def validate_args(self, value: object) -> object:
        if not isinstance(value, dict):
            raise serializers.ValidationError('must be a JSON object, e.g. {"deadline_s": 300}')
        return value


# ---- agent keys -----------------------------------------------------------------------------------


class AgentTokenSerializer(serializers.ModelSerializer):
    node_hostname = serializers.CharField(source="node.hostname", read_only=True, allow_null=True, default=None)
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = AgentToken
        fields = ["id", "kind", "node", "node_hostname", "key_prefix", "note", "created_at", "created_by",
                  "last_used_at", "revoked_at", "expires_at", "rotated_to", "is_active"]
        read_only_fields = fields


class AgentTokenIssueSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=AgentKind.choices)
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all(), required=False, allow_null=True)
    note = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["kind"] == AgentKind.NODE and attrs.get("node") is None:
            raise serializers.ValidationError({"node": ["a node agent's key needs its node"]})
        if attrs["kind"] == AgentKind.GATEWAY and attrs.get("node") is not None:
            raise serializers.ValidationError({"node": ["the gateway's key belongs to no node"]})
        return attrs


class AgentTokenRotateSerializer(serializers.Serializer):
    overlap_s = serializers.IntegerField(
        min_value=0, max_value=MAX_ROTATION_OVERLAP_S, default=3600,
        help_text="Seconds the old key keeps working beside the new one (default 1 h, at most 30 days)")
    note = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class AgentTokenKeySerializer(serializers.Serializer):
    token = AgentTokenSerializer()
    key = serializers.CharField(help_text="The new key, shown only in this answer (only its hash is stored)")
    replaces = AgentTokenSerializer(required=False, allow_null=True, help_text="The rotated key, with its expiry")


# ---- an agent's own node ---------------------------------------------------------------------


class AgentSelfModule(serializers.Serializer):
    serial = serializers.CharField()
    slot = serializers.IntegerField(allow_null=True)
    module_type = serializers.CharField()
    pcie_lanes = serializers.IntegerField(help_text="Lanes the module type needs: its expected link width")
    state = serializers.CharField()
    driver_version = serializers.CharField()
    framework_version = serializers.CharField()


class AgentSelfNode(serializers.Serializer):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    state = serializers.CharField()
    tier = serializers.CharField()


class AgentSelfSerializer(serializers.Serializer):
    node = AgentSelfNode()
    modules = AgentSelfModule(many=True)
