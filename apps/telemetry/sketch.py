"""Latency histograms that merge exactly: logarithmic buckets (DDSketch's mapping).

A latency x (ms) falls in bucket ``i = ceil(log(x) / log(gamma))`` with
``gamma = (1 + a) / (1 - a)`` and relative accuracy ``a = 0.01``: bucket i holds
(gamma^(i-1), gamma^i], and its representative value ``2 gamma^i / (1 + gamma)``
is within ``a`` (1 %) of every value in it. Latencies below ``MIN_MS`` count in
``MIN_MS``'s bucket, above ``MAX_MS`` in ``MAX_MS``'s. Histograms of the same mapping merge by adding counts per
index, in any order and at any level (node, tier, fleet; a minute, an hour, a
day), so a percentile of the merge is within 1 % of the exact percentile of all
the latencies merged. The rollups add the counts in SQL and the readers take the
percentiles there too (``apps/telemetry/selectors/``): percentile q is the
bucket holding the latency of rank floor(q (n - 1)) among the n merged.

On the wire (contract 3) a histogram is ``{"offset": i0, "counts": [c0, c1, ...]}``:
``ck`` latencies fell in bucket ``i0 + k``. The node agent (``agent/cp_agent/sketch.py``)
carries the same mapping; a test holds the two equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
MIN_MS = 0.001  # 1 µs: below this a latency counts as 1 µs
MAX_MS = 1e7  # about 2.8 hours


def index(ms: float) -> int:
    """The bucket of a latency in ms."""
    return math.ceil(math.log(max(ms, MIN_MS)) / _LOG_GAMMA)


MIN_INDEX = index(MIN_MS)
MAX_INDEX = index(MAX_MS)
MAX_BUCKETS = MAX_INDEX - MIN_INDEX + 1


def value(i: int) -> float:
    """The representative latency (ms) of bucket i: within RELATIVE_ACCURACY of all it holds."""
    return 2 * GAMMA**i / (1 + GAMMA)


def histogram(latencies_ms: Iterable[float]) -> dict[str, Any] | None:
    """The wire form of some latencies, or None when there are none."""
    counts: dict[int, int] = {}
    for ms in latencies_ms:
        i = min(index(ms), MAX_INDEX)
        counts[i] = counts.get(i, 0) + 1
    if not counts:
        return None
    lo, hi = min(counts), max(counts)
    return {"offset": lo, "counts": [counts.get(i, 0) for i in range(lo, hi + 1)]}

