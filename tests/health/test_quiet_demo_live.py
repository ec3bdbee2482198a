"""The demo fleet with no fault, played by the simulator (diurnal traffic with campaign bursts)
on a running stack with default check parameters, opens no finding beyond those the demo plants
on purpose, each listed here by name:

- n-r1-08 holds 4 modules × 4 lanes on an 8-lane board: two of its modules train at half width
  (``link_width`` on those two modules);
- the Axon modules among n-r2-11, n-r2-12 and n-r2-13 run driver 2.2.9, off the pin (``version_drift``);
- n-r2-04's 2.8 GHz clock is an admission warning (below 3.0 GHz): its agent logic runs slower, which
  no check blames on the node (its CPU is as busy as its twins'), so it has no finding.

The simulator runs at 60×: three real minutes of rollups are three simulated hours of traffic."""

from __future__ import annotations

import pytest

from apps.health.choices import ACTIVE_FINDING_STATES
from apps.health.models import Finding
from apps.inventory.models import Module, Node
from apps.simulator.demo import seed_demo
from apps.telemetry.models import NodeRollup
from tests.live.stack import LiveStack, wait_for

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.django_db(transaction=True)]

MINUTES = 3


def _planted() -> set[tuple[str, str]]:
    lanes = Module.objects.filter(node__hostname="n-r1-08", slot__in=(2, 3))
    drift = Module.objects.filter(node__hostname__in=("n-r2-11", "n-r2-12", "n-r2-13"), driver_version="2.2.9")
    return ({("link_width", m.serial) for m in lanes} | {("version_drift", m.serial) for m in drift})


def _open() -> set[tuple[str, str]]:
    out = set()
    for f in Finding.objects.filter(state__in=ACTIVE_FINDING_STATES).select_related("node", "module", "tier"):
        out.add((f.check_name, f.module.serial if f.module else f.node.hostname if f.node else f.subject_key))
    return out


@pytest.mark.timeout(1200)
def test_the_quiet_demo_fleet_opens_only_the_planted_findings(live_stack: LiveStack) -> None:
    seed_demo()
    planted = _planted()
    assert sorted(c for c, _ in planted).count("link_width") == 2 and ("version_drift" in {c for c, _ in planted})
    live_stack.web()
    live_stack.simulator()
    serving = Node.objects.exclude(state="retired").count()
    wait_for(lambda: Node.objects.filter(status__isnull=False).count() == serving, timeout=180,
             what="every node to report")
    live_stack.worker()
    live_stack.beat()
    wait_for(lambda: planted <= _open(), timeout=240, what="the planted findings")
    start = wait_for(lambda: NodeRollup.objects.order_by("-minute").values_list("minute", flat=True).first(),
                     timeout=180, what="the first rollups")
    wait_for(lambda: NodeRollup.objects.filter(minute__gt=start).values("minute").distinct().count() >= MINUTES,
             timeout=MINUTES * 60 + 240, what=f"{MINUTES} more minutes of the fleet's rollups")
    found = _open()
    print(f"open findings after {MINUTES} quiet minutes: {sorted(found)}")
    evidence = {(f.check_name, f.subject_key): (f.summary, f.evidence)
                for f in Finding.objects.filter(state__in=ACTIVE_FINDING_STATES, module=None, node=None)}
    assert found == planted, (f"unexpected: {sorted(found - planted)}; missing: {sorted(planted - found)};"
                              f" fleet-level evidence: {evidence}")
