"""The field checks of the complete batch check: each returns the clean value or raises ``Invalid``
with the message; and which checks apply to which field of each kind of sample."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from apps.telemetry import metrics
from apps.telemetry.batch import INT32, INT64


class Invalid(Exception):
    pass


def _number(v: Any, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Invalid("must be a number")
    try:
        f = float(v)
    except OverflowError:  # an integer past the range of a double
        raise Invalid("must be a finite number") from None
    if not math.isfinite(f):
        raise Invalid("must be a finite number")
    if lo is not None and f < lo:
        raise Invalid(f"must be at least {lo:g}")
    if hi is not None and f > hi:
        raise Invalid(f"must be at most {hi:g}")
    return f


def _integer(v: Any, lo: int = 0, hi: int = INT32) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise Invalid("must be an integer")
    if v < lo:
        raise Invalid(f"must be at least {lo}")
    if v > hi:
        raise Invalid(f"must be at most {hi}")
    return v


def non_negative(v: Any) -> float:
    return _number(v, 0.0)


def count32(v: Any) -> int:
    return _integer(v)


def counter64(v: Any) -> int:
    return _integer(v, 0, INT64)


def window(v: Any) -> float:
    value = _number(v, 0.0, 3600.0)
    if value == 0:
        raise Invalid("must be above 0")
    return value


Check = Callable[[Any], Any]


def metric_check(m: metrics.Metric) -> Check:
    """The check of a declared metric: its type and range."""
    lo, hi = m.bounds
    if m.is_int:
        ilo, ihi = int(lo if lo is not None else -INT64), int(hi if hi is not None else INT64)
        return lambda v: _integer(v, ilo, ihi)
    return lambda v: _number(v, lo, hi)


NODE_FIELDS: list[tuple[str, Check]] = [(m.name, metric_check(m)) for m in metrics.NODE_METRICS]


MODULE_FIELDS: list[tuple[str, Check]] = [(m.name, metric_check(m)) for m in metrics.MODULE_METRICS]


TIER_FIELDS: list[tuple[str, Check]] = [
    ("window_s", window), ("queue_depth", count32), ("arrivals", count32), ("completions", count32),
]


TIER_OPTIONAL: list[tuple[str, Check]] = [("input_tokens", counter64), ("output_tokens", counter64)]


MAX_ENDPOINTS = 100  # per tier sample


ENDPOINT_FIELDS: list[tuple[str, Check]] = [("requests", count32), ("errors", count32), ("tokens", counter64)]


STAGE_FIELDS: list[tuple[str, Check]] = [
    ("window_s", window), ("count", count32),
    ("p50_ms", non_negative), ("p95_ms", non_negative), ("p99_ms", non_negative), ("max_ms", non_negative),
]
