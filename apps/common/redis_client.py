"""The one Redis client the control plane's own keys go through (leases, the Celery task counters
behind /metrics); Celery, the cache and the channel layer keep their own connections."""

from __future__ import annotations

from functools import cache

import redis
from django.conf import settings


@cache
def redis_client() -> redis.Redis:
    # Short timeouts: a lease renewal or a task counter must not hang a tick or a task on Redis.
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def redis_key(name: str) -> str:
    """``name`` under this deployment's key prefix (the cache's: CACHE_KEY_PREFIX), so two control
    planes on one Redis never share a key."""
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'cp')}:{name}"
