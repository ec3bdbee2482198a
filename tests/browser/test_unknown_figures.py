"""Figures an agent could not read (null, contract 2) show as unknown on the node page,
never as 0 or "None". Screenshot in artifacts/."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Count
from django.utils import timezone

from apps.agents.services import agent_token_issue
from apps.inventory.models import Module, Node
from apps.telemetry.ingest.receive import telemetry_ingest
from tests.browser.conftest import BROWSER_USER, login_by_cookie, screenshot

pytestmark = pytest.mark.browser


def test_it_shows_unknown_in_flight_and_missing_module_figures(browser_page: Any, live_server: Any,
                                                                demo_fleet: dict[str, Any]) -> None:
    node = Node.objects.annotate(n=Count("modules")).filter(n__gte=2).order_by("hostname").first()
    assert node is not None
    modules = list(Module.objects.filter(node=node).order_by("slot"))
    token, _ = agent_token_issue(kind="node", node=node, actor="test")
    metrics = {"util": 0.42, "temp_c": 57.5, "power_w": 9.0, "link_width": 4, "link_width_expected": 4,
               "ecc_corrected": 2, "ecc_uncorrected": 0, "errors": 0}
    missing = dict(metrics, util=None, temp_c=None, ecc_uncorrected=None, link_width_expected=None)
    telemetry_ingest(token=token, payload={"batch_id": "browser-unknown-1", "contract": 2, "node_samples": [{
        "time": timezone.now().isoformat(), "node": node.hostname, "cpu_util": 0.3, "mem_util": 0.4, "load1": 1.0,
        "in_flight": None, "threads": 90,
        "modules": [{"serial": m.serial, **(missing if i == 0 else metrics)} for i, m in enumerate(modules)],
    }]})

    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url=f"/nodes/{node.pk}/")
    latest = page.inner_text("#node-latest")
    assert "unknown in flight" in latest and "None" not in latest
    first = page.locator(f'#module-telemetry tr[data-module="{modules[0].pk}"]')
    cells = {k: first.locator(f'[data-cell="{k}"]').inner_text().strip()
             for k in ("util", "temp_c", "ecc_uncorrected", "ecc_corrected", "link")}
    assert cells == {"util": "–", "temp_c": "–", "ecc_uncorrected": "–", "ecc_corrected": "2", "link": "×4 of ×?"}
    second = page.locator(f'#module-telemetry tr[data-module="{modules[1].pk}"]')
    assert second.locator('[data-cell="util"]').inner_text().strip() == "42%"
    assert "None" not in page.inner_text("#module-telemetry")
    screenshot(page, "node-unknown-figures")
