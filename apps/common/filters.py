"""Filters shared by the apps' filtersets."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import django_filters
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django_filters import utils
from django_filters.fields import IsoDateTimeField
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError as RequestInvalid

from apps.common.datetimes import parse_rfc3339


class UTCDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time (every RFC 3339 form, ``parse_rfc3339``), converted to UTC: PostgreSQL
    refuses UTC offsets past ±15:59 that ISO 8601 (and Python) allow, and a time near year 1 or 9999
    may leave the calendar in UTC."""

    def to_python(self, value: Any) -> dt.datetime | None:
        if isinstance(value, str) and value.strip():
            try:
                value = parse_rfc3339(value) or value
            except ValueError:
                raise ValidationError(self.error_messages["invalid"], code="invalid") from None
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(dt.UTC)
        except OverflowError:
            raise ValidationError("is out of range: in UTC it falls outside the years 1-9999",
                                  code="invalid") from None


class UTCDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UTCDateTimeField


# Filters that take a parameter repeated (state=active&state=cordoned).
_MANY = (django_filters.MultipleChoiceFilter, django_filters.ModelMultipleChoiceFilter,
         django_filters.BaseInFilter)
_BOOLEANS = frozenset({"true", "false"})
_WHOLE = re.compile(r"^-?\d{1,18}$")
_REFERENCES = (django_filters.ModelChoiceFilter, django_filters.ModelMultipleChoiceFilter)
_ANY_WHOLE = re.compile(r"^-?\d+$")


def _matches_nothing(declared: Any, codes: set[str], values: list[str]) -> bool:
    """Whether a filter's errors only say that its well-formed value can match no row: an id (a whole
    number of any size, as the schema types it) that no object has, or text with a NUL character,
    which no stored text holds (PostgreSQL's text cannot)."""
    if isinstance(declared, _REFERENCES):
        return codes <= {"invalid_choice", "invalid_pk_value"} and all(_ANY_WHOLE.match(v) for v in values)
    if isinstance(declared, django_filters.CharFilter):
        return codes == {"null_characters_not_allowed"}
    return False


def _names_nothing(filterset: Any, request: Any) -> bool:
    """Whether every error of the FilterSet is a well-formed value that can match no row."""
    errors = filterset.form.errors.as_data()
    for name, found in errors.items():
        if not _matches_nothing(filterset.filters.get(name), {str(e.code) for e in found},
                                request.query_params.getlist(name)):
            return False
    return bool(errors)


def _integral(filterset: Any, declared: Any) -> bool:
    """Whether a number filter reads a whole-number column (the schema types it ``integer``)."""
    if not isinstance(declared, django_filters.NumberFilter) or filterset._meta.model is None:
        return False
    try:
        field = filterset._meta.model._meta.get_field(declared.field_name)
    except FieldDoesNotExist:  # a method filter or a path through a relation: typed by the filter, not the column
        return False
    return isinstance(field, models.IntegerField)


class StrictFilterBackend(DjangoFilterBackend):
    """django-filter for the API. A bad value is a 400 naming the filter (the FilterSet's form), and so
    is an empty one unless the filter takes free text: a form leaves an empty field out, but a script
    that sends ``since=`` or ``state=`` meant something, and must not get the unfiltered list instead.
    An id no object has (a whole number, as the schema types it) matches nothing: an empty page, as for
    the id of an object since deleted; so does text with a NUL character."""

    def filter_queryset(self, request: Any, queryset: Any, view: Any) -> Any:
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        if not filterset.is_valid():
            if _names_nothing(filterset, request):
                return queryset.none()
            raise utils.translate_validation(filterset.errors)
        return filterset.qs

    def get_filterset(self, request: Any, queryset: Any, view: Any) -> Any:
        filterset = super().get_filterset(request, queryset, view)
        if filterset is None:
            return None
        for name, declared in filterset.filters.items():
            values = request.query_params.getlist(name)
            if len(values) > 1 and not isinstance(declared, _MANY):
                raise RequestInvalid({name: [f"takes one value, not {len(values)}"]})
            if isinstance(declared, django_filters.BooleanFilter) and any(v.lower() not in _BOOLEANS for v in values):
                raise RequestInvalid({name: ["must be true or false"]})
            if _integral(filterset, declared) and not all(_WHOLE.match(v) for v in values):
                raise RequestInvalid({name: ["must be a whole number"]})
            if "" in values and not isinstance(declared, django_filters.CharFilter):
                raise RequestInvalid({name: ["must not be empty: leave the parameter out for no filter"]})
        return filterset
