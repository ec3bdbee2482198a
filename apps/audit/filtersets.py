import django_filters

from apps.audit.models import AuditEvent
from apps.common.filters import UTCDateTimeFilter


class AuditEventFilterSet(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_name")
    action = django_filters.CharFilter(field_name="action")
    action_prefix = django_filters.CharFilter(field_name="action", lookup_expr="startswith")
    since = UTCDateTimeFilter(field_name="time", lookup_expr="gte")
    until = UTCDateTimeFilter(field_name="time", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = [
            "actor", "action", "action_prefix", "target_type", "target_id", "request_id", "source", "since", "until",
        ]
