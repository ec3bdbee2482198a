import django_filters

from apps.simulator.choices import FaultKind
from apps.simulator.models import Fault


class FaultFilterSet(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=FaultKind.choices)
    node = django_filters.CharFilter(field_name="node__hostname")

    class Meta:
        model = Fault
        fields = ["kind", "node", "enabled", "combination"]
