"""The lean path of ``POST /api/v1/telemetry/``: an ASGI app in front of Django.

The ingest endpoint is the one request a whole fleet makes all the time, and
Django's stack (middleware adapted across threads, DRF's request, per-request
authentication queries) cost more than the work itself. This path does only
what an agent's batch needs, on the event loop:

- ``Authorization: Agent <key>`` through the per-process identity cache
  (``identity.py``); anything else (user credentials, no credentials, other
  methods and paths) goes to Django unchanged, so those answers stay Django's;
- the body limit (413, like ``BodySizeLimitMiddleware``) and ``X-Request-ID``
  (like ``RequestIdMiddleware``); the per-key rate (429 with ``Retry-After``,
  ``receive.telemetry_rate_refusal``, as the DRF view);
- validation by ``decoder.fast_decode`` (no database); a batch it cannot accept
  goes to ``receive.telemetry_receive`` in a thread, the same code the DRF view
  runs, so errors and edge cases are answered exactly as there;
- group commit into the durable buffer (``appender.GroupAppender``); 202 once
  committed, 200 for a resend; 503 while the database is unreachable.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from apps.agents.identity import AgentIdentity, identities
from apps.common.metrics import ingest_answered
from apps.telemetry.batch import BatchRejected
from apps.telemetry.ingest.decoder import NeedsFullCheck, fast_decode
from apps.telemetry.ingest.receive import telemetry_rate_refusal, telemetry_receive
from apps.telemetry.ingest.responses import accepted, rejection
from apps.telemetry.store.appender import GroupAppender

log = logging.getLogger(__name__)

PATH = "/api/v1/telemetry/"
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]


class _TooLarge(Exception):
    pass


def _slow_receive(identity: AgentIdentity, body: bytes, now: dt.datetime) -> tuple[int, dict[str, Any]]:
    """The complete check and a synchronous append, in a worker thread (Django's connection)."""
    try:
        try:
            return accepted(telemetry_receive(identity=identity, body=body, now=now))
        except BatchRejected as exc:
            return rejection(exc)
    finally:
        close_old_connections()


class TelemetryIngestApp:
    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app
        self.appender = GroupAppender()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"").split()
        if len(auth) != 2 or auth[0].lower() != b"agent":
            await self.app(scope, receive, send)  # users and malformed credentials: Django's answers
            return
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _SAFE_ID.match(given) else uuid.uuid4().hex
        status, data, extra = await self._handle(auth[1], headers, receive)
        ingest_answered(status, data)
        body = msgspec.json.encode(data)
        out = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"x-request-id", request_id.encode()), *extra]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body})

    async def _handle(self, raw_key: bytes, headers: dict[bytes, bytes], receive: Receive
                      ) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]:
        limit = int(getattr(settings, "MAX_BODY_BYTES", 0) or 0)
        try:
            length = int(headers.get(b"content-length", b"0") or 0)
        except ValueError:
            length = 0
        if limit and length > limit:
            return 413, {"detail": f"request body of {length} bytes exceeds the limit of {limit} bytes"}, []
        try:
            body = await self._body(receive, limit)
        except _TooLarge:
            return 413, {"detail": f"request body exceeds the limit of {limit} bytes"}, []
        try:
            key = raw_key.decode()
        except UnicodeError:
            return 401, {"detail": "invalid Agent key"}, [(b"www-authenticate", b"Agent")]
        now = dt.datetime.now(dt.UTC)
        try:
            await self.appender.start()
            identity = await identities.alookup(key, self.appender.query)
        except Exception as exc:
            log.warning("agent key lookup failed: %s", exc)
            return 503, {"detail": "telemetry storage is unavailable; retry later"}, [(b"retry-after", b"1")]
        if identity is None:
            return 401, {"detail": "unknown or revoked agent key"}, [(b"www-authenticate", b"Agent")]
        refusal = telemetry_rate_refusal(identity)
        if refusal is not None:
            return 429, refusal[0], [(b"retry-after", str(refusal[1]).encode())]
        try:
            parsed = fast_decode(body, identity=identity, tiers=identities.tiers(), now=now)
        except NeedsFullCheck:
            try:
                status, data = await sync_to_async(_slow_receive, thread_sensitive=False)(identity, body, now)
            except Exception as exc:
                log.warning("ingest (complete check) failed: %s", exc)
                return 503, {"detail": "telemetry storage is unavailable; retry later"}, [(b"retry-after", b"1")]
            if status in (200, 202):
                identities.forget(identities.cached(key)[0])  # e.g. a module new to the node: reload it
            return status, data, []
        try:
            result = await self.appender.append(identity, parsed, now)
        except Exception:
            return 503, {"detail": "telemetry storage is unavailable; retry later"}, [(b"retry-after", b"1")]
        identities.note_use(identity, now)
        status, data = accepted(result)
        return status, data, []

    async def _body(self, receive: Receive, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if limit and size > limit:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)
