"""Two workers, and the one running a task is SIGKILLed: the other runs the same message to the end.

The task is the hourly telemetry retention over a fleet of 10,000 nodes with 4 modules each, its
rollups one hour past their retention: what each hourly run deletes at that size, 3 million rows,
3-4 seconds of work on a quiet machine. The killed worker acknowledged nothing and its transaction rolled back;
the broker's visibility timeout (short here, through the environment) passes and the surviving
worker puts the message back on its queue and runs it: the expired rows are deleted by exactly
one run, every row within retention is kept. (Why the timeout and what it must exceed:
docs/deploy.md, "A worker that dies mid-task".)"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from apps.inventory.choices import FormFactor, NodeState, TierKind
from apps.inventory.models import Module, ModuleType, Node, Rack, Tier
from apps.telemetry.models import ModuleRollup, NodeRollup
from apps.telemetry.rollups.retention import rollup_retention_days
from apps.telemetry.tasks import telemetry_retention
from tests.live.stack import LiveStack, Proc, wait_for

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.django_db(transaction=True)]

NODES = 10_000
EXPIRED_MINUTES = 60  # the hour past retention an hourly run finds
FRESH_MINUTES = 5
# Longer than the task runs here (so the running worker's message is not handed out while it
# lives), short enough for a test; the surviving worker looks for expired messages every second.
VISIBILITY_S = 40
ENV = {"CELERY_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S), "CELERY_RESTORE_INTERVAL_S": "1"}


def _fleet_with_expired_rollups(now: dt.datetime) -> dict[str, int]:
    """The fleet and its per-minute rollups: an hour past retention, and the last minutes."""
    tier, _ = Tier.objects.get_or_create(kind=TierKind.HYBRID_INFERENCE,
                                         defaults={"name": "Hybrid inference", "level": 2})
    mtype = ModuleType.objects.create(vendor="Axon", model="AX-R", form_factor=FormFactor.M2,
                                      int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)
    racks = Rack.objects.bulk_create(Rack(name=f"rack-r{r:02d}", position=r) for r in range(NODES // 40))
    nodes = Node.objects.bulk_create(
        (Node(hostname=f"n-r{i:05d}", rack=racks[i // 40], slot=i % 40 + 1, tier=tier, state=NodeState.ACTIVE)
         for i in range(NODES)), batch_size=5000)
    Module.objects.bulk_create(
        (Module(serial=f"AX-R{node.pk:05d}-{slot}", module_type=mtype, node=node, slot=slot,
                driver_version="2.3.1", framework_version="1.18.0") for node in nodes for slot in range(4)),
        batch_size=5000)
    cutoff = now - dt.timedelta(days=rollup_retention_days())
    expired = [cutoff.replace(second=0, microsecond=0) - dt.timedelta(minutes=m) for m in range(1, EXPIRED_MINUTES + 1)]
    fresh = [now.replace(second=0, microsecond=0) - dt.timedelta(minutes=m) for m in range(FRESH_MINUTES)]
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO telemetry_noderollup (node_id, minute, samples, cpu_util_mean, cpu_util_max, mem_util_mean,
                                                mem_util_max, load1_mean, in_flight_mean, in_flight_max, threads_max)
               SELECT n.id, g.minute, 60, 0.3, 0.35 + 0.05 * random(), 0.3, 0.3, 1.0, 2, 3, 100
                 FROM inventory_node n, unnest(%s::timestamptz[]) AS g(minute)""", [expired + fresh])
        cur.execute(
            """INSERT INTO telemetry_modulerollup (module_id, node_id, minute, samples, util_mean, util_max,
                                                  temp_c_mean, temp_c_max, power_w_mean, power_w_max,
                                                  link_width_min, link_width_expected, ecc_corrected_max,
                                                  ecc_uncorrected_max, errors_max)
               SELECT m.id, m.node_id, g.minute, 60, 0.4, 0.5, 58, 60, 8, 8, 4, 4, 10, 0, 0
                 FROM inventory_module m, unnest(%s::timestamptz[]) AS g(minute)""", [expired + fresh])
        cur.execute("ANALYZE telemetry_noderollup, telemetry_modulerollup")
    return {"noderollup": NODES * EXPIRED_MINUTES, "modulerollup": 4 * NODES * EXPIRED_MINUTES,
            "fresh": 5 * NODES * FRESH_MINUTES}


def _deleting() -> str:
    """The application name of the worker whose retention is deleting rollups now ("" if none)."""
    with connection.cursor() as cur:
        cur.execute("SELECT application_name FROM pg_stat_activity WHERE state = 'active' "
                    "AND application_name LIKE 'live-worker-%%' AND query LIKE 'DELETE FROM telemetry_%%rollup%%'")
        row = cur.fetchone()
    return str(row[0]) if row else ""


def _runs(worker: Proc, task_id: str, what: str) -> int:
    return len(re.findall(rf"telemetry_retention\[{task_id}\] {what}", worker.log()))


def test_a_task_whose_worker_is_killed_is_finished_once_by_the_other_worker(live_stack: LiveStack) -> None:
    now = timezone.now()
    seeded = _fleet_with_expired_rollups(now)
    workers = [live_stack.worker(env=ENV) for _ in range(2)]

    result: Any = telemetry_retention.delay()
    task_id = result.id
    name = wait_for(_deleting, timeout=120, what="a worker's retention deleting the expired rollups")
    taker = workers[int(name.removeprefix("live-worker-")) - 1]
    other = next(w for w in workers if w is not taker)
    assert _runs(taker, task_id, "received") == 1 and _runs(other, task_id, "received") == 0
    taker.kill()  # the whole worker, its children with it: nothing is acknowledged

    # The surviving worker takes the same message back once it is older than the visibility timeout.
    other.wait_log(f"telemetry_retention[{task_id}] received", timeout=VISIBILITY_S + 120)
    deleted = result.get(timeout=300)
    other.wait_log(f"telemetry_retention[{task_id}] succeeded", timeout=30)  # logged after the result is stored
    assert _runs(other, task_id, "received") == 1 and _runs(other, task_id, "succeeded") == 1
    # Exactly once in effect: the killed run's deletes rolled back, the second deleted every expired row.
    assert deleted["noderollup"] == seeded["noderollup"] and deleted["modulerollup"] == seeded["modulerollup"], deleted
    cutoff = now - dt.timedelta(days=rollup_retention_days())
    assert not NodeRollup.objects.filter(minute__lt=cutoff).exists()
    assert not ModuleRollup.objects.filter(minute__lt=cutoff).exists()
    assert NodeRollup.objects.count() + ModuleRollup.objects.count() == seeded["fresh"]
