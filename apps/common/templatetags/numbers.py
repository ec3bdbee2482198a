"""``{% load numbers %}`` and ``{{ value|num }}``: a figure printed as every page prints it (the pages'
scripts use static/js/format.js, the same rule): grouped thousands; no decimals from 100, one from
10, two from 1, three significant digits below 1; trailing zeros dropped; "–" for a figure not known.
``{{ value|num:"ms" }}`` appends a unit; ``{{ fraction|pct }}`` prints 0.42 as "42%", as format.js's
``pct`` does."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django import template

register = template.Library()

UNKNOWN = "–"


def _decimal(value: Any) -> Decimal | None:
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        # a float by its shortest text, as the browser's Intl.NumberFormat rounds it (61.25 → 61.3)
        d = Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() else None


def _text(d: Decimal) -> str:
    text = f"{d:,f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def number_text(value: Any, unit: str = "") -> str:
    d = _decimal(value)
    if d is None:
        return UNKNOWN
    a = abs(d)
    if a >= 100 or d == d.to_integral_value():
        places = 0
    elif a >= 1:
        places = 1 if a >= 10 else 2
    else:  # three significant digits
        places = 2 - d.adjusted()
    text = _text(d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))
    if text == "-0":
        text = "0"
    return f"{text} {unit}" if unit else text


@register.filter(name="num")
def num(value: Any, unit: str = "") -> str:
    return number_text(value, unit)


def percent_text(value: Any) -> str:
    """A fraction as a whole percentage (0.425 → "43%"); "–" when not known."""
    d = _decimal(value)
    if d is None:
        return UNKNOWN
    text = _text((d * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    return f"{'0' if text == '-0' else text}%"


@register.filter(name="pct")
def pct(value: Any) -> str:
    return percent_text(value)
