"""One FilterSet per inventory model; the API lists and the pages share them.

References accept an id or the natural key operators use (rack name, tier
kind, node hostname).  ``label`` filters the JSON ``labels`` field with
``key=value`` pairs (comma-separated pairs must all match).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from apps.inventory.choices import CombinationState, EndpointKind, FormFactor, ModuleState, NodeState
from apps.inventory.models import (
    DriverRelease,
    ExternalEndpoint,
    FrameworkRelease,
    Module,
    ModuleType,
    Node,
    Rack,
    Tier,
    VersionCombination,
)
from apps.inventory.selectors import version_drift


def _ref_q(value: str, *, field: str, natural_key: str) -> Q:
    """``field`` by id (digits) or by its natural key."""
    value = value.strip()
    q = Q(**{f"{field}__{natural_key}": value})
    if value.isdigit() and len(value) < 19:
        q |= Q(**{f"{field}__pk": int(value)})
    return q


class RefFilter(django_filters.CharFilter):
    """A reference by id or natural key, e.g. ``rack=3`` or ``rack=rack-1``."""

    def __init__(self, *args: Any, natural_key: str, **kwargs: Any) -> None:
        self.natural_key = natural_key
        kwargs.setdefault("help_text", f"id or {natural_key}")
        super().__init__(*args, **kwargs)

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if value in (None, ""):
            return qs
        return qs.filter(_ref_q(str(value), field=self.field_name, natural_key=self.natural_key))


class LabelField(forms.CharField):
    def clean(self, value: Any) -> dict[str, str] | None:
        text = super().clean(value)
        if not text:
            return None
        labels: dict[str, str] = {}
        for pair in str(text).split(","):
            key, sep, val = pair.partition("=")
            if not sep or not key.strip():
                raise forms.ValidationError(f'label filter "{pair}" is not key=value, e.g. label=zone=row-a')
            labels[key.strip()] = val.strip()
        return labels


# What LabelField reads, for the schema: pairs of a key that is not blank, ``=`` and a value, comma-separated
# (empty: no filter).
_PAIR = r"[^,=]*[^\s,=][^,=]*=[^,]*"
LABEL_PATTERN = rf"^(?:{_PAIR}(?:,{_PAIR})*)?$"


@extend_schema_field({"type": "string", "pattern": LABEL_PATTERN})
class LabelFilter(django_filters.CharFilter):
    """``label=zone=row-a`` or ``label=zone=row-a,rack=r1``: nodes carrying all those labels."""

    field_class = LabelField

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if not value:
            return qs
        return qs.filter(**{f"{self.field_name}__contains": value})


@extend_schema_field(OpenApiTypes.INT)
class IdFilter(django_filters.NumberFilter):
    """An integer id (``forms.IntegerField``: ``1.5`` or ``x`` is a 400, not a guess)."""

    field_class = forms.IntegerField


class RackFilterSet(django_filters.FilterSet):
    class Meta:
        model = Rack
        fields = ["name", "row"]


class TierFilterSet(django_filters.FilterSet):
    class Meta:
        model = Tier
        fields = ["kind", "level"]


class NodeFilterSet(django_filters.FilterSet):
    rack = RefFilter(field_name="rack", natural_key="name")
    tier = RefFilter(field_name="tier", natural_key="kind")
    state = django_filters.MultipleChoiceFilter(choices=NodeState.choices)
    label = LabelFilter(field_name="labels", help_text="key=value; several pairs comma-separated must all match")
    module_type = IdFilter(method="filter_module_type",
                                              help_text="nodes carrying a module of this type (id)")
    has_warnings = django_filters.BooleanFilter(method="filter_has_warnings",
                                                help_text="nodes with (true) or without (false) soft findings")
    ecc_memory = django_filters.BooleanFilter()
    hostname = django_filters.CharFilter()

    class Meta:
        model = Node
        fields = ["hostname", "rack", "tier", "state", "ecc_memory", "nic_kind"]

    def filter_module_type(self, qs: QuerySet[Node], name: str, value: int) -> QuerySet[Node]:
        if value is None:
            return qs
        return qs.filter(Exists(Module.objects.filter(node=OuterRef("pk"), module_type_id=int(value))))

    def filter_has_warnings(self, qs: QuerySet[Node], name: str, value: bool) -> QuerySet[Node]:
        if value is None:
            return qs
        return qs.exclude(warnings=[]) if value else qs.filter(warnings=[])


class NodePageFilterSet(NodeFilterSet):
    """The API's node filters plus the node list page's free-text search box."""

    q = django_filters.CharFilter(method="filter_q", label="Search")

    class Meta(NodeFilterSet.Meta):
        fields = [*NodeFilterSet.Meta.fields, "q"]

    def filter_q(self, queryset: QuerySet[Node], name: str, value: str) -> QuerySet[Node]:
        value = value.strip()
        if not value:
            return queryset
        serial = Module.objects.filter(node=OuterRef("pk"), serial__icontains=value)
        return queryset.filter(
            Q(hostname__icontains=value) | Q(cpu_model__icontains=value) | Q(rack__name__icontains=value)
            | Exists(serial)
        )


class ModuleTypeFilterSet(django_filters.FilterSet):
    form_factor = django_filters.ChoiceFilter(choices=FormFactor.choices)

    class Meta:
        model = ModuleType
        fields = ["vendor", "model", "form_factor"]


class ModuleFilterSet(django_filters.FilterSet):
    node = RefFilter(field_name="node", natural_key="hostname")
    rack = RefFilter(field_name="node__rack", natural_key="name")
    tier = RefFilter(field_name="node__tier", natural_key="kind")
    module_type = IdFilter(field_name="module_type_id")
    state = django_filters.MultipleChoiceFilter(choices=ModuleState.choices)
    unassigned = django_filters.BooleanFilter(field_name="node", lookup_expr="isnull",
                                              help_text="modules outside any node (true)")
    drift = django_filters.BooleanFilter(method="filter_drift",
                                         help_text="modules whose versions differ from their type's pin (true)")

    class Meta:
        model = Module
        fields = ["serial", "node", "module_type", "state", "driver_version", "framework_version",
                  "firmware_version"]

    def filter_drift(self, qs: QuerySet[Module], name: str, value: bool) -> QuerySet[Module]:
        if value is None:
            return qs
        drifting = version_drift().values("pk")
        return qs.filter(pk__in=drifting) if value else qs.exclude(pk__in=drifting)


class DriverReleaseFilterSet(django_filters.FilterSet):
    class Meta:
        model = DriverRelease
        fields = ["vendor", "version"]


class FrameworkReleaseFilterSet(django_filters.FilterSet):
    class Meta:
        model = FrameworkRelease
        fields = ["name", "version"]


class VersionCombinationFilterSet(django_filters.FilterSet):
    module_type = IdFilter(field_name="module_type_id")
    driver = IdFilter(field_name="driver_id")
    framework = IdFilter(field_name="framework_id")
    state = django_filters.MultipleChoiceFilter(choices=CombinationState.choices)

    class Meta:
        model = VersionCombination
        fields = ["module_type", "driver", "framework", "state"]


class ExternalEndpointFilterSet(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=EndpointKind.choices)
    tier = RefFilter(field_name="tier", natural_key="kind")

    class Meta:
        model = ExternalEndpoint
        fields = ["name", "kind", "enabled", "tier"]
