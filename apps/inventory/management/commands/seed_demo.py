from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand

from apps.inventory.demo import seed_demo


class Command(BaseCommand):
    help = "Seed the demo fleet and the demo users (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("sync_schedules")
        result = seed_demo()
        for hook in _extra_seeders():
            hook()
        self.stdout.write(
            f"demo fleet: {result['nodes']} nodes ({result['nodes_created']} new), {result['modules']} modules"
        )


def _extra_seeders() -> list[Any]:
    """Other apps' demo data: agent tokens, autoscaler policies."""
    from apps.operations.demo import seed_operations_demo
    from apps.telemetry.demo import seed_telemetry_demo

    return [seed_telemetry_demo, seed_operations_demo]
