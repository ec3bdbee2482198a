from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.live import LiveServer


@pytest.fixture
def live_api(transactional_db: Any, tmp_path: Path) -> Iterator[LiveServer]:
    """A real uvicorn process serving the API on the test database (committed data only)."""
    server = LiveServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()
