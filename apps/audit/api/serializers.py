from rest_framework import serializers

from apps.audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """One operator-visible change: who, what, when, the fields before and after."""

    changes = serializers.DictField(
        child=serializers.ListField(min_length=2, max_length=2, allow_null=True),
        help_text='{field: [before, after]}',
    )

    class Meta:
        model = AuditEvent
        fields = ["id", "time", "actor", "actor_name", "credential", "action", "target_type", "target_id",
                  "target_repr", "reason", "changes", "request_id", "source", "related_type", "related_id"]
        read_only_fields = fields
