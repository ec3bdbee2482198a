"""manage.py broadcast [--interval 1.0] [--ticks N]: push the live fleet snapshot and
change events to the websocket groups (one process per deployment)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from apps.dashboard.broadcaster import Broadcaster


class Command(BaseCommand):
    help = "Push the fleet snapshot about once a second, and events as changes commit, to websocket clients."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between snapshots (default 1.0)")
        parser.add_argument("--ticks", type=int, default=0, help="stop after N ticks (0 = run until stopped)")

    def handle(self, *args: Any, **opts: Any) -> None:
        self.stdout.write(f"broadcasting every {opts['interval']} s")
        try:
            Broadcaster().run(interval=opts["interval"], ticks=opts["ticks"])
        except KeyboardInterrupt:
            pass
