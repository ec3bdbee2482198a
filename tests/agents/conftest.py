"""Fixtures: the telemetry tests' fleet (two hybrid nodes with modules, their agent keys and the gateway key)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.telemetry.conftest import Fleet


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return Fleet()
