"""Bearer keys stored as hashes: 256 random bits, only the SHA-256 kept, the first characters kept
to tell keys apart, and the last use written at most once a minute per key (a busy key costs no
write per request). Agent keys and service-account tokens use the same rules."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

# A key's last use is written at most this often (seconds).
TOUCH_EVERY_S = 60
PREFIX_CHARS = 8


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> tuple[str, str, str]:
    """A fresh key: (the key, shown once; its hash, stored; its prefix, stored)."""
    key = secrets.token_urlsafe(32)
    return key, hash_key(key), key[:PREFIX_CHARS]


def touch_due(last_used_at: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether a use at ``now`` should be written, given the last one written."""
    return last_used_at is None or (now - last_used_at).total_seconds() > TOUCH_EVERY_S
