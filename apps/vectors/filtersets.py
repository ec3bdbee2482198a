"""One FilterSet per model, for the pages and the API."""

from __future__ import annotations

import django_filters

from apps.vectors.models import VectorResult, VectorRun


class VectorRunFilterSet(django_filters.FilterSet):
    class Meta:
        model = VectorRun
        fields = ["suite", "combination", "purpose", "state"]


class VectorResultFilterSet(django_filters.FilterSet):
    case = django_filters.CharFilter(field_name="vector__name")
    operator = django_filters.CharFilter(field_name="vector__operator", lookup_expr="iexact")

    class Meta:
        model = VectorResult
        fields = ["run", "module", "vector", "outcome", "case", "operator"]
