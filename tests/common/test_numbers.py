"""Figures printed one way on every page: the |num filter (static/js/format.js is the same rule,
checked against it in tests/browser/test_dashboard.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template import engines

from apps.common.templatetags.numbers import number_text, percent_text


@pytest.mark.parametrize(("value", "text"), [
    (139.944, "140"), (96.311, "96.3"), (10.0, "10"), (4.256, "4.26"), (1.0, "1"), (0.5, "0.5"),
    (0.012345, "0.0123"), (0.0, "0"), (-0.0001, "-0.0001"), (1216.2339, "1,216"), (1234567, "1,234,567"),
    (-2.5, "-2.5"), (Decimal("12.34"), "12.3"), ("7.125", "7.13"),
    (None, "–"), ("", "–"), ("n/a", "–"), (float("nan"), "–"), (float("inf"), "–"), (True, "–"),
])
def test_a_figure_prints_with_the_precision_its_size_deserves(value: object, text: str) -> None:
    assert number_text(value) == text


def test_every_template_has_the_filter_with_a_unit() -> None:
    template = engines["django"].from_string('{{ a|num:"°C" }} · {{ b|num }} · {{ c|num:"W" }}')
    assert template.render({"a": 61.25, "b": None, "c": 3}) == "61.3 °C · – · 3 W"


@pytest.mark.parametrize(("value", "text"), [
    (0.42, "42%"), (0.425, "43%"), (0.0, "0%"), (1.0, "100%"), (0.004, "0%"), (None, "–"), ("", "–"),
])
def test_a_fraction_prints_as_a_whole_percentage_and_unknown_is_not_zero(value: object, text: str) -> None:
    assert percent_text(value) == text
    assert engines["django"].from_string("{{ v|pct }}").render({"v": value}) == text
