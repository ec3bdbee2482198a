from __future__ import annotations

from tests.agent.promserver import prom_server  # noqa: F401 - the fixture, for every test here
