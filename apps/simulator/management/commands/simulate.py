"""``manage.py simulate``: play the demo fleet against the API over HTTP."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from apps.simulator import selectors
from apps.simulator.engine import Engine
from apps.simulator.runner import FleetSimulator, Tokens
from apps.simulator.specs import Config


def _world() -> Any:
    """The fleet as the database has it, for one tick. Around it the connection goes back to
    the pool, or is dropped if it broke (a database restart), so the next tick reconnects."""
    close_old_connections()
    try:
        return selectors.world()
    finally:
        close_old_connections()


class Command(BaseCommand):
    help = "Play every demo node (and the gateway) through the telemetry and command endpoints."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--api", default="http://127.0.0.1:8000", help="API base URL")
        parser.add_argument("--speed", type=float, default=60.0,
                            help="simulated seconds per real second for the traffic curve (default 60)")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--duration", type=float, default=0.0, help="stop after N seconds (0 = run until ^C)")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples (default 5)")
        parser.add_argument("--command-interval", type=float, default=10.0,
                            help="seconds to poll every node's command channel once (default 10; 0 = off)")
        parser.add_argument("--peak-rps", type=float, default=300.0, help="requests/s at the busiest hour")
        parser.add_argument("--start-hour", type=float, default=9.0, help="simulated hour of day at the start")
        parser.add_argument("--tokens", default=str(settings.VAR_DIR / "agent-tokens.json"),
                            help="agent keys file written by seed_demo")

    def handle(self, *args: Any, **opts: Any) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        logging.getLogger("httpx").setLevel(logging.WARNING)
        path = Path(opts["tokens"])
        deadline = time.monotonic() + 60
        while not path.exists():
            if time.monotonic() > deadline:
                raise CommandError(f"{path} not found: run `manage.py seed_demo` first")
            time.sleep(1)
        engine = Engine(seed=opts["seed"], config=Config(speed=opts["speed"], peak_rps=opts["peak_rps"],
                                                          start_hour=opts["start_hour"]))
        sim = FleetSimulator(api=opts["api"], tokens=lambda: Tokens.load(path), engine=engine,
                             load_world=sync_to_async(_world), interval=opts["interval"],
                             command_interval=opts["command_interval"])

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, sim.stop)
            await sim.run(duration=opts["duration"] or None)

        asyncio.run(main())
        self.stdout.write(f"simulation stopped: {sim.stats}")
