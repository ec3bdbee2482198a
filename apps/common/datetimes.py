"""Date-times as RFC 3339 writes them, the form the schema's ``format: date-time`` names: besides what
Django reads, a lower-case ``t`` or ``z`` and a leap second (``23:59:60``, read as the next second's
start, which Python's datetime cannot hold). One parser for the API's bodies and its filters."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import serializers

_LEAP = re.compile(r"^(\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:)60(?=[.,\dZz+-]|$)")


def parse_rfc3339(value: str) -> dt.datetime | None:
    """The date-time ``value`` writes, or None when it is not one (as Django's ``parse_datetime``);
    raises ValueError for a well-formed one that is not a real time (``2021-02-30T00:00:00Z``)."""
    text = value.strip()
    if len(text) > 10 and text[10] == "t":
        text = f"{text[:10]}T{text[11:]}"
    if text.endswith("z"):
        text = f"{text[:-1]}Z"
    leap = _LEAP.match(text)
    if leap is None:
        return parse_datetime(text)
    parsed = parse_datetime(f"{leap.group(1)}59{text[leap.end():]}")
    return None if parsed is None else parsed.replace(microsecond=0) + dt.timedelta(seconds=1)


class DateTimeField(serializers.DateTimeField):
    """DRF's DateTimeField reading every RFC 3339 form (``parse_rfc3339``)."""

    def to_internal_value(self, value: Any) -> dt.datetime:
        if isinstance(value, str):
            try:
                parsed = parse_rfc3339(value)
            except ValueError:
                self.fail("invalid", format="an RFC 3339 date-time, e.g. 2026-12-05T10:00:00Z")
            if parsed is not None:
                return super().to_internal_value(parsed)
        return super().to_internal_value(value)
