"""Benchmark: list pages of the REST API against a plain ORM read of the same rows.

    .venv/bin/python bench/api_list.py [--nodes 10000] [--requests 200]

Starts the embedded engines when DATABASE_URL / REDIS_URL are unset (or uses
the servers they name), creates its own database ``bench_api`` on that
server, fills it with bulk inserts (10,000 nodes, 4 modules each, a pinned
combination and some drift), then times ``GET /api/v1/nodes/?limit=100`` and
``GET /api/v1/modules/?limit=100`` through ``django.test.Client`` (the whole
Django stack: middleware, token auth, permissions, filters, pagination,
rendering) beside the same page read with ``QuerySet.values()``.  Prints
p50/p95 in milliseconds, the API/ORM ratio and the SQL queries per request;
drops ``bench_api`` at the end. Goal (exit 1 on a miss): API p95 <= 2 x ORM p95, each list.
Smallest setting: ``--nodes 100 --requests 5`` (a page is 100 rows).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.common import alternated, at_most, bench_database, percentile  # noqa: E402

GOAL_RATIO = 2.0

BENCH_DB = "bench_api"


def _fill(n_nodes: int) -> None:
    from decimal import Decimal

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
    racks = Rack.objects.bulk_create(Rack(name=f"rack-{r:03d}", row=chr(65 + r % 8), position=r)
                                     for r in range((n_nodes + per_rack - 1) // per_rack))
    mtype = ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor="m2",
                                      int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)
    VersionCombination.objects.create(
        module_type=mtype, driver=DriverRelease.objects.create(vendor="Axon", version="2.3.1"),
        framework=FrameworkRelease.objects.create(name="axon-runtime", version="1.18.0"),
        state=CombinationState.PINNED)
    warn = [{"rule": "pcie_lanes", "field": "pcie_lanes", "message": "modules need 16 PCIe lanes; node provides 8"}]
    nodes = Node.objects.bulk_create(
        (Node(hostname=f"n-{i:05d}", rack=racks[i // per_rack], slot=i % per_rack + 1,
              tier=tiers[TierKind.ACCESS_LOGIC if i % 5 == 0 else TierKind.HYBRID_INFERENCE],
              state="active", cpu_model="EPYC 4585PX", labels={"zone": f"row-{i % 4}", "rack": f"r{i // per_rack}"},
              warnings=warn if i % 50 == 0 else [])
         for i in range(n_nodes)), batch_size=2000)
    Module.objects.bulk_create(
        (Module(serial=f"AX-{node.pk:05d}-{slot}", module_type=mtype, node=node, slot=slot,
                driver_version="2.2.9" if node.pk % 10 == 0 else "2.3.1", framework_version="1.18.0",
                firmware_version="1.0.4")
         for node in nodes for slot in range(4)), batch_size=4000)
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    print(f"filled {Node.objects.count()} nodes, {Module.objects.count()} modules in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)





def _measure(n_requests: int) -> list[dict[str, Any]]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token

    from apps.accounts.services import user_ensure
    from apps.common.values import ValuesRepresentation
    from apps.inventory import selectors
    from apps.inventory.api.serializers import ModuleSerializer, NodeSerializer
    from apps.inventory.api.views import module_queryset

    user, _ = user_ensure(username="bench-viewer", password="bench-viewer-pw", role="viewer")
    token, _ = Token.objects.get_or_create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")

    cases = [
        ("/api/v1/nodes/?limit=100", selectors.node_list().order_by("hostname"), NodeSerializer),
        ("/api/v1/modules/?limit=100", module_queryset().order_by("serial"), ModuleSerializer),
    ]
    results = []
    for url, queryset, serializer_class in cases:
        lookups = ValuesRepresentation(serializer_class()).lookups

        def api(url: str = url) -> None:
            response = client.get(url)
            assert response.status_code == 200, response.content[:300]

        first = client.get(url)
        assert first.status_code == 200 and len(first.json()["results"]) == 100, first.content[:300]

        def orm(queryset: Any = queryset, lookups: list[str] = lookups) -> None:
            rows = [row for row in queryset.values(*lookups)[:100]]
            assert len(rows) == 100

        with CaptureQueriesContext(connection) as ctx:
            api()
        api_queries = len(ctx.captured_queries)
        with CaptureQueriesContext(connection) as ctx:
            orm()
        orm_queries = len(ctx.captured_queries)
        api_ms, orm_ms = alternated(api, orm, n_requests, warmup=10)
        results.append({"url": url, "api_p50": percentile(api_ms, 50), "api_p95": percentile(api_ms, 95),
                        "orm_p50": percentile(orm_ms, 50), "orm_p95": percentile(orm_ms, 95),
                        "api_queries": api_queries, "orm_queries": orm_queries})
    # The fixed cost of any API request (stack, token, role, rendering), for reading the ratios.
    def me() -> None:
        assert client.get("/api/v1/me/").status_code == 200

    with CaptureQueriesContext(connection) as ctx:
        me()
    me_queries = len(ctx.captured_queries)
    me_ms, _ = alternated(me, lambda: None, n_requests, warmup=10)
    results.append({"url": "/api/v1/me/ (fixed cost)", "api_p50": percentile(me_ms, 50),
                    "api_p95": percentile(me_ms, 95), "api_queries": me_queries})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help=f"keep (and reuse) the {BENCH_DB} database")
    args = parser.parse_args()

    with bench_database(BENCH_DB, keep=args.keep) as fresh:
        if fresh:
            _fill(args.nodes)
        results = _measure(args.requests)

    print()
    print(f"{args.nodes} nodes, {args.nodes * 4} modules; {args.requests} timed requests each (ms)")
    header = f"{'endpoint':<30} {'API p50':>8} {'API p95':>8} {'ORM p50':>8} {'ORM p95':>8} " \
             f"{'p50 x':>6} {'p95 x':>6} {'queries API/ORM':>16}"
    print(header)
    print("-" * len(header))
    ok, limit = True, at_most(GOAL_RATIO)
    for r in results:
        if "orm_p50" not in r:
            print(f"{r['url']:<30} {r['api_p50']:8.2f} {r['api_p95']:8.2f} {'':>8} {'':>8} {'':>6} {'':>6} "
                  f"{r['api_queries']:>10}")
            continue
        ratio50, ratio95 = r["api_p50"] / r["orm_p50"], r["api_p95"] / r["orm_p95"]
        ok = ok and ratio95 <= limit
        print(f"{r['url']:<30} {r['api_p50']:8.2f} {r['api_p95']:8.2f} {r['orm_p50']:8.2f} {r['orm_p95']:8.2f} "
              f"{ratio50:6.2f} {ratio95:6.2f} {r['api_queries']:>10}/{r['orm_queries']}")
    print()
    print(f"goal API p95 <= {limit:g}x ORM p95 (each list):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
