"""Benchmark: one health sweep over a large fleet beside a single SELECT of the same rows.

    .venv/bin/python bench/health_sweep.py [--nodes 10000] [--sweeps 20]

Starts the embedded engines when DATABASE_URL / REDIS_URL are unset (or uses the
servers they name), creates its own database ``bench_health`` on that server and
fills it in SQL: ``--nodes`` nodes (a fifth access & logic, the rest hybrid
inference), 4 modules each, their latest state, and 5 minutes of node and module
rollups; 1 % of the modules report a degraded link width, so findings open. Then it
runs 5 sweeps untimed (the first writes every subject's state) and times
``--sweeps`` more, the agents' latest state refreshed before each (untimed), each
sweep beside one SELECT that reads the same latest-state and rollup rows. Prints
p50/p95 in seconds and the ratio; goal (exit 1 on a miss): sweep p95 < 2 s and < 3 x the
SELECT's. Drops ``bench_health`` at the end. Smallest setting: ``--nodes 50 --sweeps 3``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.common import at_most, bench_database, percentile  # noqa: E402

BENCH_DB = "bench_health"
GOAL_S = 2.0
GOAL_RATIO = 3.0

FILL_SQL = [
    """INSERT INTO telemetry_nodestatus (node_id, time, last_seen, cpu_util, mem_util, load1, in_flight, threads)
       SELECT id, now(), now(), 0.2 + 0.3 * random(), 0.3, 1.0, 2, 100 FROM inventory_node""",
    """INSERT INTO telemetry_modulestatus (module_id, node_id, time, last_seen, util, temp_c, power_w, link_width,
                                          link_width_expected, ecc_corrected, ecc_uncorrected, errors)
       SELECT id, node_id, now(), now(), 0.3 + 0.4 * random(), 55 + 10 * random(), 8,
              CASE WHEN id % 100 = 0 THEN 2 ELSE 4 END, 4, 10, 0, 0 FROM inventory_module""",
    """INSERT INTO telemetry_noderollup (node_id, minute, samples, cpu_util_mean, cpu_util_max, mem_util_mean,
                                        mem_util_max, load1_mean, in_flight_mean, in_flight_max, threads_max)
       SELECT n.id, date_trunc('minute', now()) - g * interval '1 minute', 12, 0.3, 0.35 + 0.05 * random(), 0.3,
              0.3, 1.0, 2, 3, 100 FROM inventory_node n, generate_series(0, 4) g""",
    """INSERT INTO telemetry_modulerollup (module_id, node_id, minute, samples, util_mean, util_max, temp_c_mean,
                                          temp_c_max, power_w_mean, power_w_max, link_width_min,
                                          link_width_expected, ecc_corrected_max, ecc_uncorrected_max, errors_max)
       SELECT m.id, m.node_id, date_trunc('minute', now()) - g * interval '1 minute', 12, 0.4, 0.5, 58, 60, 8, 8,
              4, 4, 10, 0, 0 FROM inventory_module m, generate_series(0, 4) g""",
    "ANALYZE",
]

# The same rows the sweep reads (nodes, modules, their latest state, 5 minutes of rollups), in one SELECT.
READ_SQL = """
SELECT 'n', n.id, n.tier_id, n.state, s.last_seen, s.cpu_util, s.in_flight, r.minute, r.cpu_util_mean,
       r.cpu_util_max, NULL::bigint, NULL::bigint, NULL::bigint
  FROM inventory_node n LEFT JOIN telemetry_nodestatus s ON s.node_id = n.id
  LEFT JOIN telemetry_noderollup r ON r.node_id = n.id AND r.minute >= %(since)s
UNION ALL
SELECT 'm', m.id, m.node_id, m.state, s.last_seen, s.util, s.link_width, r.minute, s.temp_c, s.power_w,
       r.ecc_corrected_max, r.ecc_uncorrected_max, r.errors_max
  FROM inventory_module m LEFT JOIN telemetry_modulestatus s ON s.module_id = m.id
  LEFT JOIN telemetry_modulerollup r ON r.module_id = m.id AND r.minute >= %(since)s
