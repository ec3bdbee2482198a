"""Live dashboard benchmark: telemetry accepted -> websocket frame, and one web process
fanning the 1 Hz snapshot out to many websocket clients.

    CONTROLPLANE_VAR_DIR=./var .venv/bin/python bench/live.py [--clients 500] [--seconds 60]

Starts the engines if DATABASE_URL/REDIS_URL are unset, creates a throwaway database
(bench_live: migrated, the demo fleet of 60 nodes), starts ONE uvicorn process and the
broadcaster (1 s), opens N websocket clients with a viewer's session cookie, and posts a
gateway telemetry batch every 0.5 s. It measures:

* accept -> frame: from the 202 answer to a batch to the first snapshot frame that lists
  the batch id, per (batch, client) pair (the broadcaster tick bounds it: about 1 s);
* push lag: frame received minus the broadcaster's sent_at, per frame;
* CPU of the web process (and of the broadcaster) over the measured window;
* frames missed: ticks a client did not get.

Baseline, same run, same number of clients: a bare websocket server (one process, the
``websockets`` library) subscribed to a Redis pub/sub channel and forwarding each message
to every client, fed a frame of the size of the product's snapshot once a second; its
push lag (published -> received) is the floor of what any Redis-backed push can do here.

Goal (exit 1 on a miss): p95 of batch accepted -> frame received < 1.5 s (the 1 s tick
plus the fan-out). Push lag is printed beside the baseline's.

Stops its processes and drops the database at the end. Smallest setting:
``--clients 5 --seconds 3 --baseline-seconds 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import at_most, bench_database, stop_processes  # noqa: E402

BENCH_DB = "bench_live"
GOAL_S = 1.5  # p95 of batch accepted -> frame received


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


class Clients:
    def __init__(self) -> None:
        self.accepted: dict[str, float] = {}  # batch id -> when its 202 arrived
        self.latency: list[float] = []  # accept -> first frame listing it, per (batch, client)
        self.lag: list[float] = []  # receive - sent_at, per frame
        self.frames = 0
        self.seqs: dict[int, set[int]] = {}  # client -> snapshot seqs seen
        self.connected = 0
        self.failed = 0
        self.measuring = False
        self.frame_bytes = 0


async def client(n: int, url: str, cookie: str, origin: str, stats: Clients, stop: asyncio.Event) -> None:
    from websockets.asyncio.client import connect

    seen: set[str] = set()
    try:
        async with connect(url, additional_headers={"Cookie": cookie} if cookie else None,
                           origin=origin,  # type: ignore[arg-type]
                           open_timeout=60, max_size=2**22, ping_interval=None) as ws:
            stats.connected += 1
            while not stop.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=1.0)
                except TimeoutError:
                    continue
                now = time.time()
                msg = json.loads(raw)
                if msg.get("type") != "fleet.snapshot" or not stats.measuring:
                    continue
                stats.frames += 1
                stats.frame_bytes = len(raw)
                stats.lag.append(now - msg["sent_at"])
                stats.seqs.setdefault(n, set()).add(msg["data"].get("seq", -1))
                for batch in msg["data"]["ingest"]["recent_batches"]:
                    at = stats.accepted.get(batch)
                    if at is not None and batch not in seen:
                        seen.add(batch)
                        stats.latency.append(now - at)
    except Exception as exc:  # noqa: BLE001 - counted and reported
        stats.failed += 1
        if stats.failed <= 3:
            print(f"client {n}: {exc!r}", file=sys.stderr)


async def poster(api: str, key: str, stats: Clients, stop: asyncio.Event, every: float) -> int:
    import httpx

    n = 0
    async with httpx.AsyncClient(base_url=api, headers={"Authorization": f"Agent {key}"}, timeout=10) as http:
        while not stop.is_set():
            n += 1
            batch = f"bench-live-{os.getpid()}-{n:05d}"
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            body = {"batch_id": batch, "tier_samples": [
                {"time": now, "tier": "hybrid_inference", "queue_depth": n % 40, "arrivals": 300, "completions": 290,
                 "window_s": 1}]}
            res = await http.post("/api/v1/telemetry/", json=body)
            if res.status_code == 202 and stats.measuring:
                stats.accepted[batch] = time.time()
            await asyncio.sleep(every)
    return n


async def measure(args: argparse.Namespace, base: str, cookie: str, key: str, web_pid: int, bc_pid: int
                  ) -> dict[str, Any]:
    import psutil

    stats = Clients()
    stop = asyncio.Event()
    ws_url = base.replace("http://", "ws://") + "/ws/fleet/"
    tasks = []
    t0 = time.monotonic()
    for i in range(args.clients):
        tasks.append(asyncio.create_task(client(i, ws_url, cookie, base, stats, stop)))
        if i % 25 == 24:
            await asyncio.sleep(0.2)
    while stats.connected + stats.failed < args.clients and time.monotonic() - t0 < 120:
        await asyncio.sleep(0.2)
    print(f"{stats.connected} clients connected in {time.monotonic() - t0:.1f} s ({stats.failed} failed)")
    post = asyncio.create_task(poster(base, key, stats, stop, args.post_every))
    await asyncio.sleep(3)  # settle
    web, bc, me = psutil.Process(web_pid), psutil.Process(bc_pid), psutil.Process()
    load0 = os.getloadavg()[0]
    cpu0 = (sum(web.cpu_times()[:2]), sum(bc.cpu_times()[:2]), time.monotonic(), sum(me.cpu_times()[:2]))
    stats.measuring = True
    await asyncio.sleep(args.seconds)
    stats.measuring = False
    cpu1 = (sum(web.cpu_times()[:2]), sum(bc.cpu_times()[:2]), time.monotonic(), sum(me.cpu_times()[:2]))
    load1 = os.getloadavg()[0]
    stop.set()
    await asyncio.gather(post, *tasks, return_exceptions=True)

    wall = cpu1[2] - cpu0[2]
    web_cpu = (cpu1[0] - cpu0[0]) / wall
    bc_cpu = (cpu1[1] - cpu0[1]) / wall
    ticks = max((len(s) for s in stats.seqs.values()), default=0)
    missed = sum(ticks - len(s) for s in stats.seqs.values())
    lat, lag = stats.latency, stats.lag
    print()
    print(f"live dashboard bench: {stats.connected} websocket clients on one uvicorn process, "
          f"{wall:.0f} s measured, {len(stats.accepted)} batches posted, {ticks} snapshot ticks")
    print(f"{'metric':<44}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}{'n':>9}")
    for name, values in [("batch accepted -> frame received (s)", lat), ("push lag: sent_at -> received (s)", lag)]:
        print(f"{name:<44}" + "".join(f"{pct(values, q):>9.3f}" for q in (0.5, 0.95, 0.99)) +
              f"{max(values, default=float('nan')):>9.3f}{len(values):>9}")
    print(f"{'web process CPU (share of one core)':<44}{web_cpu * 100:>8.1f}%")
    print(f"{'broadcaster CPU (share of one core)':<44}{bc_cpu * 100:>8.1f}%")
    print(f"{'bench clients process CPU (share of one core)':<44}{(cpu1[3] - cpu0[3]) / wall * 100:>8.1f}%")
    print(f"{'frames received / missed':<44}{stats.frames:>9}{missed:>9}")
    print(f"machine: {os.cpu_count()} CPUs, load average {load0:.1f} at start, {load1:.1f} at end "
          "(the bench clients share the machine with the server)")
    return {"latency": lat, "lag": lag, "frame_bytes": stats.frame_bytes, "connected": stats.connected}


# ---- the baseline: a bare websocket server fed by Redis pub/sub ------------------------------------------

BARE_CHANNEL = "bench-live-bare"


async def bare_server(port: int, redis_url: str) -> None:
    """Forward every message of BARE_CHANNEL to every connected websocket client, as it is."""
    import redis.asyncio as aioredis
    from websockets.asyncio.server import ServerConnection, broadcast, serve

    clients: set[ServerConnection] = set()

    async def handler(ws: ServerConnection) -> None:
        clients.add(ws)
        try:
            await ws.wait_closed()
        finally:
            clients.discard(ws)

    pubsub = aioredis.from_url(redis_url).pubsub()
    await pubsub.subscribe(BARE_CHANNEL)
    async with serve(handler, "127.0.0.1", port, ping_interval=None, max_size=2**22, backlog=2048):
        async for message in pubsub.listen():
            if message["type"] == "message":
                broadcast(clients, message["data"].decode())


async def measure_bare(args: argparse.Namespace, port: int, redis_url: str, frame_bytes: int) -> dict[str, Any]:
    import redis.asyncio as aioredis

    stats = Clients()
    stop = asyncio.Event()
    url = f"ws://127.0.0.1:{port}/"
    tasks = []
    t0 = time.monotonic()
    for i in range(args.clients):
        tasks.append(asyncio.create_task(client(i, url, "", f"http://127.0.0.1:{port}", stats, stop)))
        if i % 25 == 24:
            await asyncio.sleep(0.2)
    while stats.connected + stats.failed < args.clients and time.monotonic() - t0 < 120:
        await asyncio.sleep(0.2)
    print(f"baseline: {stats.connected} clients connected to the bare server ({stats.failed} failed)", flush=True)
    redis = aioredis.from_url(redis_url)
    template = {"type": "fleet.snapshot", "sent_at": 0.0, "data": {"seq": 0, "ingest": {"recent_batches": []},
                                                                   "pad": ""}}
    pad = max(0, frame_bytes - len(json.dumps(template)))

    async def publish() -> None:
        seq = 0
        while not stop.is_set():
            seq += 1
            frame = {"type": "fleet.snapshot", "sent_at": time.time(),
                     "data": {"seq": seq, "ingest": {"recent_batches": []}, "pad": "x" * pad}}
            await redis.publish(BARE_CHANNEL, json.dumps(frame))
            await asyncio.sleep(1.0)

    pub = asyncio.create_task(publish())
    await asyncio.sleep(3)
    stats.measuring = True
    await asyncio.sleep(args.baseline_seconds)
    stats.measuring = False
    stop.set()
    await asyncio.gather(pub, *tasks, return_exceptions=True)
    await redis.aclose()
    return {"lag": stats.lag, "frame_bytes": stats.frame_bytes, "connected": stats.connected}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    with bench_database(BENCH_DB):
        return _run(args)


def _run(args: argparse.Namespace) -> dict[str, Any]:
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's settings (ALLOWED_HOSTS)
    procs: list[subprocess.Popen[bytes]] = []
    log = open(ROOT / "artifacts" / "bench-live-web.log", "wb")  # noqa: SIM115 - the processes' output
    try:
        from apps.accounts.services import user_ensure
        from apps.agents.services import agent_token_issue
        from apps.simulator.demo import seed_demo

        seed_demo()
        user, _ = user_ensure(username="bench-viewer", password="bench-viewer-pw-1", role="viewer")
        web_client = Client()
        web_client.force_login(user)
        cookie = f"sessionid={web_client.cookies['sessionid'].value}"
        _, key = agent_token_issue(kind="gateway", node=None, actor="bench")
        env = {**os.environ, "LOG_LEVEL": "WARNING", "DB_CONN_MAX_AGE": "60"}
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        base = f"http://127.0.0.1:{port}"
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "controlplane.asgi:application", "--host", "127.0.0.1", "--port",
             str(port), "--no-access-log", "--lifespan", "off", "--ws", "websockets", "--backlog", "2048",
             "--timeout-graceful-shutdown", "5"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen([sys.executable, "manage.py", "broadcast", "--interval", "1.0"], cwd=ROOT,
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
        import httpx

        for _ in range(200):
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(base + "/login/", timeout=1)
                break
            time.sleep(0.2)
        product = asyncio.run(measure(args, base, cookie, key, procs[0].pid, procs[1].pid))
        stop_processes(procs)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            bare_port = int(sock.getsockname()[1])
        procs.append(subprocess.Popen([sys.executable, __file__, "--bare-server", str(bare_port)], cwd=ROOT, env=env,
                                      stdout=log, stderr=subprocess.STDOUT))
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", bare_port), timeout=1):
                break
            time.sleep(0.2)
        bare = asyncio.run(measure_bare(args, bare_port, os.environ["REDIS_URL"],
                                        product["frame_bytes"] or 7000))
        return {"product": product, "bare": bare}
    finally:
        stop_processes(procs)  # before the database is dropped: the web process and broadcaster hold sessions
        log.close()


def report(args: argparse.Namespace, figures: dict[str, Any]) -> int:
    product, bare = figures["product"], figures["bare"]
    lat, lag, bare_lag = product["latency"], product["lag"], bare["lag"]
    print()
    print(f"baseline: bare websocket server + Redis pub/sub, {bare['connected']} clients, "
          f"{args.baseline_seconds:.0f} s, frames of {bare['frame_bytes']:,} bytes (the product's: "
          f"{product['frame_bytes']:,})")
    print(f"{'push lag (s)':<44}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}{'n':>9}")
    for name, values in [("product: broadcaster sent_at -> received", lag),
                         ("baseline: published -> received", bare_lag)]:
        print(f"{name:<44}" + "".join(f"{pct(values, q):>9.3f}" for q in (0.5, 0.95, 0.99)) +
              f"{max(values, default=float('nan')):>9.3f}{len(values):>9}")
    if lag and bare_lag:
        print(f"{'product / baseline push lag p95':<44}{pct(lag, 0.95) / max(pct(bare_lag, 0.95), 1e-6):>9.1f} x")
    limit = at_most(GOAL_S)
    ok = bool(lat) and pct(lat, 0.95) < limit
    print()
    print(f"goal p95 batch accepted -> frame received < {limit:g} s: {'met' if ok else 'MISSED'} "
          f"(p95 {pct(lat, 0.95):.3f} s, mean {statistics.fmean(lat) if lat else float('nan'):.3f} s)")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window")
    parser.add_argument("--baseline-seconds", type=float, default=30.0, help="measured window of the baseline")
    parser.add_argument("--post-every", type=float, default=0.5, help="seconds between telemetry batches")
    parser.add_argument("--bare-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_server:
        asyncio.run(bare_server(args.bare_server, os.environ["REDIS_URL"]))
        return 0
    (ROOT / "artifacts").mkdir(exist_ok=True)
    return report(args, run(args))


if __name__ == "__main__":
    sys.exit(main())
