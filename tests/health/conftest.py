"""A small hybrid-inference fleet whose agents report through the real ingest service,
and helpers to sweep it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.health.models import Finding
from apps.health.sweep import sweep
from apps.inventory.models import Node
from apps.telemetry.rollups.rollup import telemetry_rollup
from tests.browser.conftest import browser_page, chromium_browser  # noqa: F401  (browser fixtures)
from tests.operations.conftest import Fleet


def module_sample(serial: str, **over: Any) -> dict[str, Any]:
    return {"serial": serial, "util": 0.5, "temp_c": 60.0, "power_w": 8.0, "link_width": 4, "link_width_expected": 4,
            "ecc_corrected": 0, "ecc_uncorrected": 0, "errors": 0, **over}


class HealthFleet(Fleet):
    def sample(self, node: Node, *, at: dt.datetime | None = None, cpu: float = 0.3,
               modules: dict[str, dict[str, Any]] | None = None) -> None:
        """``node`` reports now (or ``at``); ``modules`` overrides figures per module serial."""
        mods = [module_sample(m.serial, **(modules or {}).get(m.serial, {})) for m in node.modules.order_by("slot")]
        self.send_sample(node, {"time": (at or timezone.now()).isoformat(), "node": node.hostname, "cpu_util": cpu,
                                "mem_util": 0.3, "load1": 1.0, "in_flight": 2, "threads": 100, "modules": mods})

    def all_report(self, *, at: dt.datetime | None = None, **over: Any) -> None:
        for node in self.nodes.values():
            self.sample(node, at=at, **over)

    @staticmethod
    def rollup() -> None:
        telemetry_rollup(since=timezone.now() - dt.timedelta(minutes=10))


@pytest.fixture
def hfleet(db: Any) -> HealthFleet:
    return HealthFleet()


def sweeps(n: int) -> list[dict[str, Any]]:
    return [sweep() for _ in range(n)]


def findings(check: str, **kw: Any) -> list[Finding]:
    return list(Finding.objects.filter(check_name=check, **kw).order_by("id"))
