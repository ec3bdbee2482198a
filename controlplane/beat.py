"""Celery beat behind a lease: run two or more beats (``CELERY_BEAT_SCHEDULER`` names this
scheduler) and only the one holding the ``beat`` lease fires schedules; the others stand by and
take over within the lease's time to live when it stops renewing.

The schedules stay django-celery-beat's (stored in the database, edited in the admin). A beat
that takes over fires what fell due while it stood by once; the tasks are idempotent and guard
their own overlap, so a schedule fired twice around a takeover is harmless.
"""

from __future__ import annotations

import logging
from typing import Any

from django_celery_beat.schedulers import DatabaseScheduler

from apps.common.leases import Lease

log = logging.getLogger(__name__)


class LeasedDatabaseScheduler(DatabaseScheduler):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lease = Lease("beat")
        self.leading = False
        super().__init__(*args, **kwargs)
        # Renew well inside the lease's time to live, however far away the next schedule is.
        self.max_interval = min(float(getattr(self, "max_interval", 5)), self.lease.ttl_s / 3)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        try:
            held = self.lease.acquire()
        except Exception:  # Redis away: nobody can be sure to hold it, so nobody fires
            log.exception("beat lease: Redis did not answer; not firing")
            held = False
        if held != self.leading:
            log.info("beat %s %s the lease%s", self.lease.holder, "holds" if held else "lost",
                     f" (fence {self.lease.fence})" if held else "; standing by")
            self.leading = held
        if not held:
            return float(self.max_interval)
        return float(super().tick(*args, **kwargs))

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        # Fencing: a beat paused past its lease (SIGSTOP) may wake inside a tick; it must not fire.
        if not self.lease.held():
            log.warning("beat %s no longer holds the lease; not firing %s", self.lease.holder, entry.name)
            return
        super().apply_entry(entry, producer=producer)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.lease.release()  # a clean stop hands over at once
