"""``manage.py telemetry_writer``: store buffered telemetry batches (one or more per deployment)."""

from __future__ import annotations

import logging
import signal
from typing import Any

from django.core.management.base import BaseCommand

from apps.telemetry.store.writer import Writer


class Command(BaseCommand):
    help = "Move accepted telemetry batches from the buffer into the raw tables and the latest state."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=0.25, help="seconds between polls when idle")
        parser.add_argument("--batch", type=int, default=1000, help="batches per transaction at most")
        parser.add_argument("--duration", type=float, default=0.0, help="stop after N seconds (0 = until stopped)")

    def handle(self, *args: Any, **opts: Any) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        writer = Writer(interval=opts["interval"], batch=opts["batch"])
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: writer.stop())
        self.stdout.write(f"telemetry writer: up to {opts['batch']} batch(es) per transaction", ending="\n")
        self.stdout.flush()
        stats = writer.run(duration=opts["duration"] or None)
        self.stdout.write(f"telemetry writer stopped: {stats}")
