"""What the benchmarks share: a throwaway database on engines of their own (the embedded ones
unless DATABASE_URL/REDIS_URL are set), Django set up and migrated on it; percentiles.

Each benchmark puts the project on ``sys.path`` before importing this module (it runs as a
script: ``.venv/bin/python bench/<name>.py``)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
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


@contextmanager
def bench_database(name: str, *, keep: bool = False) -> Iterator[bool]:
    """Database ``name``, created afresh (or, with ``keep``, reused when it exists), Django set up and
    migrated on it; yields whether it is fresh (to be filled). Dropped afterwards unless ``keep``."""
    with running_engines() as env:
        base_url = env["DATABASE_URL"]
        fresh = not (keep and database_exists(base_url, name))
        if fresh:
            admin_sql(base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
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
            from django.db import connections

            connections.close_all()
            if not keep:
                admin_sql(base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (1-99) of ``values`` (inclusive method)."""
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
