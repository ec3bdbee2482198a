"""manage.py broadcast [--interval 1.0] [--ticks N]: push the live fleet snapshot and
change events to the websocket groups. Run two or more: one holds the ``broadcaster`` lease and
pushes, the others stand by and take over when it stops (``--no-lease``: push regardless)."""

from __future__ import annotations

import signal
import sys
from typing import Any

from django.core.management.base import BaseCommand

from apps.common.leases import Lease
from apps.dashboard.broadcaster import Broadcaster


class Command(BaseCommand):
    help = "Push the fleet snapshot about once a second, and events as changes commit, to websocket clients."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between snapshots (default 1.0)")
        parser.add_argument("--ticks", type=int, default=0, help="stop after N ticks (0 = run until stopped)")
        parser.add_argument("--no-lease", action="store_true",
                            help="push without holding the broadcaster lease (one process only)")

    def handle(self, *args: Any, **opts: Any) -> None:
        self.stdout.write(f"broadcasting every {opts['interval']} s")
        lease = None if opts["no_lease"] else Lease("broadcaster")
        # SIGTERM (a deploy, a probe's restart) ends like Ctrl-C, through the lease's release below.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        try:
            Broadcaster().run(interval=opts["interval"], ticks=opts["ticks"], lease=lease)
        except KeyboardInterrupt:
            pass
        finally:
            if lease is not None:
                lease.release()  # a clean stop hands over at once
