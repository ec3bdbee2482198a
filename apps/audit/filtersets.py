import django_filters
from django.db.models import QuerySet

from apps.audit.models import AuditEvent
from apps.audit.selectors import without_chatter
from apps.common.filters import UTCDateTimeFilter


class AuditEventFilterSet(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_name")
    action = django_filters.CharFilter(field_name="action")
    action_prefix = django_filters.CharFilter(field_name="action", lookup_expr="startswith")
    since = UTCDateTimeFilter(field_name="time", lookup_expr="gte")
    until = UTCDateTimeFilter(field_name="time", lookup_expr="lt")
    chatter = django_filters.BooleanFilter(
        method="filter_chatter",
        help_text="false: leave out routine machine records (agent key churn, agents answering commands)")

    class Meta:
        model = AuditEvent
        fields = [
            "actor", "action", "action_prefix", "target_type", "target_id", "request_id", "source", "since", "until",
            "chatter",
        ]

    def filter_chatter(self, queryset: QuerySet[AuditEvent], name: str, value: bool) -> QuerySet[AuditEvent]:
        return queryset if value in (None, True) else without_chatter(queryset)