"""


def _fill(n_nodes: int) -> None:
    from decimal import Decimal

    from django.db import connection

    from apps.inventory.choices import CombinationState, TierKind
    from apps.inventory.models import (
        DriverRelease,
        FrameworkRelease,
        Module,
        ModuleType,
        Node,
        Rack,
        Tier,
        VersionCombination,
    )

    t0 = time.perf_counter()
    tiers = {t.kind: t for t in Tier.objects.all()}
    per_rack = 40
    racks = Rack.objects.bulk_create(Rack(name=f"rack-{r:03d}", position=r)
                                     for r in range((n_nodes + per_rack - 1) // per_rack))
    mtype = ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor="m2", int8_tops=Decimal("40"),
                                      power_w=10, pcie_lanes=4)
    VersionCombination.objects.create(
        module_type=mtype, driver=DriverRelease.objects.create(vendor="Axon", version="2.3.1"),
        framework=FrameworkRelease.objects.create(name="axon-runtime", version="1.18.0"),
        state=CombinationState.PINNED)
    nodes = Node.objects.bulk_create(
        (Node(hostname=f"n-{i:05d}", rack=racks[i // per_rack], slot=i % per_rack + 1,
              tier=tiers[TierKind.ACCESS_LOGIC if i % 5 == 0 else TierKind.HYBRID_INFERENCE], state="active")
         for i in range(n_nodes)), batch_size=5000)
    Module.objects.bulk_create(
        (Module(serial=f"AX-{node.pk:05d}-{slot}", module_type=mtype, node=node, slot=slot,
                driver_version="2.3.1", framework_version="1.18.0") for node in nodes for slot in range(4)),
        batch_size=5000)
    with connection.cursor() as cur:
        for sql in FILL_SQL:
            cur.execute(sql)
    print(f"filled {Node.objects.count()} nodes, {Module.objects.count()} modules, 5 minutes of rollups in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)


def _report_now() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("UPDATE telemetry_nodestatus SET last_seen = now(), time = now()")
        cur.execute("UPDATE telemetry_modulestatus SET last_seen = now(), time = now()")


def _measure(n_sweeps: int) -> dict[str, Any]:
    import datetime as dt

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from apps.health.models import CheckState, Finding
    from apps.health.sweep import sweep

    for _ in range(5):
        _report_now()
        sweep()
    since = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=4)
    sweep_s, read_s, queries, rows = [], [], 0, 0
    for i in range(n_sweeps):
        _report_now()
        t0 = time.perf_counter()
        if i == 0:
            with CaptureQueriesContext(connection) as ctx:
                result = sweep()
            queries = len(ctx.captured_queries)
        else:
            result = sweep()
        t1 = time.perf_counter()
        with connection.cursor() as cur:
            cur.execute(READ_SQL, {"since": since})
            rows = len(cur.fetchall())
        t2 = time.perf_counter()
        sweep_s.append(t1 - t0)
        read_s.append(t2 - t1)
    return {"sweep": sweep_s, "read": read_s, "queries": queries, "rows": rows,
            "evaluations": result["evaluations"], "states": CheckState.objects.count(),
            "findings": Finding.objects.filter(state="open").count()}



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--sweeps", type=int, default=20)
    args = parser.parse_args()

    with bench_database(BENCH_DB):
        _fill(args.nodes)
        r = _measure(args.sweeps)

    s50, s95 = percentile(r["sweep"], 50), percentile(r["sweep"], 95)
    r50, r95 = percentile(r["read"], 50), percentile(r["read"], 95)
    print()
    print(f"{args.nodes} nodes, {args.nodes * 4} modules, 5 minutes of rollups; {args.sweeps} timed sweeps")
    print(f"  sweep:        p50 {s50:6.3f} s  p95 {s95:6.3f} s  ({r['evaluations']} evaluations, "
          f"{r['queries']} queries, {r['states']} subject states, {r['findings']} open findings)")
    print(f"  one SELECT:   p50 {r50:6.3f} s  p95 {r95:6.3f} s  ({r['rows']} rows)")
    print(f"  ratio p95:    {s95 / r95:.1f} x")
    limit_s, limit_ratio = at_most(GOAL_S), at_most(GOAL_RATIO)
    met = s95 < limit_s and s95 < limit_ratio * r95
    print(f"goal sweep p95 < {limit_s:g} s and < {limit_ratio:g} x the SELECT:", "met" if met else "MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
