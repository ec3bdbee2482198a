"""Durations on the command line: ``90``, ``90s``, ``10m``, ``1h30m``, ``2d``."""

from __future__ import annotations

import argparse
import re

_PART = re.compile(r"(\d+)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(text: str) -> int:
    """Whole seconds; argparse shows the ValueError's text as a usage error (exit 2)."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90s, 10m, 1h30m)")
    return sum(int(n) * _UNIT[u] for n, u in parts)


def words(total: float) -> str:
    total = int(round(total))
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
