from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand

from apps.simulator.demo import seed_demo


class Command(BaseCommand):
    help = "Seed the demo fleet, its users, agent keys and autoscaler policies (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("sync_schedules")
        result = seed_demo()
        self.stdout.write(
            f"demo fleet: {result['nodes']} nodes ({result['nodes_created']} new, {result['nodes_activated']} "
            f"activated), {result['modules']} modules"
        )
