"""Tasks of the ``vectors`` queue. Each takes ids, calls ``advance`` or ``nightly`` and is safe to run twice
or on many workers at once (a run is claimed with SKIP LOCKED, results are stored once)."""

from __future__ import annotations

from celery import shared_task

from apps.vectors import advance, nightly


@shared_task(name="apps.vectors.tasks.vector_run_advance", acks_late=True, soft_time_limit=120, time_limit=150,
             expires=600)
def vector_run_advance(run_id: int) -> str | None:
    """Advance one run as far as it goes now (queued when the run is created or cancelled)."""
    return advance.run_advance(run_id)


@shared_task(name="apps.vectors.tasks.vector_runs_advance", acks_late=True, soft_time_limit=120, time_limit=150,
             expires=5)
def vector_runs_advance() -> dict[int, str | None]:
    """The sweep: advance every run that has not ended (collects answers, applies timeouts)."""
    return advance.runs_advance()


@shared_task(name="apps.vectors.tasks.vectors_nightly", acks_late=True, soft_time_limit=120, time_limit=150,
             expires=3600)
def vectors_nightly() -> dict[str, object]:
    """The nightly version-regression check: each pinned combination's suite on a sample of its modules."""
    return nightly.nightly_check()


@shared_task(name="apps.vectors.tasks.vectors_versions_changed", acks_late=True, soft_time_limit=50, time_limit=60,
             expires=55)
def vectors_versions_changed() -> dict[str, object]:
    """Check serving modules whose driver or framework changed since they were last seen."""
    return nightly.versions_changed_check()
