"""The sweep task: one at a time, an overrunning sweep skipped rather than stacked."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from apps.health import tasks
from apps.health.models import CheckState
from tests.health.conftest import HealthFleet


def test_it_skips_a_sweep_while_another_holds_the_lock(hfleet: HealthFleet, settings: Any) -> None:
    hfleet.node("n-0")
    hfleet.all_report()
    cache.set(tasks.LOCK_KEY, "another sweep", 30)
    try:
        assert tasks.health_sweep() == {"skipped": True}
        assert not CheckState.objects.exists()
    finally:
        cache.delete(tasks.LOCK_KEY)
    result = tasks.health_sweep()
    assert result["evaluations"] > 0 and cache.get(tasks.LOCK_KEY) is None
    assert CheckState.objects.filter(check_name="heartbeat", subject_key=f"node:{hfleet.nodes['n-0'].pk}").exists()
