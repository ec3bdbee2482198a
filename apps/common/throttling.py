"""Abuse limits: a fixed-window request count per caller.

- ``WriteThrottle`` (DRF): writes (POST, PUT, PATCH, DELETE) per user (an API
  token belongs to one user; a browser session counts for its user), ``settings.API_WRITE_RATE`` (default 300/min). The
  count is kept in Redis (one atomic INCR per write), so it holds across every web
  process. Reads are not limited here. Over the limit: 429 with ``Retry-After``
  (seconds to the end of the window) and a message saying the limit.
- ``LocalWindow``: the same rule counted in the process's memory, for the agents'
  telemetry (``settings.TELEMETRY_RATE`` per agent key, default 600/min), whose lean
  path must not pay a Redis round trip per batch. Counted per web process: with N
  processes a key may send up to N times the rate; agents keep a refused batch and
  send it again after ``Retry-After``.

A rate is ``"<count>/<s|sec|min|hour|day>"``; ``"0/min"`` or an empty string
turns the limit off.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle

_PERIODS = {"s": 1, "sec": 1, "second": 1, "min": 60, "minute": 60, "hour": 3600, "day": 86400}


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """``"300/min"`` → (300, 60); None when off. Raises ValueError naming a bad rate."""
    if not rate:
        return None
    count, _, period = rate.partition("/")
    if not count.strip().isdigit() or period.strip() not in _PERIODS:
        raise ValueError(f"bad rate {rate!r}: expected '<count>/<s|min|hour|day>'")
    n = int(count)
    return (n, _PERIODS[period.strip()]) if n > 0 else None


def _per(period: int) -> str:
    return {1: "second", 60: "minute", 3600: "hour", 86400: "day"}.get(period, f"{period} s")


def _window(period: int, now: float) -> tuple[int, float]:
    start = int(now // period) * period
    return start, start + period - now


class WriteThrottle(BaseThrottle):
    """Writes per user (an API token belongs to one user: per token and per user are the same)."""

    scope = "write"
    unsafe = frozenset({"POST", "PUT", "PATCH", "DELETE"})

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method not in self.unsafe or not getattr(request.user, "is_authenticated", False):
            return True  # anonymous writes are refused by the permission check anyway
        limit = parse_rate(getattr(settings, "API_WRITE_RATE", "300/min"))
        if limit is None:
            return True
        count, period = limit
        start, left = _window(period, time.time())
        key = f"throttle:{self.scope}:user:{request.user.pk}:{request.user.get_username()}:{start}"
        cache.add(key, 0, timeout=period + 5)
        try:
            n = cache.incr(key)
        except ValueError:  # expired between add and incr: a new window
            cache.add(key, 1, timeout=period + 5)
            n = 1
        if n <= count:
            return True
        raise exceptions.Throttled(wait=left, detail=f"write limit of {count} per {_per(period)} reached "
                                                     f"for {request.user.get_username()}")


class LocalWindow:
    """Per-process fixed-window counts by key (thread-safe)."""

    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def hit(self, key: str, rate: str | None, now: float | None = None) -> float | None:
        """Count one request of ``key``; None if allowed, else the seconds until it may retry."""
        limit = parse_rate(rate)
        if limit is None:
            return None
        count, period = limit
        start, left = _window(period, time.time() if now is None else now)
        with self._lock:
            seen_start, n = self._counts.get(key, (start, 0))
            n = n + 1 if seen_start == start else 1
            self._counts[key] = (start, n)
            if len(self._counts) > 100_000:  # keys of past windows
                self._counts = {k: v for k, v in self._counts.items() if v[0] == start}
        return None if n <= count else left
