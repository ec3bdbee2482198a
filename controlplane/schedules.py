"""Every periodic schedule in one place.

``manage.py sync_schedules`` (run by ``make up`` and the demo seed) writes
these into django-celery-beat's tables, where operators can edit them in the
admin; an entry already present keeps its edited interval and enabled flag.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    name: str
    task: str
    every_seconds: int
    queue: str = "default"
    expires_seconds: int | None = None


SCHEDULES: list[Schedule] = []

# Telemetry (apps/telemetry/tasks.py): per-minute rollups and retention.
SCHEDULES += [
    Schedule("telemetry: per-minute rollups", "apps.telemetry.tasks.telemetry_rollup", 60,
             queue="telemetry", expires_seconds=55),
    Schedule("telemetry: retention", "apps.telemetry.tasks.telemetry_retention", 3600,
             queue="telemetry", expires_seconds=3000),
]

# Fleet operations (apps/operations/tasks.py): the drain controller and the autoscaler.
SCHEDULES += [
    Schedule("operations: advance drains and scale requests", "apps.operations.tasks.drains_advance", 5,
             expires_seconds=5),
    Schedule("operations: autoscaler", "apps.operations.tasks.autoscaler_run", 10, expires_seconds=10),
    Schedule("operations: retention", "apps.operations.tasks.operations_retention", 3600, expires_seconds=3000),
]
