"""Telemetry ingest benchmark: the ingest path against raw psycopg COPY and ``bulk_create`` of the same rows.

    CONTROLPLANE_VAR_DIR=./var .venv/bin/python bench/ingest.py [--samples 1000] [--runs 5]

Starts the embedded engines when DATABASE_URL / REDIS_URL are unset (or uses the servers
they name), creates a throwaway database (bench_ingest: migrated, one node with 4
modules and an agent key) and drops it at the end.

Each run stores one batch of --samples node samples with 4 module samples each (5 rows per
node sample) three ways, in turn, so that load from elsewhere on the machine hits all alike:

* ingest path: ``telemetry_ingest`` (what the writer does for a buffered batch: validation
  of the JSON payload, the batch row, binary COPY of the samples, latest-state upserts and
  rollup notes, one transaction);
* baseline raw COPY: plain psycopg binary COPY of the same sample rows, one transaction;
* baseline ``bulk_create``: ``NodeSample``/``ModuleSample.objects.bulk_create`` of the same
  sample rows, one transaction.

Also printed, for reading the figures: validation alone and ``POST /api/v1/telemetry/``
through the Django stack (authentication, validation, the buffer row; the writer stores later).

Goals (exit 1 on a miss), on the medians:
  * ingest path rows/s >= 0.5 x raw COPY rows/s (it does more than COPY the rows);
  * ingest path rows/s >= bulk_create rows/s.
Smallest setting: ``--samples 20 --runs 1``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import at_least, bench_database  # noqa: E402

BENCH_DB = "bench_ingest"

GOAL_COPY_RATIO = 0.5
GOAL_BULK_RATIO = 1.0
MODULES = 4
BULK_BATCH = int(os.environ.get("BENCH_BULK_BATCH", "1000"))  # rows per INSERT


def _measure(samples: int, runs: int) -> dict[str, list[float]]:
    import msgspec
    import psycopg
    from django.db import transaction
    from django.utils import timezone
    from rest_framework.test import APIClient

    from apps.agents.choices import AgentKind
    from apps.agents.services import agent_token_issue, identity_of
    from apps.inventory.choices import FormFactor, TierKind
    from apps.inventory.models import Module, ModuleType, Node, Rack, Tier
    from apps.telemetry.ingest.decoder import decode
    from apps.telemetry.ingest.receive import telemetry_ingest
    from apps.telemetry.models import ModuleSample, NodeSample
    from apps.telemetry.store.appender import conninfo
    from apps.telemetry.store.raw import MODULE_COLS, MODULE_TYPES, NODE_COLS, NODE_TYPES

    rack = Rack.objects.create(name="bench")
    node = Node.objects.create(hostname="bench-1", rack=rack, slot=1,
                               tier=Tier.objects.get(kind=TierKind.HYBRID_INFERENCE))
    mtype = ModuleType.objects.create(vendor="B", model="B-1", form_factor=FormFactor.M2, int8_tops=Decimal(40),
                                      power_w=10)
    modules = [Module.objects.create(serial=f"BM-{i}", module_type=mtype, node=node, slot=i) for i in range(MODULES)]
    token, key = agent_token_issue(kind=AgentKind.NODE, node=node, actor="bench")
    identity = identity_of(token)

    def payload(batch_id: str, times: list[dt.datetime]) -> dict[str, Any]:
        return {"batch_id": batch_id, "node_samples": [
            {"time": t.isoformat(), "node": node.hostname, "cpu_util": 0.5, "mem_util": 0.4, "load1": 1.5,
             "in_flight": i % 7, "threads": 100,
             "modules": [{"serial": m.serial, "util": 0.6, "temp_c": 60.0, "power_w": 9.5, "link_width": 4,
                          "link_width_expected": 4, "ecc_corrected": i, "ecc_uncorrected": 0, "errors": 0}
                         for m in modules]}
            for i, t in enumerate(times)]}

    def raw_copy(times: list[dt.datetime]) -> None:
        with psycopg.connect(conninfo()) as conn, conn.transaction(), conn.cursor() as cur:
            with cur.copy(f"COPY telemetry_nodesample ({', '.join(NODE_COLS)}) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(list(NODE_TYPES))
                for i, t in enumerate(times):
                    cp.write_row((t, node.pk, 0.5, 0.4, 1.5, i % 7, 100))
            with cur.copy(f"COPY telemetry_modulesample ({', '.join(MODULE_COLS)}) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(list(MODULE_TYPES))
                for i, t in enumerate(times):
                    for m in modules:
                        cp.write_row((t, m.pk, node.pk, 0.6, 60.0, 9.5, 4, 4, i, 0, 0))

    def bulk(times: list[dt.datetime]) -> None:
        with transaction.atomic():
            NodeSample.objects.bulk_create(
                [NodeSample(time=t, node_id=node.pk, cpu_util=0.5, mem_util=0.4, load1=1.5, in_flight=i % 7,
                            threads=100) for i, t in enumerate(times)], batch_size=BULK_BATCH)
            ModuleSample.objects.bulk_create(
                [ModuleSample(time=t, module_id=m.pk, node_id=node.pk, util=0.6, temp_c=60.0, power_w=9.5,
                              link_width=4, link_width_expected=4, ecc_corrected=i, ecc_uncorrected=0, errors=0)
                 for i, t in enumerate(times) for m in modules], batch_size=BULK_BATCH)

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")

    def http(body: dict[str, Any]) -> None:
        response = client.post("/api/v1/telemetry/", body, format="json")
        assert response.status_code == 202, response.content[:300]

    def timed(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def one_run(run: int, times: list[dt.datetime]) -> dict[str, float]:
        bodies = {name: payload(f"bench-{name}-{run:04d}", times) for name in ("ingest", "validate", "http")}
        return {
            "ingest": timed(lambda: telemetry_ingest(token=token, payload=bodies["ingest"])),
            "copy": timed(lambda: raw_copy(times)),
            "bulk": timed(lambda: bulk(times)),
            "validate": timed(lambda: decode(msgspec.json.encode(bodies["validate"]), identity=identity, tiers={},
                                             now=timezone.now())),
            "http": timed(lambda: http(bodies["http"])),
        }

    results: dict[str, list[float]] = {"ingest": [], "copy": [], "bulk": [], "validate": [], "http": []}
    # The connection the ingest path's COPY uses is Django's (already open); the baseline's is
    # opened per run (about a millisecond, inside its timing: it favours the ingest path slightly).
    for run in range(runs + 1):  # run 0 warms up (partitions, caches) and is not counted
        end = timezone.now() - dt.timedelta(minutes=5 * (runs - run))
        times = [end - dt.timedelta(seconds=samples - k) for k in range(samples)]
        figures = one_run(run, times)
        if run:
            for name, seconds in figures.items():
                results[name].append(seconds)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1000, help="node samples per batch (x5 rows)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    with bench_database(BENCH_DB):
        from django.test.utils import setup_test_environment

        setup_test_environment()  # the test client's settings (ALLOWED_HOSTS)
        results = _measure(args.samples, args.runs)

    rows = args.samples * (1 + MODULES)
    med = {k: statistics.median(v) * 1000 for k, v in results.items()}
    rate = {k: rows / ms * 1000 for k, ms in med.items()}
    print()
    print(f"batch: {args.samples} node samples + {args.samples * MODULES} module samples ({rows:,} rows); "
          f"median of {args.runs} runs; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  {'':<58}{'ms':>9}{'rows/s':>12}")
    for name, label in [("ingest", "ingest path (validate, COPY, latest state, rollup notes)"),
                        ("copy", "baseline: raw psycopg binary COPY of the same rows"),
                        ("bulk", "baseline: bulk_create of the same rows"),
                        ("validate", "  (validation alone, as the ingest path does it)"),
                        ("http", "  (POST /api/v1/telemetry/: accepted into the buffer)")]:
        print(f"  {label:<58}{med[name]:9.1f}{rate[name]:12,.0f}")
    copy_ratio, bulk_ratio = rate["ingest"] / rate["copy"], rate["ingest"] / rate["bulk"]
    goal_copy, goal_bulk = at_least(GOAL_COPY_RATIO), at_least(GOAL_BULK_RATIO)
    ok_copy, ok_bulk = copy_ratio >= goal_copy, bulk_ratio >= goal_bulk
    print()
    print(f"goal ingest rows/s >= {goal_copy:g} x raw COPY rows/s: {copy_ratio:.2f} x  "
          f"{'met' if ok_copy else 'MISSED'}")
    print(f"goal ingest rows/s >= {goal_bulk:g} x bulk_create rows/s: {bulk_ratio:.2f} x  "
          f"{'met' if ok_bulk else 'MISSED'}")
    return 0 if ok_copy and ok_bulk else 1


if __name__ == "__main__":
    sys.exit(main())
