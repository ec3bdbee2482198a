"""Receiving a batch: the key's rate, the whole-batch check (fast path first), then the durable buffer;
or, in-process (the demo seed, tests, benchmarks), stored at once."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import msgspec
from django.conf import settings
from django.utils import timezone

from apps.agents.identity import AgentIdentity, identities, sync_query
from apps.agents.models import AgentToken
from apps.agents.services import identity_of
from apps.common.throttling import LocalWindow
from apps.telemetry.batch import BatchRejected, ParsedBatch
from apps.telemetry.ingest.decoder import decode, load_json
from apps.telemetry.store.buffer import IngestResult, stored_duplicate_of, telemetry_accept
from apps.telemetry.store.raw import telemetry_store_now

_rates = LocalWindow()


def telemetry_rate_refusal(identity: AgentIdentity, now: float | None = None) -> tuple[dict[str, Any], int] | None:
    """None while ``identity``'s key is within ``settings.TELEMETRY_RATE`` (counted in this web
    process), else the 429 body and the seconds to its Retry-After."""
    rate = getattr(settings, "TELEMETRY_RATE", "")
    wait = _rates.hit(f"agent:{identity.token_id}", rate, now)
    if wait is None:
        return None
    seconds = max(1, math.ceil(wait))
    return {"detail": f"telemetry limit of {rate} reached for this agent key; retry in {seconds} s"}, seconds


def telemetry_receive(*, identity: AgentIdentity, body: bytes, now: dt.datetime | None = None) -> IngestResult:
    """Validate a batch (the JSON body) whole and put it into the durable buffer; the
    writer stores it. Raises ``BatchRejected`` (400/403/413), except for a resend of a
    batch id already accepted, which is answered as a duplicate whatever it holds now."""
    now = now or timezone.now()
    parsed = _validated(identity, body, now)
    if isinstance(parsed, IngestResult):
        return parsed
    identities.note_use(identity, now)
    return telemetry_accept(identity=identity, parsed=parsed, now=now)


def _validated(identity: AgentIdentity, body: bytes, now: dt.datetime) -> ParsedBatch | IngestResult:
    if identities.due():
        identities.refresh(sync_query)
    try:
        return decode(body, identity=identity, tiers=identities.tiers() or _tiers(), now=now)
    except BatchRejected as exc:
        if exc.versions is not None:
            raise  # a contract version this server does not speak is refused first, resend or not
        try:
            stored = stored_duplicate_of(load_json(body), identity)
        except BatchRejected:
            stored = None
        if stored is not None:
            return stored
        raise


def _tiers() -> dict[str, int]:
    return dict(sync_query("SELECT kind, id FROM inventory_tier", []))


def telemetry_ingest(*, token: AgentToken | AgentIdentity, payload: Any, now: dt.datetime | None = None
                     ) -> IngestResult:
    """In-process ingest (the demo seed, tests, benchmarks): validated like
    ``POST /api/v1/telemetry/``, then stored at once in one transaction instead of
    through the buffer and the writer. Raises ``BatchRejected``."""
    now = now or timezone.now()
    identity = token if isinstance(token, AgentIdentity) else identity_of(token)
    parsed = _validated(identity, msgspec.json.encode(payload), now)
    if isinstance(parsed, IngestResult):
        return parsed
    return telemetry_store_now(identity=identity, parsed=parsed, now=now)
