"""Exponential backoff with full jitter (sleep a random time in [0, min(cap, base * 2**n)])."""

from __future__ import annotations

import random


class Backoff:
    def __init__(self, *, base: float = 1.0, cap: float = 60.0, rng: random.Random | None = None) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0
        self._rng = rng or random.Random()

    def ceiling(self) -> float:
        return float(min(self.cap, self.base * (2 ** min(self.failures, 30))))

    def next_delay(self) -> float:
        """Record one more failure and return how long to wait before the next try."""
        delay = self._rng.uniform(0, self.ceiling())
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0
