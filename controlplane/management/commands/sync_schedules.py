import json
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from controlplane.schedules import SCHEDULES


class Command(BaseCommand):
    help = "Store every schedule of controlplane/schedules.py in the database (edits in the admin are kept)."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        for s in SCHEDULES:
            interval, _ = IntervalSchedule.objects.get_or_create(every=s.every_seconds, period=IntervalSchedule.SECONDS)
            _, created = PeriodicTask.objects.get_or_create(
                name=s.name,
                defaults={
                    "task": s.task,
                    "interval": interval,
                    "queue": s.queue,
                    "expire_seconds": s.expires_seconds,
                    "kwargs": json.dumps({}),
                },
            )
            if created:
                self.stdout.write(f"schedule {s.name}: every {s.every_seconds}s")
