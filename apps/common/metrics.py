"""The control plane's own Prometheus series, declared once (``/metrics``; docs/deploy.md).

Two kinds, by where the figure lives:

- **Per process** (prometheus_client): HTTP request latency by route template, websocket clients
  and frames, telemetry ingest batches, rows and rejections. With ``PROMETHEUS_MULTIPROC_DIR``
  set (the deploy files set it; one directory per host or pod, emptied when it starts), every
  process of the host writes its figures there and ``/metrics`` sums them; without it (``make up``,
  the tests) ``/metrics`` shows the web process's own.
- **Fleet-wide**, computed when ``/metrics`` is read (apps/dashboard/metrics.py): nodes by state
  and tier, open findings, queue depth and stage latency, rollouts, Celery queue lengths, lease
  holders, and the Celery tasks' runs, failures and durations, which workers (they serve no HTTP)
  count in Redis here. Every web process answers the same fleet-wide figures: query them with
  ``max()``, not ``sum()``.

No series is per node: a fleet of 10,000 nodes must not become 10,000 × N series.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from apps.common.redis_client import redis_client, redis_key

log = logging.getLogger(__name__)

# No `_created` sample beside every counter and histogram: Prometheus needs none of them, and
# they would double the lines of a scrape.
disable_created_metrics()

REQUEST_SECONDS = Histogram(
    "controlplane_http_request_duration_seconds", "Time to answer an HTTP request, by route template.",
    ["route", "method"], buckets=(0.05, 0.25, 1.0, 5.0))
WEBSOCKET_CLIENTS = Gauge("controlplane_websocket_clients", "Websocket clients connected to /ws/.",
                          multiprocess_mode="livesum")
WEBSOCKET_FRAMES = Counter("controlplane_websocket_frames", "Frames sent to websocket clients.")
INGEST_BATCHES = Counter("controlplane_ingest_batches", "Telemetry batches answered, by outcome.", ["outcome"])
INGEST_ROWS = Counter("controlplane_ingest_rows", "Telemetry rows accepted, by table.", ["table"])
INGEST_REJECTIONS = Counter("controlplane_ingest_rejections", "Telemetry batches refused, by reason.", ["reason"])

# Why a batch was refused, by the status of the answer.
REJECTION_REASONS = {400: "invalid", 401: "unauthenticated", 403: "forbidden", 409: "conflict", 413: "too_large",
                     429: "rate_limited", 503: "unavailable"}


def ingest_answered(status: int, data: dict[str, Any]) -> None:
    """Count one answer of the telemetry endpoint (either path: the lean ASGI one or DRF's)."""
    if status == 202:
        INGEST_BATCHES.labels(outcome="accepted").inc()
        for table, rows in (data.get("accepted") or {}).items():
            INGEST_ROWS.labels(table=table).inc(rows)
    elif status == 200:
        INGEST_BATCHES.labels(outcome="duplicate").inc()
    else:
        INGEST_BATCHES.labels(outcome="rejected").inc()
        INGEST_REJECTIONS.labels(reason=REJECTION_REASONS.get(status, str(status))).inc()


# Celery task durations: few buckets, as every bucket is one more series per task.
TASK_BUCKETS = (0.1, 1.0, 10.0, 60.0)


def tasks_key() -> str:
    return redis_key("metrics:tasks")


def task_finished(*, name: str, seconds: float, failed: bool) -> None:
    """Count one run of a Celery task (called by the worker after each task). Never raises: a
    figure lost is better than a task failed for it."""
    fields: dict[str, float] = {f"{name}|runs": 1, f"{name}|sum": seconds}
    if failed:
        fields[f"{name}|failures"] = 1
    for le in TASK_BUCKETS:
        if seconds <= le:
            fields[f"{name}|le={le}"] = 1
    try:
        pipe = redis_client().pipeline(transaction=False)
        for field, value in fields.items():
            if field.endswith("|sum"):
                pipe.hincrbyfloat(tasks_key(), field, value)
            else:
                pipe.hincrby(tasks_key(), field, int(value))
        pipe.execute()
    except redis.RedisError:
        log.warning("could not count a run of %s", name, exc_info=True)


def task_figures() -> dict[str, dict[str, float]]:
    """Per task name: runs, failures, sum (seconds) and the cumulative bucket counts ``le=...``."""
    out: dict[str, dict[str, float]] = {}
    raw: Any = redis_client().hgetall(tasks_key())
    for key, value in raw.items():
        name, _, field = (key.decode() if isinstance(key, bytes) else str(key)).rpartition("|")
        out.setdefault(name, {})[field] = float(value)
    return out
