"""Comparing driver and framework versions as versions, not as text: ``2.10.0`` is newer than
``2.9.1``, ``2.4.0rc1`` older than ``2.4.0``, ``2.3`` the same as ``2.3.0``. Versions that do not
follow PEP 440 (a vendor's ``535.104.05-1ubuntu2``) are compared by their numbers in order."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

_NUMBERS = re.compile(r"\d+")


def _numbers(text: str) -> tuple[int, ...]:
    parts = [int(n) for n in _NUMBERS.findall(text)]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def is_older(version: str, than: str) -> bool:
    """``version`` is an earlier release than ``than``."""
    try:
        return Version(version) < Version(than)
    except InvalidVersion:
        return _numbers(version) < _numbers(than)
