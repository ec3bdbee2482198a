"""Log-bucket latency histograms, as the control plane merges them (wire contract 3).

The same mapping as the server's ``apps/telemetry/rollups/sketch.py`` (the agent imports
nothing from the control plane; a test holds the two equal): a latency x (ms)
falls in bucket ``ceil(log(x) / log(gamma))``, ``gamma = (1 + a) / (1 - a)``,
relative accuracy ``a = 0.01``. Latencies below ``MIN_MS`` count in its bucket,
above ``MAX_MS`` in its. On the wire: ``{"offset": i0, "counts": [c0, c1, ...]}``,
``ck`` latencies in bucket ``i0 + k``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
MIN_MS = 0.001
MAX_MS = 1e7


def index(ms: float) -> int:
    """The bucket of a latency in ms."""
    return math.ceil(math.log(max(ms, MIN_MS)) / _LOG_GAMMA)


MIN_INDEX = index(MIN_MS)
MAX_INDEX = index(MAX_MS)


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
