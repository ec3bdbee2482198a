"""Tasks of the rollout controller (the ``default`` queue). Each is idempotent: a rollout is
claimed with SKIP LOCKED and advanced from its stored state."""

from __future__ import annotations

from celery import shared_task

from apps.rollouts import controller


@shared_task(name="apps.rollouts.tasks.rollout_advance", acks_late=True, soft_time_limit=120, time_limit=150,
             expires=600)
def rollout_advance(rollout_id: int) -> str | None:
    """Advance one rollout now (queued when it is created or controlled)."""
    return controller.rollout_advance(rollout_id)


@shared_task(name="apps.rollouts.tasks.rollouts_advance", acks_late=True, soft_time_limit=120, time_limit=150,
             expires=5)
def rollouts_advance() -> dict[int, str | None]:
    """The sweep: advance every rollout that is active or has nodes in progress."""
    return controller.rollouts_advance()
