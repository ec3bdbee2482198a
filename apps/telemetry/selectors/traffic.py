"""The traffic the planner sizes the fleet for, observed in the fleet snapshot's window."""

from __future__ import annotations

import datetime as dt
from typing import Any

from apps.telemetry.selectors.snapshot import fleet_snapshot


def observed_traffic(*, window_s: int = 900, now: dt.datetime | None = None) -> dict[str, Any] | None:
    """Traffic over the last ``window_s`` seconds, for the planner, from the fleet snapshot's window.

    requests_per_s is the arrival rate at the entry tier (the lowest-level tier
    with data: every request enters there); tokens per request are the tokens
    reported by all tiers divided by those entry requests. None without data.
    """
    snapshot = fleet_snapshot(now=now, window_minutes=max(1, round(window_s / 60)))
    rated = [t for t in snapshot["tiers"] if t["window"].get("requests_per_s") is not None]
    if not rated:
        return None
    rate = float(rated[0]["window"]["requests_per_s"])
    tokens_in = sum(float(t["window"]["input_tokens_per_s"]) for t in rated)
    tokens_out = sum(float(t["window"]["output_tokens_per_s"]) for t in rated)
    return {
        "window_s": window_s,
        "requests_per_s": rate,
        "input_tokens_per_request": tokens_in / rate if rate else None,
        "output_tokens_per_request": tokens_out / rate if rate else None,
        "per_tier": {t["kind"]: {"requests_per_s": float(t["window"]["requests_per_s"])} for t in rated},
    }
