"""Leases: one active process per role that must not double (beat, the broadcaster), with
standbys that take over when it dies.

A lease is a Redis key naming its holder and a fencing token (a counter that grows with every new
holder), set only if absent and with a time to live; the holder renews it on every tick. Before
acting, a holder checks that it still holds the lease (:meth:`Lease.held`): the key still names
it, and by its own monotonic clock the time to live has not run out since it last renewed. A
leader paused past its lease (SIGSTOP, a frozen VM) wakes with its deadline gone and does not act
until it has taken the lease again, which it cannot while a standby holds it. A standby takes
over within the time to live plus one of its polls after the holder stops renewing.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings

from apps.common.redis_client import redis_client, redis_key

# Take the lease if nobody holds it: the value names the holder and a fencing token that grows
# with every new holder (KEYS[2] counts them); returns the value, or nil when someone holds it.
_ACQUIRE = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local value = ARGV[1] .. '|' .. redis.call('incr', KEYS[2])
  redis.call('set', KEYS[1], value, 'PX', ARGV[2])
  return value
end
return false
"""
# Renew or release only a lease that is still ours.
_RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

# The roles that run active/standby; GET /api/v1/leases/ shows who holds each.
LEASE_NAMES = ("beat", "broadcaster")


def _key(name: str) -> str:
    return redis_key(f"lease:{name}")


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else (None if value is None else str(value))


def default_holder(role: str) -> str:
    return f"{role}@{socket.gethostname()}:{os.getpid()}"


class Lease:
    """One process's claim on a role. ``acquire()`` every tick (it renews a lease already held);
    ``held()`` right before each act."""

    def __init__(self, name: str, *, holder: str | None = None, ttl_s: float | None = None,
                 client: redis.Redis | None = None) -> None:
        self.name = name
        self.holder = holder or default_holder(name)
        self.ttl_s = float(ttl_s if ttl_s is not None else settings.LEASE_TTL_S)
        if "|" in self.holder or self.ttl_s <= 0:
            raise ValueError("a lease holder's name has no '|' and a lease lives a positive time")
        self._client = client
        self.key = _key(name)
        self.value: str | None = None  # "holder|fence" while held
        self._valid_until = 0.0  # by this process's monotonic clock

    @property
    def client(self) -> redis.Redis:
        return self._client or redis_client()

    @property
    def fence(self) -> int | None:
        return int(self.value.rsplit("|", 1)[1]) if self.value else None

    def acquire(self) -> bool:
        """Renew the lease if it is still ours, else try to take it. True when this process holds
        it for the next time to live."""
        ttl_ms = str(int(self.ttl_s * 1000))
        started = time.monotonic()  # the deadline counts from before the request: never later than Redis's
        if self.value is not None and started < self._valid_until:
            if self.client.eval(_RENEW, 1, self.key, self.value, ttl_ms) == 1:
                self._valid_until = started + self.ttl_s
                return True
        self.value = None
        taken = self.client.eval(_ACQUIRE, 2, self.key, f"{self.key}:fence", self.holder, ttl_ms)
        if taken:
            self.value = _text(taken)
            self._valid_until = started + self.ttl_s
            return True
        return False

    def held(self) -> bool:
        """Whether this process may act now: its own clock says the lease has not run out, and
        Redis still names it."""
        if self.value is None or time.monotonic() >= self._valid_until:
            return False
        return _text(self.client.get(self.key)) == self.value

    def release(self) -> None:
        if self.value is not None:
            try:
                self.client.eval(_RELEASE, 1, self.key, self.value)
            finally:
                self.value = None
                self._valid_until = 0.0


@dataclass(frozen=True)
class Holder:
    name: str
    holder: str | None
    fence: int | None
    expires_in_s: float | None


def lease_holders(client: redis.Redis | None = None) -> list[Holder]:
    """Who holds each role's lease now, and for how much longer unless renewed."""
    c: Any = client or redis_client()
    out = []
    for name in LEASE_NAMES:
        key = _key(name)
        pipe = c.pipeline()
        pipe.get(key)
        pipe.pttl(key)
        value, pttl = pipe.execute()
        if value is None:
            out.append(Holder(name=name, holder=None, fence=None, expires_in_s=None))
            continue
        holder, _, fence = str(_text(value)).rpartition("|")
        out.append(Holder(name=name, holder=holder, fence=int(fence),
                          expires_in_s=round(pttl / 1000, 3) if pttl and pttl > 0 else None))
    return out
