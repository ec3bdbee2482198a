from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.accounts.choices import ScopeKind
from apps.accounts.models import ServiceAccount, ServiceToken
from apps.accounts.selectors import scope_of
from apps.common.errors import CONFLICT
from apps.common.roles import ROLES


class ScopeSerializer(serializers.Serializer):
    """Where a user may act: ``{"kind": "fleet"}``, ``{"kind": "tiers", "values": ["hybrid_inference"]}``
    (tier kinds) or ``{"kind": "racks", "values": ["r01", "r02"]}`` (rack names)."""

    kind = serializers.ChoiceField(choices=ScopeKind.choices)
    values = serializers.ListField(child=serializers.CharField(max_length=64), required=False, default=list,
                                   max_length=200, help_text="Tier kinds or rack names; empty for the fleet")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["kind"] == ScopeKind.FLEET and attrs["values"]:
            raise serializers.ValidationError({"values": ["the whole fleet names no tiers or racks"]})
        if attrs["kind"] != ScopeKind.FLEET and not attrs["values"]:
            raise serializers.ValidationError({"values": [f"a {attrs['kind']} scope names at least one"]})
        return attrs


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.CharField(allow_null=True)
    service_account = serializers.BooleanField()
    scope = ScopeSerializer()


class ServiceAccountSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    role = serializers.SerializerMethodField()
    owner = serializers.CharField(source="owner.username", read_only=True)
    scope = serializers.SerializerMethodField()

    class Meta:
        model = ServiceAccount
        fields = ["id", "name", "role", "scope", "owner", "created_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=ROLES, allow_null=True))
    def get_role(self, account: ServiceAccount) -> str | None:
        names = {g.name for g in account.user.groups.all()}
        return next((r for r in reversed(ROLES) if r in names), None)

    @extend_schema_field(ScopeSerializer)
    def get_scope(self, account: ServiceAccount) -> dict[str, Any]:
        return scope_of(user=account.user)


class ServiceAccountCreateSerializer(serializers.Serializer):
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,149}$", max_length=150,
                                  help_text="Letters, digits and _ . @ + -; also its username")
    role = serializers.ChoiceField(choices=ROLES)
    scope = ScopeSerializer(required=False, help_text="Default: the whole fleet")


class ServiceTokenSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = ServiceToken
        fields = ["id", "account", "key_prefix", "note", "created_at", "created_by", "expires_at",
                  "last_used_at", "revoked_at", "is_active"]
        read_only_fields = fields


class ServiceTokenIssueSerializer(serializers.Serializer):
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None,
                                           help_text="Refused from this time on (default: never)")
    note = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)

    def validate_expires_at(self, value: Any) -> Any:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("must be in the future", code=CONFLICT)
        return value


class ServiceTokenIssuedSerializer(ServiceTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The token, shown only in this answer (only its hash "
                                                            "is stored): send it as `Authorization: Bearer <token>`")

    class Meta(ServiceTokenSerializer.Meta):
        fields = [*ServiceTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields
