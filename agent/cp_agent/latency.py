"""Stage latencies of the requests this node served, read from a latency log.

``--latency-log PATH`` names a file the serving process (or its gateway sidecar)
appends one line per request stage to: ``<stage> <milliseconds>``, e.g.
``intent 41.7``; stages are the control plane's (perception, intent, planning,
tool_call, generation, memory_update). Each sample the agent reads the lines
added since the previous one and sends them as one log-bucket histogram per
stage (``sketch.py``, wire contract 3), which the control plane merges exactly
into node, tier and fleet percentiles. A rotated or truncated log is read from
its start; one there when the agent starts, from its end (older lines are
not this run's); a missing one reports nothing; lines it cannot read are skipped and
counted (logged once per episode).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

from agent.cp_agent import sketch
from agent.cp_agent.once import Once

log = logging.getLogger("cp_agent.latency")

STAGES = frozenset({"perception", "intent", "planning", "tool_call", "generation", "memory_update"})
# Read at most this much of the log per sample (a burst is read over the next samples).
MAX_READ_BYTES = 8 << 20


class LatencyLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.description = f"latency log {self.path}"
        self._inode: int | None = None
        self._pos = 0
        self._partial = b""
        self.skipped = 0
        self._once = Once(log)
        try:  # what the log holds at the agent's start was before its time
            st = os.stat(self.path)
            self._inode, self._pos = st.st_ino, st.st_size
        except OSError:
            pass

    def read(self) -> dict[str, dict[str, object]] | None:
        """Histograms per stage of the lines added since the last read; None when there are none."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._once.say("missing", logging.WARNING, "%s cannot be read; no latencies sent until it can",
                           self.description)
            return None
        self._once.clear("missing")
        if st.st_ino != self._inode or st.st_size < self._pos:  # new, rotated or truncated: from the start
            self._inode, self._pos, self._partial = st.st_ino, 0, b""
        if st.st_size == self._pos:
            return None
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            chunk = f.read(MAX_READ_BYTES)
        self._pos += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        values: dict[str, list[float]] = {}
        bad = 0
        for line in lines:
            parts = line.split()
            if not parts:
                continue
            try:
                stage, ms = parts[0].decode(), float(parts[1])
            except (IndexError, ValueError, UnicodeDecodeError):
                bad += 1
                continue
            if stage not in STAGES or not math.isfinite(ms) or ms < 0:
                bad += 1
                continue
            values.setdefault(stage, []).append(ms)
        if bad:
            self.skipped += bad
            self._once.say("bad", logging.WARNING, "%s: skipped %d line(s) not of the form '<stage> <ms>' "
                           "(stages: %s)", self.description, bad, ", ".join(sorted(STAGES)))
        elif lines:
            self._once.clear("bad")
        out = {stage: h for stage, xs in values.items() if (h := sketch.histogram(xs)) is not None}
        return out or None
