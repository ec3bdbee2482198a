from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent.promserver import PromServer


@pytest.fixture
def prom_server() -> Iterator[PromServer]:
    """A local Prometheus text endpoint the test controls."""
    server = PromServer()
    try:
        yield server
    finally:
        server.close()
