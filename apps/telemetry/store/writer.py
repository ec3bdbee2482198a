"""The telemetry writer: the process that moves buffered batches into the raw tables.

A loop around ``ingest.telemetry_store_pending``: it takes up to ``batch``
buffered batches per transaction, goes straight on while a backlog remains,
and otherwise polls every ``interval`` seconds (0.25 by default, so the latest
state the dashboard reads lags the 202 by well under a second).

When PostgreSQL goes away (a restart, a failover) a pass fails: the writer
drops its connection and tries again with exponential backoff and jitter
(0.5 s doubling to 15 s), logging once per outage; nothing buffered is lost,
since a pass that did not commit left its batches in the buffer.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass

from django.db import DatabaseError, InterfaceError, close_old_connections, connection

from apps.telemetry.store.raw import telemetry_store_pending

log = logging.getLogger(__name__)


@dataclass
class WriterStats:
    passes: int = 0
    batches: int = 0
    rows: int = 0
    failures: int = 0
    outages: int = 0


def _drop_connection() -> None:
    try:
        connection.close()
    except Exception:  # the connection is already broken; Django forgets it either way
        connection.connection = None


class Writer:
    def __init__(self, *, interval: float = 0.25, batch: int = 1000, backoff_base: float = 0.5,
                 backoff_cap: float = 15.0) -> None:
        self.interval = interval
        self.batch = batch
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.stats = WriterStats()
        self.stop_event = threading.Event()

    def stop(self) -> None:
        self.stop_event.set()

    def run_once(self) -> int:
        """One pass; returns the number of batches stored. Raises on database errors."""
        result = telemetry_store_pending(limit=self.batch)
        self.stats.passes += 1
        self.stats.batches += result.batches
        self.stats.rows += result.rows
        if result.expired_rows:
            log.warning("dropped %d row(s) older than the raw retention", result.expired_rows)
        return result.batches

    def run(self, *, duration: float | None = None) -> WriterStats:
        started = time.monotonic()
        failures = 0
        while not self.stop_event.is_set():
            if duration is not None and time.monotonic() - started >= duration:
                break
            try:
                stored = self.run_once()
            except (DatabaseError, InterfaceError) as exc:
                _drop_connection()
                failures += 1
                self.stats.failures += 1
                if failures == 1:
                    self.stats.outages += 1
                delay = min(self.backoff_cap, self.backoff_base * 2 ** (failures - 1)) * (0.5 + random.random() / 2)
                level = logging.WARNING if failures == 1 or failures % 20 == 0 else logging.DEBUG
                log.log(level, "storing telemetry failed (%s); retry %d in %.1f s",
                        str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                        failures, delay)
                self.stop_event.wait(delay)
                continue
            if failures:
                log.warning("storing telemetry again after %d failed attempt(s)", failures)
                failures = 0
            if stored < self.batch:
                close_old_connections()  # hand the connection back to the pool while idle
                self.stop_event.wait(self.interval)
        return self.stats
