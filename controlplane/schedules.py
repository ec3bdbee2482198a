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
