"""Telemetry storage: bytes per row of every telemetry table, measured, and what a day of a
1,000-node fleet writes and keeps under the retention settings.

    CONTROLPLANE_VAR_DIR=./var .venv/bin/python bench/storage.py [--racks 5] [--seconds 600] [--interval 5]
        [--send-interval 5]

Starts the engines when DATABASE_URL / REDIS_URL are unset (or uses the servers they name),
creates a throwaway database (bench_storage, migrated) and drops it at the end. The fleet is
the demo's (``seed_inventory_demo`` and ``seed_operations_demo``: 20 nodes a rack, its mix of
tiers, module counts, serving and standby nodes), each node with an agent key, and the gateway.
The simulator's engine plays it for ``--seconds`` (whole minutes ending before now), its
traffic in proportion to the demo's, a sample per node every ``--interval`` seconds, with the
gateway's tier and stage samples and the nodes' latency histograms (contract 3). Each node's
samples go in a batch every ``--send-interval`` seconds (both 5 s: the agent's defaults), the
gateway's every interval, through
``telemetry_ingest``: what the writer stores for a buffered batch (COPY into the hourly
partitions, latest state, rollup notes). Then one rollup run computes every minute (its time
is printed: the minutely job does the same work once a minute).

It prints, per table, the rows and ``pg_total_relation_size`` (heap, indexes and TOAST; a
partitioned table summed over its partitions), the bytes per row, and per 1,000 nodes: the
bytes a day writes and what is kept at steady state, raw tables and batch ids for
``TELEMETRY_RAW_RETENTION_HOURS`` (48 h, whole hourly partitions, so up to one hour more) and
rollups for ``TELEMETRY_ROLLUP_RETENTION_DAYS`` (30 days). The nodes' rows scale with the node
count; the gateway's tier-wide rows (tier samples and rollups, the tiers' stage summaries, the
gateway's batch ids) are the fleet's, printed apart and not scaled. No goal: it is a measurement.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import bench_database  # noqa: E402

BENCH_DB = "bench_storage"

RAW = ("telemetry_nodesample", "telemetry_modulesample", "telemetry_tiersample", "telemetry_stagesample",
       "telemetry_latencysample", "telemetry_ingestbatch")
ROLLUPS = ("telemetry_noderollup", "telemetry_modulerollup", "telemetry_tierrollup", "telemetry_stagerollup",
           "telemetry_stagenoderollup", "telemetry_endpointrollup", "telemetry_nodelatencyrollup",
           "telemetry_tierlatencyrollup")
LATEST = ("telemetry_nodestatus", "telemetry_modulestatus", "telemetry_tierstatus")


# Tables whose rows are the fleet's, not each node's (the gateway's tier-wide figures): a day of them
# is the same for 200 nodes or 10,000 and is not scaled. Two tables hold both kinds of rows.
FLEET_WIDE = {"telemetry_tiersample", "telemetry_tierrollup", "telemetry_stagerollup", "telemetry_endpointrollup",
              "telemetry_tierlatencyrollup"}
PER_NODE_ROWS = {"telemetry_stagesample": "node_id IS NOT NULL", "telemetry_ingestbatch": "scope LIKE 'node:%%'"}


def _size(cur: Any, table: str) -> tuple[int, int, int]:
    """(rows, rows that are a node's, bytes) of ``table``: heap, indexes and TOAST, summed over its
    partitions if it has any."""
    cur.execute(f"SELECT count(*) FROM {table}")
    rows = int(cur.fetchone()[0])
    node_rows = 0 if table in FLEET_WIDE else rows
    if table in PER_NODE_ROWS:
        cur.execute(f"SELECT count(*) FROM {table} WHERE {PER_NODE_ROWS[table]}")
        node_rows = int(cur.fetchone()[0])
    cur.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [table])
    if cur.fetchone()[0] == "p":
        cur.execute("SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree(%s::regclass)",
                    [table])
    else:
        cur.execute("SELECT pg_total_relation_size(%s::regclass)", [table])
    return rows, node_rows, int(cur.fetchone()[0])


def _fill(racks: int, seconds: int, interval: float, send_interval: float) -> dict[str, Any]:
    from django.utils import timezone

    from apps.agents.services import agent_token_issue, identity_of
    from apps.inventory.demo import seed_inventory_demo
    from apps.inventory.models import Module, Node
    from apps.operations.demo import seed_operations_demo
    from apps.simulator.engine import Engine
    from apps.simulator.runner import CONTRACT, MAX_SAMPLES, _iso
    from apps.simulator.selectors import world
    from apps.simulator.specs import Config
    from apps.telemetry.ingest.receive import telemetry_ingest
    from apps.telemetry.rollups.rollup import telemetry_rollup

    t0 = time.perf_counter()
    seed_operations_demo(activate=seed_inventory_demo(racks=racks)["to_activate"])
    identities = {n.hostname: identity_of(agent_token_issue(kind="node", node=n, actor="bench")[0])
                  for n in Node.objects.order_by("hostname")}
    gateway = identity_of(agent_token_issue(kind="gateway", node=None, actor="bench")[0])
    nodes, faults, endpoints = world()
    print(f"fleet: {len(nodes)} nodes, {Module.objects.count()} modules ({time.perf_counter() - t0:.1f} s)",
          flush=True)

    # The demo's traffic (300 requests/s at the peak for its 60 nodes), in proportion to this fleet.
    engine = Engine(seed=1, config=Config(speed=1.0, peak_rps=300.0 * len(nodes) / 60))
    now = timezone.now()
    start = now.replace(second=0, microsecond=0) - dt.timedelta(seconds=seconds)
    pending: dict[str, list[dict[str, Any]]] = {h: [] for h in identities}
    batches = 0
    t0 = time.perf_counter()
    ingest_s = 0.0
    steps, send_every = int(seconds / interval), max(1, round(send_interval / interval))
    for k in range(steps):
        at = start.timestamp() + k * interval
        result = engine.step(at, nodes, faults, dt=interval, endpoints=endpoints)
        for hostname, sample in result.node_samples.items():
            pending[hostname].append({"time": _iso(result.time), **sample})
        stages = result.stage_samples
        gateway_batches = [{"tier_samples": result.tier_samples, "stage_samples": stages[:MAX_SAMPLES]}]
        gateway_batches += [{"stage_samples": stages[i:i + MAX_SAMPLES]} for i in range(MAX_SAMPLES, len(stages),
                                                                                      MAX_SAMPLES)]
        t1 = time.perf_counter()
        for j, body in enumerate(gateway_batches):
            telemetry_ingest(token=gateway, payload={"contract": CONTRACT, "batch_id": f"gateway-{k:06d}-{j}", **body})
            batches += 1
        if (k + 1) % send_every == 0:
            for hostname, samples in pending.items():
                if samples:
                    telemetry_ingest(token=identities[hostname],
                                     payload={"contract": CONTRACT, "batch_id": f"{hostname}-{k:06d}",
                                              "node_samples": samples})
                    batches += 1
            pending = {h: [] for h in identities}
        ingest_s += time.perf_counter() - t1
    print(f"played {seconds} s: {batches} batches stored in {ingest_s:.1f} s "
          f"({time.perf_counter() - t0:.1f} s with the engine)", flush=True)
    t0 = time.perf_counter()
    rolled = telemetry_rollup(now=timezone.now())
    rollup_s = time.perf_counter() - t0
    print(f"one rollup run over {seconds // 60} minutes: {rollup_s:.2f} s ({rolled.get('minutes', rolled)})",
          flush=True)
    return {"nodes": len(nodes), "seconds": seconds, "rollup_s": rollup_s}


def _report(fill: dict[str, Any]) -> None:
    from django.db import connection

    from apps.telemetry.batch import raw_retention_hours
    from apps.telemetry.rollups.retention import rollup_retention_days

    days = fill["seconds"] / 86_400
    per_1000 = 1000 / fill["nodes"]
    keep = {True: (raw_retention_hours() + 1) / 24, False: rollup_retention_days()}  # raw or not: days kept
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
        sizes = {t: _size(cur, t) for t in RAW + ROLLUPS + LATEST}
    print()
    print(f"{fill['nodes']} nodes, {fill['seconds']} s of telemetry. A day written and what is kept at steady state "
          f"(raw {raw_retention_hours():.0f} h + one hourly partition, rollups {keep[False]:.0f} days):")
    print("per 1,000 nodes for the nodes' rows; the gateway's tier-wide rows once per fleet, whatever its size")
    print(f"  {'table':30} {'rows':>9} {'bytes':>12} {'B/row':>6} {'rows/day/1k':>12} {'GB/day/1k':>10} "
          f"{'GB kept/1k':>10} {'fleet GB/day':>12}")
    totals = {"day": 0.0, "kept": 0.0, "hour_raw": 0.0, "fleet_day": 0.0, "fleet_kept": 0.0, "latest": 0}
    for table, (rows, node_rows, size) in sizes.items():
        per_row = size / rows if rows else 0.0
        if table in LATEST:
            totals["latest"] += size
            print(f"  {table:30} {rows:>9,} {size:>12,} {per_row:>6.0f}   (one row per node, module or tier)")
            continue
        raw = table in RAW
        node_day_rows = node_rows / days * per_1000
        node_day_gb = node_rows * per_row / days * per_1000 / 1e9
        fleet_day_gb = (rows - node_rows) * per_row / days / 1e9
        totals["day"] += node_day_gb
        totals["kept"] += node_day_gb * keep[raw]
        totals["fleet_day"] += fleet_day_gb
        totals["fleet_kept"] += fleet_day_gb * keep[raw]
        if raw:
            totals["hour_raw"] += node_day_gb / 24
        print(f"  {table:30} {rows:>9,} {size:>12,} {per_row:>6.0f} {node_day_rows:>12,.0f} {node_day_gb:>10.2f} "
              f"{node_day_gb * keep[raw]:>10.1f} {fleet_day_gb:>12.3f}")
    print(f"  {'total':30} {'':>9} {'':>12} {'':>6} {'':>12} {totals['day']:>10.2f} {totals['kept']:>10.1f} "
          f"{totals['fleet_day']:>12.3f}  (fleet-wide kept: {totals['fleet_kept']:.1f} GB)")
    print(f"  latest state: {totals['latest'] * per_1000 / 1e6:.1f} MB per 1,000 nodes; one hour of the raw tables "
          f"(the partition being written, with its indexes): {totals['hour_raw']:.2f} GB per 1,000 nodes")
    print(f"  rollup run: {fill['rollup_s']:.2f} s for {fill['seconds'] // 60} minutes of {fill['nodes']} nodes = "
          f"{fill['rollup_s'] / (fill['seconds'] / 60) * per_1000:.2f} s per minute of telemetry per 1,000 nodes")
    print("goal: none, a sizing measurement (docs/deploy.md); it exits 0 whatever the figures")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--racks", type=int, default=5, help="20 nodes a rack (default 5: 100 nodes)")
    parser.add_argument("--seconds", type=int, default=600, help="telemetry played, whole minutes (default 600)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between a node's samples (agent: 5)")
    parser.add_argument("--send-interval", type=float, default=5.0, help="seconds between its batches (agent: 5)")
    args = parser.parse_args()
    print(f"a sample every {args.interval:g} s, a batch every {args.send_interval:g} s", flush=True)
    with bench_database(BENCH_DB):
        fill = _fill(args.racks, args.seconds - args.seconds % 60, args.interval, args.send_interval)
        _report(fill)
    return 0


if __name__ == "__main__":
    sys.exit(main())
