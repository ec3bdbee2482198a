from typing import Any

import django_filters
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from apps.agents.choices import EnrolmentState
from apps.agents.models import BootstrapToken, Enrolment, NodeCommand


class NodeCommandFilterSet(django_filters.FilterSet):
    class Meta:
        model = NodeCommand
        fields = ["node", "state", "kind"]


class BootstrapTokenFilterSet(django_filters.FilterSet):
    active = django_filters.BooleanFilter(method="filter_active", help_text="tokens that still admit joins")

    class Meta:
        model = BootstrapToken
        fields = ["tier", "auto_approve"]

    def filter_active(self, qs: QuerySet[Any], name: str, value: bool) -> QuerySet[Any]:
        # ``bool``, not ``bool | None``: the hint types the parameter in the schema, and django-filter
        # never calls the method with no value.
        live = Q(revoked_at__isnull=True, used__lt=F("uses"), expires_at__gt=timezone.now())
        return qs.filter(live) if value else qs.exclude(live)


class EnrolmentFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=EnrolmentState.choices)

    class Meta:
        model = Enrolment
        fields = ["state", "token", "machine_id", "hostname", "node"]
