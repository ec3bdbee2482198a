"""The one Celery app. Queues are named by the kind of work; every periodic
schedule is declared in ``controlplane/schedules.py`` and stored in the
database (django-celery-beat) by ``manage.py sync_schedules``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_default_queue = "default"
app.conf.task_routes = {
    "apps.telemetry.tasks.*": {"queue": "telemetry"},
}
app.autodiscover_tasks()
