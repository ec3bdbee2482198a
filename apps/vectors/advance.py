"""A vector run's state machine: ``run_advance`` moves a run through its phases (install and
restore for a validation run, ``validation.py``; execute for every run, ``runs.py``) and, when
it ends, lets the nightly check react (``nightly.py``).

``run_advance`` is safe to call any number of times from any number of workers: the run row is
claimed with ``SKIP LOCKED`` (a second worker skips a run another is advancing) and each step is
its own transaction.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.vectors import nightly, validation
from apps.vectors.choices import FINAL_RUN_STATES, RunPhase, RunPurpose, RunState
from apps.vectors.models import VectorRun
from apps.vectors.runs import FINAL_TARGET_STATES, collect, run_finish, run_summary, send_pending, verdict_of


def step(run_id: int) -> bool:
    """One step of one run in one transaction; True when there is more to do now."""
    with transaction.atomic():
        run = (VectorRun.objects.select_for_update(skip_locked=True).select_related("suite")
               .filter(pk=run_id).first())
        if run is None or run.state in FINAL_RUN_STATES:
            return False
        now = timezone.now()
        if run.state == RunState.QUEUED:
            run.state, run.started_at = RunState.RUNNING, now
            run.save(update_fields=["state", "started_at"])
        if run.phase == RunPhase.INSTALL:
            return validation.install_step(run, now)
        if run.phase == RunPhase.RESTORE:
            return validation.restore_step(run, now)
        if run.phase != RunPhase.EXECUTE:
            return False
        send_pending(run, now)
        collect(run, now)
        run.summary = {**run.summary, **run_summary(run)}
        if run.targets.exclude(state__in=FINAL_TARGET_STATES).exists():
            run.save(update_fields=["summary"])
            return False
        state, message = verdict_of(run, run.summary)
        if run.purpose == RunPurpose.VALIDATION:
            return validation.executed(run, state, message, now)
        run_finish(run, state, message)
        if run.purpose in (RunPurpose.NIGHTLY, RunPurpose.VERSIONS_CHANGED):
            nightly.after_nightly(run)
        return False


def run_advance(run_id: int, *, max_steps: int = 10) -> str | None:
    """Advance one run as far as it goes now; returns its state (None when unknown)."""
    for _ in range(max_steps):
        if not step(run_id):
            break
    return VectorRun.objects.filter(pk=run_id).values_list("state", flat=True).first()


def runs_advance() -> dict[int, str | None]:
    """Advance every run that has not ended (the periodic sweep)."""
    ids = list(VectorRun.objects.exclude(state__in=FINAL_RUN_STATES).order_by("id").values_list("id", flat=True))
    return {run_id: run_advance(run_id) for run_id in ids}

