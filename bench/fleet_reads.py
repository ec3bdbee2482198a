"""Fleet reads at scale: the fleet snapshot and the dashboard's 24 h tier series, against bare SQL.

    CONTROLPLANE_VAR_DIR=./var .venv/bin/python bench/fleet_reads.py [--nodes 10000] [--requests 100]

Starts the embedded engines when DATABASE_URL / REDIS_URL are unset (or uses the servers
they name), creates a throwaway database (bench_fleet_reads, migrated) and drops it at
the end. The fleet: --nodes nodes (one in five in the access tier, the rest hybrid), 4
modules each, a latest-state row per node and module (fresh), 15 minutes of per-minute node
and module rollups (the snapshot's default window), 24 h of per-minute tier and stage
rollups for the three tiers, and a gateway batch (tier state and stage summaries); then one
rollup run, as the minutely job does (it also computes the snapshot's 15-minute window
figures, WindowSummary: its time is printed, it is paid once a minute, not per request).

It times, through ``django.test.Client`` with a viewer's API token (the whole stack),
alternating with its baseline so that load from elsewhere on the machine hits both alike:

* ``GET /api/v1/fleet/snapshot/`` (15-minute window) against a bare SQL read of the same
  rows: the statements the snapshot ran (captured from one request, authentication
  excepted) replayed through a plain psycopg connection, results fetched;
* ``GET /api/v1/fleet/series/queue-depth/?tier=hybrid_inference&minutes=1440`` and
  ``.../stage-latency/?tier=hybrid_inference&minutes=1440`` (the tier page's 24 h range)
  against a bare SQL read of the rollup rows the series covers (one SELECT of those rows).

Goals (exit 1 on a miss), on p95:
  * snapshot < 50 ms and < 2 x its bare SQL read;
  * each 24 h tier series < 300 ms and < 2 x its bare SQL read.
Smallest setting: ``--nodes 50 --requests 5``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import alternated, at_most, bench_database, percentile  # noqa: E402

BENCH_DB = "bench_fleet_reads"

SNAPSHOT_GOAL_MS = 50.0
SERIES_GOAL_MS = 300.0
GOAL_RATIO = 2.0
WINDOW_MINUTES = 15
SERIES_MINUTES = 1440


def _fill(n_nodes: int) -> float:
    from django.db import connection
    from django.utils import timezone

    from apps.agents.choices import AgentKind
    from apps.agents.services import agent_token_issue
    from apps.inventory.choices import TierKind
    from apps.inventory.models import Module, ModuleType, Node, Rack, Tier
    from apps.telemetry.choices import Stage
    from apps.telemetry.ingest.receive import telemetry_ingest

    t0 = time.perf_counter()
    tiers = {t.kind: t for t in Tier.objects.all()}
    per_rack = 40
    racks = Rack.objects.bulk_create(Rack(name=f"rack-{r:03d}", row=chr(65 + r % 8), position=r)
                                     for r in range((n_nodes + per_rack - 1) // per_rack))
    mtype = ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor="m2",
                                      int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)
    nodes = Node.objects.bulk_create(
        (Node(hostname=f"n-{i:05d}", rack=racks[i // per_rack], slot=i % per_rack + 1,
              tier=tiers[TierKind.ACCESS_LOGIC if i % 5 == 0 else TierKind.HYBRID_INFERENCE],
              state="active" if i % 10 else "standby", cpu_model="EPYC 4585PX")
         for i in range(n_nodes)), batch_size=2000)
    Module.objects.bulk_create(
        (Module(serial=f"AX-{node.pk:05d}-{slot}", module_type=mtype, node=node, slot=slot)
         for node in nodes for slot in range(4)), batch_size=4000)
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    with connection.cursor() as cur:
        cur.execute("""INSERT INTO telemetry_nodestatus (node_id, time, last_seen, cpu_util, mem_util, load1,
                           in_flight, threads)
                       SELECT id, %s, %s, random(), random(), 2 * random(), (random() * 8)::int, 120
                       FROM inventory_node""", [now, now])
        cur.execute("""INSERT INTO telemetry_modulestatus (module_id, node_id, time, last_seen, util, temp_c, power_w,
                           link_width, link_width_expected, ecc_corrected, ecc_uncorrected, errors)
                       SELECT id, node_id, %s, %s, random(), 40 + 30 * random(), 5 + 5 * random(), 4, 4, 0, 0, 0
                       FROM inventory_module""", [now, now])
        minutes = [minute - dt.timedelta(minutes=k) for k in range(WINDOW_MINUTES)]
        cur.execute("""INSERT INTO telemetry_noderollup (node_id, minute, samples, cpu_util_mean, cpu_util_max,
                           mem_util_mean, mem_util_max, load1_mean, in_flight_mean, in_flight_max, threads_max)
                       SELECT n.id, m, 60, random(), 1, random(), 1, 1.5, 3, 7, 120
                       FROM inventory_node n CROSS JOIN unnest(%s::timestamptz[]) AS m""", [minutes])
        cur.execute("""INSERT INTO telemetry_modulerollup (module_id, node_id, minute, samples, util_mean, util_max,
                           temp_c_mean, temp_c_max, power_w_mean, power_w_max, link_width_min,
                           link_width_expected, ecc_corrected_max, ecc_uncorrected_max, errors_max)
                       SELECT x.id, x.node_id, m, 60, random(), 1, 55, 70, 8, 10, 4, 4, 0, 0, 0
                       FROM inventory_module x CROSS JOIN unnest(%s::timestamptz[]) AS m""", [minutes])
        day = [minute - dt.timedelta(minutes=k) for k in range(SERIES_MINUTES + 10)]
        cur.execute("""INSERT INTO telemetry_tierrollup (tier_id, minute, samples, window_s, queue_depth_mean,
                           queue_depth_max, queue_depth_last, arrivals, completions, input_tokens, output_tokens)
                       SELECT t.id, m, 60, 60, 20 * random(), 40, 12, 18000, 17900, 900000, 450000
                       FROM inventory_tier t CROSS JOIN unnest(%s::timestamptz[]) AS m""", [day])
        cur.execute("""INSERT INTO telemetry_stagerollup (tier_id, stage, minute, count, p50_ms, p95_ms, p99_ms,
                           max_ms)
                       SELECT t.id, s, m, 300, 20 + 10 * random(), 80, 120, 200
                       FROM inventory_tier t CROSS JOIN unnest(%s::text[]) AS s
                       CROSS JOIN unnest(%s::timestamptz[]) AS m""", [list(Stage.values), day])
        cur.execute("ANALYZE")
    _, key = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor="bench")
    from apps.agents.models import AgentToken

    token = AgentToken.objects.get(kind=AgentKind.GATEWAY)
    stamp = now.isoformat()
    telemetry_ingest(token=token, payload={
        "batch_id": "bench-fleet-reads-0001",
        "tier_samples": [{"time": stamp, "tier": kind, "window_s": 10, "queue_depth": 12, "arrivals": 3000,
                          "completions": 2990, "input_tokens": 150000, "output_tokens": 75000}
                         for kind in tiers],
        "stage_samples": [{"time": stamp, "tier": kind, "stage": stage, "window_s": 10, "count": 300,
                           "p50_ms": 20.0, "p95_ms": 80.0, "p99_ms": 120.0, "max_ms": 200.0}
                          for kind in tiers for stage in Stage.values]})
    from apps.telemetry.rollups.rollup import telemetry_rollup

    t1 = time.perf_counter()
    telemetry_rollup()
    rollup_ms = (time.perf_counter() - t1) * 1000
    print(f"filled {n_nodes:,} nodes, {n_nodes * 4:,} modules, {n_nodes * 5 * WINDOW_MINUTES:,} node and module "
          f"rollup rows, {len(tiers) * (SERIES_MINUTES + 10) * (1 + len(Stage.values)):,} tier and stage rollup "
          f"rows in {time.perf_counter() - t0:.1f}s; one rollup run (with the window summary): {rollup_ms:.0f} ms",
          flush=True)
    return rollup_ms





def _measure(n_requests: int) -> list[dict[str, Any]]:
    import psycopg

    from apps.telemetry.store.appender import conninfo

    with psycopg.connect(conninfo(), autocommit=True) as raw:  # closed before the database is dropped
        return _measure_on(raw, n_requests)


def _measure_on(raw: Any, n_requests: int) -> list[dict[str, Any]]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from apps.accounts.services import user_ensure
    from apps.inventory.choices import TierKind
    from apps.inventory.models import Tier

    user, _ = user_ensure(username="bench-viewer", password="bench-viewer-pw", role="viewer")
    token, _ = Token.objects.get_or_create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    tier = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)

    def get(url: str) -> Callable[[], Any]:
        def call() -> Any:
            response = client.get(url)
            assert response.status_code == 200, response.content[:300]
            return response
        return call

    def replay(statements: list[str]) -> Callable[[], None]:
        def call() -> None:
            with raw.cursor() as cur:
                for sql in statements:
                    cur.execute(sql.encode())
                    if cur.description is not None:
                        cur.fetchall()
        return call

    def rollup_rows(table: str, columns: str) -> Callable[[], None]:
        def call() -> None:
            since = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=SERIES_MINUTES - 1)
            with raw.cursor() as cur:
                cur.execute(f"SELECT {columns} FROM {table} WHERE tier_id = %s AND minute >= %s ORDER BY minute",
                            [tier.pk, since])
                rows = cur.fetchall()
                assert rows
        return call

    snapshot_url = "/api/v1/fleet/snapshot/"
    get(snapshot_url)()
    with CaptureQueriesContext(connection) as ctx:
        body = get(snapshot_url)().json()
    assert sum(t["total"] for t in body["tiers"]) > 0 and body["tiers"][0]["window"]["cpu_util_mean"] is not None
    statements = [q["sql"] for q in ctx.captured_queries if "authtoken_token" not in q["sql"]]
    queue_url = f"/api/v1/fleet/series/queue-depth/?tier={tier.kind}&minutes={SERIES_MINUTES}"
    stage_url = f"/api/v1/fleet/series/stage-latency/?tier={tier.kind}&minutes={SERIES_MINUTES}"
    queue_points = len(get(queue_url)().json()["tiers"][0]["points"])
    stage_points = sum(len(s["points"]) for s in get(stage_url)().json()["tiers"][0]["stages"])
    cases = [
        (snapshot_url, f"its {len(statements)} statements replayed", get(snapshot_url), replay(statements),
         SNAPSHOT_GOAL_MS),
        (queue_url, f"{SERIES_MINUTES:,} tier rollup rows ({queue_points:,} points served)", get(queue_url),
         rollup_rows("telemetry_tierrollup", "minute, samples, window_s, queue_depth_mean, queue_depth_max, "
                                             "arrivals, completions"), SERIES_GOAL_MS),
        (stage_url, f"{SERIES_MINUTES * 6:,} stage rollup rows ({stage_points:,} points served)", get(stage_url),
         rollup_rows("telemetry_stagerollup", "stage, minute, count, p50_ms, p95_ms, p99_ms, max_ms"),
         SERIES_GOAL_MS),
    ]
    results = []
    for url, baseline, api, bare, goal in cases:
        connection.queries_log.clear()  # a full log (9,000) would hide the new entries
        with CaptureQueriesContext(connection) as ctx:
            api()
            queries = len(ctx.captured_queries)
        api_ms, bare_ms = alternated(api, bare, n_requests, warmup=5)
        results.append({"url": url, "baseline": baseline, "goal": goal, "queries": queries,
                        "api_p50": percentile(api_ms, 50), "api_p95": percentile(api_ms, 95),
                        "bare_p50": percentile(bare_ms, 50), "bare_p95": percentile(bare_ms, 95)})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()

    with bench_database(BENCH_DB):
        from django.test.utils import setup_test_environment

        setup_test_environment()  # the test client's queries log
        rollup_ms = _fill(args.nodes)
        results = _measure(args.requests)

    print()
    print(f"{args.nodes:,} nodes; {args.requests} timed requests each (ms); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    ok, limit_ratio = True, at_most(GOAL_RATIO)
    for r in results:
        ratio, limit_ms = r["api_p95"] / r["bare_p95"], at_most(r["goal"])
        met = r["api_p95"] < limit_ms and ratio < limit_ratio
        ok = ok and met
        print(f"{r['url']}  ({r['queries']} queries)")
        print(f"    API   p50 {r['api_p50']:8.2f}  p95 {r['api_p95']:8.2f}")
        print(f"    bare  p50 {r['bare_p50']:8.2f}  p95 {r['bare_p95']:8.2f}   baseline: {r['baseline']}")
        print(f"    goal p95 < {limit_ms:g} ms and < {limit_ratio:g} x bare: p95 x {ratio:.2f}  "
              f"{'met' if met else 'MISSED'}")
    print()
    print(f"rollup run, once a minute in the worker (the 15-minute window figures included): {rollup_ms:.0f} ms")
    print("all goals:", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
