"""What the benchmarks share: a throwaway database on engines of their own (the embedded ones
unless DATABASE_URL/REDIS_URL are set), Django set up and migrated on it, and dropped after the
processes and connections on it are closed; percentiles; the goals' factor.

Each benchmark puts the project on ``sys.path`` before importing this module (it runs as a
script: ``.venv/bin/python bench/<name>.py``).

Every bench with a goal exits 1 on a miss. ``BENCH_GOAL_FACTOR`` (default 1) scales every goal:
a limit ("at most") is multiplied by it and a floor ("at least") divided by it, so 0 makes every
goal impossible (a forced miss: the test of the benches checks that it exits 1)."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse, urlunparse

from controlplane.engines import running_engines


def with_db(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead."""
    return urlunparse(urlparse(url)._replace(path=f"/{name}"))


def admin_sql(url: str, *statements: str) -> None:
    """Run ``statements`` on the server's ``postgres`` database (create and drop databases)."""
    import psycopg

    with psycopg.connect(with_db(url, "postgres"), autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)  # type: ignore[arg-type]


def database_exists(url: str, name: str) -> bool:
    import psycopg

    with psycopg.connect(with_db(url, "postgres"), autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def stop_processes(procs: Iterable[subprocess.Popen[Any]], *, timeout: float = 15.0) -> None:
    """Terminate ``procs`` and wait for them; kill any still running after ``timeout`` seconds (a web
    process with hundreds of websocket clients may take longer to close them than a bench waits)."""
    procs = [p for p in procs if p.poll() is None]
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"process {proc.pid} ({str(proc.args)[:80]}) did not stop in {timeout:.0f} s: killed",
                  file=sys.stderr, flush=True)
            proc.kill()
            proc.wait()


def close_django_connections() -> None:
    """Close this process's Django connections, its pool's too (a pool keeps its connections open)."""
    from django.conf import settings

    if settings.configured:  # (asking does not load them: a bench sets DATABASE_URL first)
        from django.db import connections

        for connection in connections.all(initialized_only=True):
            connection.close()
            if getattr(connection, "pool", None) is not None:
                connection.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's wrapper only


def drop_database(url: str, name: str) -> None:
    """Drop database ``name`` once this process's connections to it are closed (Django's and its pool's). Sessions
    still on it (a process of the bench's that outlived it) are named on stderr and terminated, as a
    last resort, before the drop is tried again."""
    import psycopg

    close_django_connections()
    with psycopg.connect(with_db(url, "postgres"), autocommit=True) as conn:
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')  # type: ignore[arg-type]
            return
        except psycopg.errors.ObjectInUse:
            pass
        sessions = conn.execute("SELECT pid, application_name, state, left(query, 60) FROM pg_stat_activity "
                                "WHERE datname = %s", (name,)).fetchall()
        print(f"database {name} still has {len(sessions)} session(s), terminated before dropping it: "
              + "; ".join(f"pid {pid} {app or '?'} ({state}: {query})" for pid, app, state, query in sessions),
              file=sys.stderr, flush=True)
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


@contextmanager
def bench_database(name: str, *, keep: bool = False) -> Iterator[bool]:
    """Database ``name``, created afresh (or, with ``keep``, reused when it exists), Django set up and
    migrated on it; yields whether it is fresh (to be filled). Dropped afterwards unless ``keep``: the
    bench stops its processes before it leaves the block."""
    with running_engines() as env:
        base_url = env["DATABASE_URL"]
        fresh = not (keep and database_exists(base_url, name))
        if fresh:
            drop_database(base_url, name)
            admin_sql(base_url, f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = with_db(base_url, name)
        os.environ["REDIS_URL"] = env["REDIS_URL"]
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        try:
            import django
            from django.core.management import call_command

            django.setup()
            call_command("migrate", verbosity=0)
            yield fresh
        finally:
            if keep:
                close_django_connections()
            else:
                drop_database(base_url, name)


def goal_factor() -> float:
    """``BENCH_GOAL_FACTOR`` (default 1): how much of every goal's allowance is kept; 0 forces a miss."""
    raw = os.environ.get("BENCH_GOAL_FACTOR", "1")
    try:
        factor = float(raw)
    except ValueError:
        raise SystemExit(f"BENCH_GOAL_FACTOR must be a number >= 0, not {raw!r}") from None
    if not factor >= 0:
        raise SystemExit(f"BENCH_GOAL_FACTOR must be a number >= 0, not {raw!r}")
    return factor


def at_most(limit: float) -> float:
    """A goal's limit (the figure must stay under it), scaled by ``goal_factor()``."""
    return limit * goal_factor()


def at_least(floor: float) -> float:
    """A goal's floor (the figure must reach it), scaled by ``goal_factor()``: infinite at 0."""
    factor = goal_factor()
    return floor / factor if factor > 0 else math.inf


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (1-99) of ``values`` (inclusive method; one value is every percentile)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def alternated(measured: Callable[[], Any], baseline: Callable[[], Any], n: int, *, warmup: int
               ) -> tuple[list[float], list[float]]:
    """Milliseconds of ``n`` calls of each, alternating (after ``warmup`` untimed pairs), so that load
    from elsewhere on the machine hits the path measured and its baseline alike."""
    for _ in range(warmup):
        measured()
        baseline()
    measured_ms, baseline_ms = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        measured()
        t1 = time.perf_counter()
        baseline()
        t2 = time.perf_counter()
        measured_ms.append((t1 - t0) * 1000)
        baseline_ms.append((t2 - t1) * 1000)
    return measured_ms, baseline_ms
