"""Group commit in the web process: many requests' batches go into the durable
buffer in one INSERT and one commit.

Each accepted batch waits on a future; a flusher takes every batch waiting at
that moment (up to ``TELEMETRY_INGEST_GROUP_MAX``), appends them with one
statement on a connection of this process's own bounded async pool
(``TELEMETRY_INGEST_POOL_SIZE``), commits, and answers them all. While one
group commits the next one gathers, so the group grows with the load and an
idle process answers at once. A group that fails (the database restarting)
fails all its requests with 503; agents resend and batch ids keep it exactly once.
One flusher by default: while its commit is in flight the next group gathers, so
groups grow with the load instead of being split between flushers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from psycopg import AsyncConnection
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from apps.agents.identity import AgentIdentity
from apps.telemetry.batch import ParsedBatch
from apps.telemetry.store.buffer import APPEND, STORED, IngestResult, append_params, counts, stored_result

log = logging.getLogger(__name__)


def pool_size() -> int:
    return max(1, int(getattr(settings, "TELEMETRY_INGEST_POOL_SIZE", 4)))


def group_max() -> int:
    return max(1, int(getattr(settings, "TELEMETRY_INGEST_GROUP_MAX", 500)))


def conninfo() -> str:
    db = settings.DATABASES["default"]
    params = {"dbname": db["NAME"], "user": db.get("USER") or None, "password": db.get("PASSWORD") or None,
              "host": db.get("HOST") or None, "port": db.get("PORT") or None,
              "application_name": f"{db.get('OPTIONS', {}).get('application_name', 'controlplane')}-ingest"}
    return make_conninfo(**{k: v for k, v in params.items() if v})


@dataclass
class _Waiting:
    identity: AgentIdentity
    parsed: ParsedBatch
    now: dt.datetime
    future: asyncio.Future[IngestResult]


class GroupAppender:
    """One per event loop (the web process's)."""

    def __init__(self, *, size: int | None = None, flushers: int = 1) -> None:
        self.size = size or pool_size()
        self.flushers = max(1, min(flushers, self.size))
        self.pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._waiting: list[_Waiting] = []
        self._wake: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started: asyncio.Future[None] | None = None
        self.groups = 0
        self.batches = 0

    async def start(self) -> None:
        """Open the pool and start the flushers, once (concurrent first requests wait for the same start)."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        await self._started

    async def _start(self) -> None:
        # No check on checkout (a round trip per group): a connection the server dropped fails
        # its group once (503, the agents resend) and the pool replaces it.
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            conninfo(), min_size=1, max_size=self.size, open=False, timeout=5.0, name="ingest")
        await pool.open(wait=False)
        self.pool = pool
        self._wake = asyncio.Event()
        self._tasks = [asyncio.create_task(self._flusher()) for _ in range(self.flushers)]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        self._started = None
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    async def query(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """One statement on the pool (identity lookups)."""
        assert self.pool is not None
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.execute(sql, params)
            return list(await cur.fetchall()) if cur.description else []

    async def append(self, identity: AgentIdentity, parsed: ParsedBatch, now: dt.datetime) -> IngestResult:
        await self.start()
        assert self._wake is not None
        future: asyncio.Future[IngestResult] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(identity, parsed, now, future))
        self._wake.set()
        return await future

    async def _flusher(self) -> None:
        assert self._wake is not None
        while True:
            if not self._waiting:
                self._wake.clear()
                await self._wake.wait()
                continue
            group, self._waiting = self._waiting[:group_max()], self._waiting[group_max():]
            try:
                results = await self._commit(group)
            except Exception as exc:  # the database went away: fail this group, keep serving
                log.warning("ingest group of %d batch(es) failed: %s", len(group), exc)
                for w in group:
                    if not w.future.done():
                        w.future.set_exception(exc)
                continue
            for w, result in zip(group, results, strict=True):
                if not w.future.done():
                    w.future.set_result(result)

    async def _commit(self, group: list[_Waiting]) -> list[IngestResult]:
        assert self.pool is not None
        first: dict[tuple[str, str], int] = {}
        unique: list[_Waiting] = []
        for i, w in enumerate(group):
            key = (w.identity.scope, w.parsed.batch_id)
            if key not in first:
                first[key] = i
                unique.append(w)
        now = max(w.now for w in unique)
        async with self.pool.connection() as conn, conn.cursor() as cur:
            await cur.execute(APPEND, append_params([(w.identity, w.parsed) for w in unique], now))
            new = {(r[0], r[1]) for r in await cur.fetchall()}
            old = [k for k in first if k not in new]
            stored: dict[tuple[str, str], IngestResult] = {}
            if old:
                await cur.execute(STORED, [[k[0] for k in old], [k[1] for k in old]])
                stored = {(r[0], r[1]): stored_result(r) for r in await cur.fetchall()}
        self.groups += 1
        self.batches += len(group)
        out = []
        for i, w in enumerate(group):
            key = (w.identity.scope, w.parsed.batch_id)
            if first[key] == i and key in new:
                out.append(IngestResult(batch_id=w.parsed.batch_id, duplicate=False, accepted=counts(w.parsed)))
            elif key in stored:
                out.append(stored[key])
            else:  # a twin within this group: the first copy was taken
                out.append(IngestResult(batch_id=w.parsed.batch_id, duplicate=True, accepted=counts(w.parsed)))
        return out
