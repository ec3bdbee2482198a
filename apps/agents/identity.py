"""Who is sending: agent keys resolved once and kept per process.

The ingest path must not pay a database round trip per batch to learn whose
key it holds. An ``AgentIdentity`` (token, kind, node, the node's module
serials) is kept per process. The first lookup loads every active key at once
(one query), so a web process restarted under a whole fleet does not pay one
query per node; every ``TELEMETRY_KEY_CACHE_REFRESH_S`` seconds (default 10)
all of them are reloaded the same way, so a revoked key stops working and a
moved module changes owner within that time in every process (at once in the
process that revoked it). A key issued since the last round is looked up on
its own the first time it is seen. ``last_used_at`` is written in the same
round, at most once a minute per key. A key past its ``expires_at`` (the old
key of a rotation, after its overlap window) is refused at once in every
process: the expiry travels with the cached identity.

PostgreSQL hands the identities over as JSON documents of 1,000 keys each,
which msgspec decodes straight into ``AgentIdentity`` structs in a few
milliseconds; the asynchronous path serves requests between pages and, after
the first load, refreshes in the background, so a fleet of 20,000 keys never
stalls the event loop. The same SQL serves the synchronous path (Django's connection) and the lean
asynchronous path (a psycopg async connection): see ``IdentityCache``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from django.conf import settings
from django.db import connection

from apps.agents.choices import AgentKind
from apps.common.keys import hash_key, touch_due

log = logging.getLogger(__name__)

def refresh_every_s() -> float:
    return float(getattr(settings, "TELEMETRY_KEY_CACHE_REFRESH_S", 10))


class AgentIdentity(msgspec.Struct, frozen=True):
    token_id: int
    kind: str
    node_id: int | None
    hostname: str | None
    modules: dict[str, int]  # serial -> module id, the node's own modules
    last_used_at: dt.datetime | None = None
    key_hash: str = ""
    expires_at: dt.datetime | None = None

    def expired(self, now: dt.datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or dt.datetime.now(dt.UTC))

    @property
    def scope(self) -> str:
        """Whose batch ids these are: one node, or the gateway."""
        return f"node:{self.node_id}" if self.kind == AgentKind.NODE else "gateway"


_SELECT = """
    SELECT coalesce(json_agg(json_build_object(
               'key_hash', t.key_hash, 'token_id', t.id, 'kind', t.kind, 'node_id', t.node_id,
               'hostname', n.hostname, 'last_used_at', t.last_used_at, 'expires_at', t.expires_at,
               'modules', coalesce(m.modules, '{{}}'::json))), '[]')::text, max(t.id)
    FROM (SELECT * FROM telemetry_agenttoken
          WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AND {where}) t
    LEFT JOIN inventory_node n ON n.id = t.node_id
    LEFT JOIN LATERAL (SELECT json_object_agg(serial, id) AS modules FROM inventory_module
                       WHERE node_id = t.node_id) m ON t.node_id IS NOT NULL"""
BY_HASH = _SELECT.format(where="key_hash = %s")
# All active keys, a page at a time (decoding a page takes milliseconds, not the whole fleet's).
PAGE = _SELECT.format(where="id > %s ORDER BY id LIMIT %s")
PAGE_SIZE = 1000
TIERS = "SELECT coalesce(json_object_agg(kind, id), '{}')::text FROM inventory_tier"
TOUCH = "UPDATE telemetry_agenttoken SET last_used_at = %s WHERE id = ANY(%s) AND revoked_at IS NULL"

_identities = msgspec.json.Decoder(list[AgentIdentity])
_tiers = msgspec.json.Decoder(dict[str, int])

Query = Callable[[str, list[Any]], list[tuple[Any, ...]]]
AsyncQuery = Callable[[str, list[Any]], Awaitable[list[tuple[Any, ...]]]]


def sync_query(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """One statement on Django's connection: the ``Query`` of the synchronous path."""
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


def _text(rows: list[tuple[Any, ...]]) -> str:
    return str(rows[0][0]) if rows and rows[0][0] is not None else "[]"


