"""The ``live_stack`` fixture (registered for every test by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live.stack import LiveStack


@pytest.fixture
def live_stack(transactional_db: Any, tmp_path: Path, request: Any) -> Iterator[LiveStack]:
    """Real processes on the test database; nothing starts until the test asks for a part."""
    stack = LiveStack(tmp_path / "live")
    try:
        yield stack
    finally:
        stack.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(stack.log_tails())
