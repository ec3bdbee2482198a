"""Telemetry at fleet scale and through faults, on the live stack (marker ``heavy``:
CI runs these in the embedded-engine pass only).

- 64 real agents and 20 websocket clients at one web process: no 5xx, and the
  connections PostgreSQL sees never exceed the sum of the processes' pools.
- PostgreSQL, then Redis, restarted under a running stack with real agents (with
  their spools), the simulator and the broadcaster: samples flow again within
  30 s of each restart, and every sample the agents produced is stored once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import time
from typing import Any

import psycopg
import pytest
from django.db.models import Count
from django.test import Client
from django.utils import timezone
from websockets.asyncio.client import connect

from apps.accounts.services import user_ensure
from apps.inventory.choices import TierKind
from apps.inventory.models import Node
from apps.telemetry.models import NodeSample
from apps.telemetry.store.appender import conninfo
from controlplane import engines
from tests.agent.fleet import make_node
from tests.live.stack import AgentProc, LiveStack, wait_for

pytestmark = [pytest.mark.heavy, pytest.mark.live]

# Pool sizes given to each process of the stack (DB_POOL_MAX_SIZE; the web process also
# has its ingest pool, TELEMETRY_INGEST_POOL_SIZE).
WEB_POOL, INGEST_POOL, WRITER_POOL, BROADCASTER_POOL, SIMULATOR_POOL = 8, 4, 2, 2, 2


def _pooled(name: str, size: int) -> dict[str, str]:
    return {"DB_POOL_MAX_SIZE": str(size), "DB_POOL_MIN_SIZE": "1", "DB_APPLICATION_NAME": name}


class ConnectionWatch:
    """Samples pg_stat_activity for the test database every 0.1 s from its own connection."""

    def __init__(self) -> None:
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(conninfo(), autocommit=True, application_name="scale-watch") as conn:
            while not self._stop.is_set():
                # Every connection of the stack's processes (they are named scale-*).
                n = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND application_name LIKE 'scale-%%' AND application_name <> 'scale-watch'").fetchone()
                self.peak = max(self.peak, int(n[0]) if n else 0)
                self.samples += 1
                self._stop.wait(0.1)

    def __enter__(self) -> ConnectionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)


class Sockets:
    """Websocket clients on /ws/fleet/ that reconnect when dropped; counts snapshots per client."""

    def __init__(self, url: str, cookie: str, n: int) -> None:
        self.url = url.replace("http://", "ws://") + "/ws/fleet/"
        self.origin = url
        self.cookie = cookie
        self.n = n
        self.frames = [0] * n
        self.last_at = [0.0] * n
        self.connects = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _client(self, i: int) -> None:
        while not self._stop.is_set():
            try:
                async with connect(self.url, additional_headers={"Cookie": self.cookie}, origin=self.origin,  # type: ignore[arg-type]
                                   open_timeout=20, ping_interval=None, max_size=2**22) as ws:
                    self.connects += 1
                    while not self._stop.is_set():
                        try:
                            raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
                        except TimeoutError:
                            continue
                        if json.loads(raw).get("type") == "fleet.snapshot":
                            self.frames[i] += 1
                            self.last_at[i] = time.time()
            except Exception:  # dropped (a Redis restart): reconnect, as the dashboard does
                await asyncio.sleep(0.5)

    async def _main(self) -> None:
        tasks = [asyncio.create_task(self._client(i)) for i in range(self.n)]
        while not self._stop.is_set():
            await asyncio.sleep(0.1)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __enter__(self) -> Sockets:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)


def _viewer_cookie() -> str:
    user_ensure(username="scale-viewer", password="pw-scale-viewer", role="viewer")
    client = Client()
    assert client.login(username="scale-viewer", password="pw-scale-viewer")
    return f"sessionid={client.cookies['sessionid'].value}"


def _stopped_stats(agents: list[AgentProc]) -> dict[str, dict[str, Any]]:
    for a in agents:
        a.signal(15)
    out = {}
    for a in agents:
        assert a.popen is not None
        a.popen.wait(60)
        out[a.name.removeprefix("agent-")] = a.stats()
    return out


def _assert_stored_once(stats: dict[str, dict[str, Any]]) -> None:
    for host, s in stats.items():
        assert s["spooled"] == 0, (host, s)
        assert s["batches_rejected"] == 0, (host, s)
        stored = NodeSample.objects.filter(node__hostname=host)
        assert stored.count() == s["samples_produced"], (host, s)
        assert not stored.values("time").annotate(n=Count("id")).filter(n__gt=1).exists(), f"{host}: twice"


def test_it_serves_64_agents_and_20_sockets_within_its_pools(live_stack: LiveStack) -> None:
    nodes = [make_node(f"n-scale-{i:02d}", modules=1, slot=i % 40, rack=f"rack-s{i // 40}") for i in range(64)]
    cookie = _viewer_cookie()
    live_stack.writer(env=_pooled("scale-writer", WRITER_POOL))
    live_stack.web(writer=False, env={**_pooled("scale-web", WEB_POOL),
                                      "TELEMETRY_INGEST_POOL_SIZE": str(INGEST_POOL), "LIVE_LOG_LEVEL": "WARNING"})
    live_stack.broadcaster(interval=1.0, env=_pooled("scale-broadcaster", BROADCASTER_POOL))
    budget = WEB_POOL + INGEST_POOL + WRITER_POOL + BROADCASTER_POOL

    with ConnectionWatch() as watch, Sockets(live_stack.url, cookie, 20) as sockets:
        agents = []
        for node in nodes:
            agents.append(live_stack.agent(node, "--backend", "simulated", "--module", f"{node.hostname}-m0",
                                           "--log-level", "WARNING", interval=1.0))
            time.sleep(0.05)  # 64 interpreters starting at once would only measure the start
        hosts = [n.hostname for n in nodes]
        wait_for(lambda: _reporting(hosts), timeout=180,
                 what="every agent's samples to be stored")
        started, since = time.time(), timezone.now()
        frames_before = list(sockets.frames)
        # Under load for a while, counted in work rather than seconds: every agent has 20 more samples
        # stored and every socket 10 more snapshots (at 1 s each, about 20 s on an idle machine).
        wait_for(lambda: _sustained(hosts, since, samples=20), timeout=240, interval=1.0,
                 what="every agent to have 20 more samples stored")
        wait_for(lambda: all(f - b >= 10 for f, b in zip(sockets.frames, frames_before, strict=True)), timeout=120,
                 interval=1.0, what="every socket to get 10 more snapshots")
        stats = _stopped_stats(agents)
        frames = sum(sockets.frames) - sum(frames_before)

    live_stack.wait_stored()
    logs = {a.name.removeprefix("agent-"): a.log() for a in agents}
    for host, s in stats.items():  # no 5xx, no refused connection, no timeout; the agent's log says which
        assert s["send_failures"] == 0, (host, s, logs[host][-2000:])
    for host, log in logs.items():  # nor on the command channel (a client-side timeout on a busy machine is not a 5xx)
        assert "HTTP 5" not in log and "Server error" not in log, host
    assert live_stack.web_proc is not None
    web_log = live_stack.web_proc.log()  # and no request or socket of the web process died in an exception
    assert "Exception in ASGI application" not in web_log, web_log[-3000:]
    _assert_stored_once(stats)
    assert sum(s["samples_produced"] for s in stats.values()) >= 64 * 20
    assert frames >= 20 * 10, f"{frames} snapshots to 20 sockets in {time.time() - started:.0f} s"
    assert watch.samples > 100
    assert 0 < watch.peak <= budget, f"{watch.peak} connections, pools allow {budget}"
    print(f"64 agents, 20 sockets: {sum(s['samples_produced'] for s in stats.values())} samples stored once, "
          f"{frames} snapshots, peak {watch.peak} connections (pools allow {budget})")


def _reporting(hosts: list[str]) -> bool:
    missing = sorted(set(hosts) - set(NodeSample.objects.filter(node__hostname__in=hosts)
                                      .values_list("node__hostname", flat=True).distinct()))
    assert not missing, f"no samples yet from {missing}"
    return True


def _sustained(hosts: list[str], since: dt.datetime, *, samples: int) -> bool:
    counts = dict(NodeSample.objects.filter(node__hostname__in=hosts, time__gt=since).values("node__hostname")
                  .annotate(n=Count("id")).values_list("node__hostname", "n"))
    short = sorted(h for h in hosts if counts.get(h, 0) < samples)
    assert not short, f"{len(short)} agent(s) with fewer than {samples} samples stored yet, e.g. {short[:5]}"
    return True


def _flowing(hosts: list[str], since: Any) -> bool:
    got = set(NodeSample.objects.filter(node__hostname__in=hosts, time__gt=since)
              .values_list("node__hostname", flat=True).distinct())
    return got == set(hosts)


def test_it_recovers_from_postgresql_then_redis_restarts(live_stack: LiveStack) -> None:
    if not {"DATABASE_URL", "REDIS_URL"} <= set(engines.embedded()):
        pytest.skip("restarts need the embedded engines of this run (DATABASE_URL/REDIS_URL name other servers)")
    simulated = [make_node("n-sim-01", tier=TierKind.ACCESS_LOGIC, modules=0, slot=1, rack="rack-r"),
                 make_node("n-sim-02", modules=1, slot=2, rack="rack-r")]
    live_stack.tokens_file()  # the simulator plays these two nodes only
    real = [make_node(f"n-real-{i}", modules=1, slot=10 + i, rack="rack-r") for i in range(4)]
    cookie = _viewer_cookie()
    live_stack.writer(env=_pooled("restart-writer", WRITER_POOL))
    live_stack.web(writer=False, env={**_pooled("restart-web", WEB_POOL), "TELEMETRY_INGEST_POOL_SIZE": "4"})
    live_stack.broadcaster(interval=0.5, env=_pooled("restart-broadcaster", BROADCASTER_POOL))
    live_stack.simulator(interval=1.0, command_interval=2.0, env=_pooled("restart-simulator", SIMULATOR_POOL))
    agents = [live_stack.agent(n, "--backend", "simulated", "--module", f"{n.hostname}-m0", interval=0.5)
              for n in real]
    hosts = [n.hostname for n in real]
    sim_hosts = [n.hostname for n in simulated]

    with Sockets(live_stack.url, cookie, 2) as sockets:
        wait_for(lambda: _flowing(hosts + sim_hosts, timezone.now() - dt.timedelta(seconds=5)),
                 timeout=60, what="samples of every agent and of the simulator")
        wait_for(lambda: all(sockets.frames), timeout=30, what="snapshots on the sockets")
        recovery = {}
        for engine in ("postgres", "redis"):
            at = timezone.now()
            t0 = time.monotonic()
            getattr(live_stack, f"restart_{engine}")()
            wall = time.time()
            wait_for(lambda: _flowing(hosts + sim_hosts, at), timeout=30,  # noqa: B023
                     what=f"samples from every agent and the simulator after the {engine} restart")
            wait_for(lambda: all(t > wall for t in sockets.last_at), timeout=30,  # noqa: B023
                     what=f"the broadcaster's snapshots after the {engine} restart")
            recovery[engine] = time.monotonic() - t0
        time.sleep(2)
        stats = _stopped_stats(agents)

    live_stack.wait_stored(timeout=60)
    _assert_stored_once(stats)
    assert all(s["samples_produced"] >= 10 for s in stats.values())
    for name in ("writer", "broadcaster", "simulator", "web"):
        proc = next(p for p in live_stack.procs if p.name == name)
        assert proc.alive(), f"{name} died:\n{proc.log()[-2000:]}"
    assert Node.objects.filter(hostname__in=hosts).count() == 4
    print(f"recovered after the PostgreSQL restart in {recovery['postgres']:.1f} s, "
          f"after the Redis restart in {recovery['redis']:.1f} s")
