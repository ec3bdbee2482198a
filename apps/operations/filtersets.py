import django_filters

from apps.common.filters import UTCDateTimeFilter
from apps.operations.choices import DecisionAction, DrainState, Owner, ScaleState
from apps.operations.models import AutoscalerDecision, AutoscalerPolicy, Drain, Quarantine, ScaleRequest


class DrainFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=DrainState.choices)
    owner = django_filters.MultipleChoiceFilter(choices=Owner.choices)
    active = django_filters.BooleanFilter(method="filter_active")
    hostname = django_filters.CharFilter(field_name="node__hostname")

    class Meta:
        model = Drain
        fields = ["state", "owner", "kind", "node", "hostname", "scale_request"]

    def filter_active(self, queryset, name, value):  # type: ignore[no-untyped-def]
        return queryset.exclude(state=DrainState.RELEASED) if value else queryset.filter(state=DrainState.RELEASED)


class QuarantineFilterSet(django_filters.FilterSet):
    active = django_filters.BooleanFilter(field_name="released_at", lookup_expr="isnull")

    class Meta:
        model = Quarantine
        fields = ["module", "owner", "active"]


class ScaleRequestFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=ScaleState.choices)

    class Meta:
        model = ScaleRequest
        fields = ["tier", "state", "owner"]


class AutoscalerPolicyFilterSet(django_filters.FilterSet):
    class Meta:
        model = AutoscalerPolicy
        fields = ["tier", "enabled", "dry_run"]


class AutoscalerDecisionFilterSet(django_filters.FilterSet):
    action = django_filters.MultipleChoiceFilter(choices=DecisionAction.choices)
    since = UTCDateTimeFilter(field_name="time", lookup_expr="gte")

    class Meta:
        model = AutoscalerDecision
        fields = ["tier", "action", "dry_run", "scale_request"]