class IdentityCache:
    """Identities by key hash, and the tiers by kind, refreshed in bulk.

    Thread-safe for the synchronous path; the asynchronous path runs on one
    event loop. ``query`` callables run one statement and return its rows.
    """

    def __init__(self) -> None:
        self._by_hash: dict[str, AgentIdentity] = {}
        self._tiers: dict[str, int] = {}
        self._used: dict[int, dt.datetime] = {}  # token id -> when last used, not yet written
        self._refreshed = 0.0
        self._lock = threading.Lock()
        self._refreshing = False
        self._background: asyncio.Task[None] | None = None

    def clear(self) -> None:
        with self._lock:
            self._by_hash = {}
            self._tiers = {}
            self._used.clear()
            self._refreshed = 0.0

    def forget(self, key_hash: str) -> None:
        with self._lock:
            self._by_hash.pop(key_hash, None)

    # -- what the ingest path asks ---------------------------------------------------------------
    def cached(self, key: str) -> tuple[str, AgentIdentity | None]:
        key_hash = hash_key(key)
        return key_hash, self._by_hash.get(key_hash)

    def note_use(self, identity: AgentIdentity, now: dt.datetime) -> None:
        if touch_due(identity.last_used_at, now):
            self._used[identity.token_id] = now

    def tiers(self) -> dict[str, int]:
        return self._tiers

    def due(self) -> bool:
        return not self._refreshing and time.monotonic() - self._refreshed >= refresh_every_s()

    # -- synchronous ----------------------------------------------------------------------------
    def lookup(self, key: str, query: Query, *, reload: bool = False) -> AgentIdentity | None:
        key_hash, identity = self.cached(key)
        if self.due():
            self.refresh(query)
            identity = self._by_hash.get(key_hash)
        if identity is None or reload:
            identity = self._store(_text(query(BY_HASH, [key_hash])), key_hash)
        return self._unexpired(key_hash, identity)

    def refresh(self, query: Query) -> None:
        """Reload every active key (a page per query) and the tiers; write pending last_used_at."""
        self._refreshing = True
        try:
            touch, now = self._touch_args()
            fresh: dict[str, AgentIdentity] = {}
            after = 0
            while True:
                rows = query(PAGE, [after, PAGE_SIZE])
                page = _identities.decode(_text(rows))
                fresh.update((i.key_hash, i) for i in page)
                if len(page) < PAGE_SIZE:
                    break
                after = int(rows[0][1])
            tiers = _text(query(TIERS, []))
            if touch:
                query(TOUCH, [now, touch])
            self._apply(fresh, tiers)
        finally:
            self._refreshing = False

    # -- asynchronous ---------------------------------------------------------------------------
    async def alookup(self, key: str, query: AsyncQuery, *, reload: bool = False) -> AgentIdentity | None:
        key_hash, identity = self.cached(key)
        if self.due():
            if not self._refreshed:
                await self.arefresh(query)  # the first: wait for it
                identity = self._by_hash.get(key_hash)
            else:  # later ones in the background, serving from the current cache meanwhile
                self._refreshing = True
                self._background = asyncio.get_running_loop().create_task(self._arefresh_logged(query))
        if identity is None or reload:
            identity = self._store(_text(await query(BY_HASH, [key_hash])), key_hash)
        return self._unexpired(key_hash, identity)

    async def _arefresh_logged(self, query: AsyncQuery) -> None:
        try:
            await self.arefresh(query)
        except Exception as exc:  # the database is away: keep serving the cached keys, retry soon
            log.warning("refreshing agent identities failed: %s", exc)

    async def arefresh(self, query: AsyncQuery) -> None:
        self._refreshing = True
        try:
            touch, now = self._touch_args()
            fresh: dict[str, AgentIdentity] = {}
            after = 0
            while True:  # the loop serves requests between pages
                rows = await query(PAGE, [after, PAGE_SIZE])
                page = _identities.decode(_text(rows))
                fresh.update((i.key_hash, i) for i in page)
                if len(page) < PAGE_SIZE:
                    break
                after = int(rows[0][1])
            tiers = _text(await query(TIERS, []))
            if touch:
                await query(TOUCH, [now, touch])
            self._apply(fresh, tiers)
        except Exception:
            self._refreshed = time.monotonic() - refresh_every_s() + 1.0  # try again in a second
            raise
        finally:
            self._refreshing = False

    # -- shared ---------------------------------------------------------------------------------
    def _touch_args(self) -> tuple[list[int], dt.datetime]:
        with self._lock:
            touch = sorted(self._used)
            self._used.clear()
        return touch, dt.datetime.now(dt.UTC)

    def _apply(self, fresh: dict[str, AgentIdentity], tiers: str) -> None:
        """Swap in a complete reload (revoked and deleted keys are not in it)."""
        by_kind = _tiers.decode(tiers)
        with self._lock:
            self._by_hash = fresh
            self._tiers = by_kind
            self._refreshed = time.monotonic()

    def _unexpired(self, key_hash: str, identity: AgentIdentity | None) -> AgentIdentity | None:
        if identity is not None and identity.expired():
            self.forget(key_hash)
            return None
        return identity

    def _store(self, text: str, key_hash: str) -> AgentIdentity | None:
        found = _identities.decode(text)
        if not found:
            self.forget(key_hash)
            return None
        with self._lock:
            self._by_hash[key_hash] = found[0]
        return found[0]


# One per process: the web process's sync and async paths share it.
identities = IdentityCache()
