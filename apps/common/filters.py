"""Filters shared by the apps' filtersets."""

from __future__ import annotations

import datetime as dt
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField


class UTCDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time, converted to UTC: PostgreSQL refuses UTC offsets past ±15:59 that
    ISO 8601 (and Python) allow, and a time near year 1 or 9999 may leave the calendar in UTC."""

    def to_python(self, value: Any) -> dt.datetime | None:
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
