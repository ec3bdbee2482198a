import django_filters

from apps.common.filters import UTCDateTimeFilter
from apps.health.choices import FindingState, Severity
from apps.health.models import Finding
from apps.inventory.filtersets import IdFilter


class FindingFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=FindingState.choices)
    severity = django_filters.MultipleChoiceFilter(choices=Severity.choices)
    check = django_filters.CharFilter(field_name="check_name")
    tier = IdFilter(field_name="tier_id")
    node = IdFilter(field_name="node_id")
    since = UTCDateTimeFilter(field_name="last_seen", lookup_expr="gte",
                                             help_text="Findings seen at or after this time")

    class Meta:
        model = Finding
        fields = ["state", "severity", "check", "tier", "node", "since"]
