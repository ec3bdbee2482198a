"""Hysteresis of a finding, as plain functions: a finding is raised when N of the
last M evaluations fail (or warn), and cleared after K passes in a row. An unknown
evaluation neither raises nor clears: it breaks a run of passes."""

from __future__ import annotations

from dataclasses import dataclass

LETTER = {"pass": "p", "warn": "w", "fail": "f", "unknown": "u"}


@dataclass
class Memory:
    history: str = ""
    pass_streak: int = 0
    unknown_streak: int = 0


def remember(mem: Memory, status: str, *, m: int, pass_cap: int = 1000, unknown_cap: int = 1000) -> Memory:
    """``mem`` after one more evaluation with ``status``, keeping the last ``m``. Streaks stop at their
    caps (the most any decision needs), so a steady subject's memory stops changing."""
    return Memory(
        history=(mem.history + LETTER[status])[-max(1, m):],
        pass_streak=min(pass_cap, mem.pass_streak + 1) if status == "pass" else 0,
        unknown_streak=min(unknown_cap, mem.unknown_streak + 1) if status == "unknown" else 0,
    )


def raising(mem: Memory, *, n: int) -> bool:
    return mem.history.count("f") + mem.history.count("w") >= n


def clearing(mem: Memory, *, k: int) -> bool:
    return mem.pass_streak >= k
