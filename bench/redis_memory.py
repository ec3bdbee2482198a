"""Redis memory: what the broker, the task results, the cache and the leases hold while a real
worker and beat run every schedule over the demo fleet, and what that comes to in a day.

    CONTROLPLANE_VAR_DIR=./var .venv/bin/python bench/redis_memory.py [--racks 10] [--seconds 120]

Starts the engines when DATABASE_URL / REDIS_URL are unset (or uses the servers they name),
creates a throwaway database (bench_redis, migrated; dropped at the end) with the demo fleet
(``--racks`` of 20 nodes) and the schedules of controlplane/schedules.py, then runs one Celery
worker on every queue and beat (the production commands) for ``--seconds``. Telemetry is not
played (no node goes silent: the heartbeat timeout is a day), so the periodic tasks run over
the fleet as it stands. It reads Redis's keys by kind before and after (``MEMORY USAGE`` of
each; nothing is deleted, so it may run against a shared server) and prints, per kind, the keys
and bytes added, and the task results a day leaves behind: Celery keeps each result for
``result_expires`` (a day), so the results of one day are what stays. Telemetry never passes
through Redis (it is buffered in PostgreSQL); what grows with the nodes is the cache's keys per
node (a command's wake-up hint, ten minutes) and the websocket clients' channel-layer groups.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bench_database, stop_processes  # noqa: E402

BENCH_DB = "bench_redis"


def _kind(key: bytes) -> str:
    """Task results, the broker's keys, or the key's first segment (the cache's prefix, a lease's...)."""
    k = key.decode(errors="replace")
    for prefix, kind in (("celery-task-meta-", "task results"), ("unacked", "broker: unacknowledged"),
                         ("_kombu.binding", "broker: bindings"), ("asgi", "channel layer")):
        if k.startswith(prefix):
            return kind
    return k.split(":", 1)[0] + (":…" if ":" in k else "")


def _census(client: Any) -> tuple[Counter[str], Counter[str]]:
    keys: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for key in client.scan_iter(count=1000):
        kind = _kind(key)
        keys[kind] += 1
        size[kind] += client.memory_usage(key) or 0
    return keys, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--racks", type=int, default=10, help="20 nodes a rack (default 10: 200 nodes)")
    parser.add_argument("--seconds", type=int, default=120)
    args = parser.parse_args()

    with bench_database(BENCH_DB):
        import redis
        from django.conf import settings
        from django.core.management import call_command

        from apps.inventory.demo import seed_inventory_demo
        from apps.inventory.models import Node
        from apps.operations.demo import seed_operations_demo

        seed_operations_demo(activate=seed_inventory_demo(racks=args.racks)["to_activate"])
        call_command("sync_schedules", verbosity=0)
        nodes = Node.objects.count()
        client = redis.Redis.from_url(settings.REDIS_URL)
        used_before = int(client.info("memory")["used_memory"])
        keys_before, size_before = _census(client)
        env = {**os.environ, "NODE_HEARTBEAT_TIMEOUT_S": "86400", "LOG_LEVEL": "WARNING"}
        logs = settings.VAR_DIR / "bench-redis"
        logs.mkdir(parents=True, exist_ok=True)
        procs = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "controlplane", *cmd], cwd=ROOT, env=env,
                                  stdout=(logs / f"{name}.log").open("wb"), stderr=subprocess.STDOUT)
                 for name, cmd in (("worker", ["worker", "-Q", "default,telemetry,operations,vectors,health",
                                               "--concurrency", "2", "-l", "WARNING"]),
                                   ("beat", ["beat", "-l", "WARNING", "--schedule", str(logs / "beat-schedule")]))]
        try:
            time.sleep(args.seconds)  # the schedules run on their own clocks; this is the window measured
        finally:
            stop_processes(procs, timeout=30)
        used_after = int(client.info("memory")["used_memory"])
        keys_after, size_after = _census(client)

    print()
    print(f"{nodes} nodes, a worker and beat on every schedule for {args.seconds} s; Redis used_memory "
          f"{used_before / 1e6:.2f} MB before, {used_after / 1e6:.2f} MB after")
    print(f"  {'kind':28} {'keys added':>10} {'bytes added':>12} {'B/key':>6}")
    for kind in sorted(set(keys_after) | set(keys_before)):
        added = keys_after[kind] - keys_before[kind]
        grown = size_after[kind] - size_before[kind]
        print(f"  {kind:28} {added:>10,} {grown:>12,} {grown / added if added else 0:>6.0f}")
    results = keys_after["task results"] - keys_before["task results"]
    per_result = (size_after["task results"] - size_before["task results"]) / max(1, results)
    per_day = results / args.seconds * 86_400
    print(f"  task results: {results / args.seconds:.2f} a second, kept a day: {per_day:,.0f} keys, "
          f"{per_day * per_result / 1e6:.0f} MB at steady state")
    print("goal: none, a sizing measurement (docs/deploy.md); it exits 0 whatever the figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
