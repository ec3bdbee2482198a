import django_filters

from apps.agents.models import NodeCommand


class NodeCommandFilterSet(django_filters.FilterSet):
    class Meta:
        model = NodeCommand
        fields = ["node", "state", "kind"]
