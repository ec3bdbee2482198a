"""Entry point: ``python -m agent.cp_agent --api URL --token KEY --node HOSTNAME``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from agent.cp_agent import __version__
from agent.cp_agent.backends import make_backend
from agent.cp_agent.client import ApiClient
from agent.cp_agent.runner import Agent
from agent.cp_agent.spool import Spool

log = logging.getLogger("cp_agent")

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="cp-agent", description="Node agent of the AI-module array control plane.")
    p.add_argument("--api", default=os.environ.get("CP_API_URL", ""), help="API base URL (env CP_API_URL)")
    p.add_argument("--token", default=os.environ.get("CP_AGENT_TOKEN", ""),
                   help="this node's agent key (env CP_AGENT_TOKEN)")
    p.add_argument("--node", default=os.environ.get("CP_NODE", socket.gethostname()),
                   help="hostname of this node in the inventory (env CP_NODE; default: the host name)")
    p.add_argument("--interval", type=float, default=float(os.environ.get("CP_INTERVAL", "5")),
                   help="seconds between samples (default 5)")
    p.add_argument("--buffer-dir", default=os.environ.get("CP_BUFFER_DIR", ""),
                   help="spool directory for unsent batches (default ~/.cache/cp-agent/<node>)")
    p.add_argument("--buffer-max", type=int, default=int(os.environ.get("CP_BUFFER_MAX", "17280")),
                   help="most batches kept while the API is unreachable; the oldest are dropped "
                        "(default 17280 = 24 h at 5 s)")
    p.add_argument("--backend", choices=["reference", "simulated", "none"],
                   default=os.environ.get("CP_BACKEND", "reference"), help="where module metrics come from")
    p.add_argument("--module", action="append", default=[], dest="modules",
                   help="module serial (repeatable); the reference backend uses the first one")
    p.add_argument("--reference-rate", type=float, default=50.0,
                   help="reference backend: INT8 inferences per second to run (default 50)")
    p.add_argument("--command-wait", type=float, default=20.0, help="long-poll seconds for commands (0-25)")
    p.add_argument("--no-commands", action="store_true", help="do not poll the command channel")
    p.add_argument("--backoff-cap", type=float, default=60.0, help="longest wait between retries, seconds")
    p.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0 = run until signalled)")
    p.add_argument("--stats-file", default="", help="write the final counters as JSON here on exit")
    p.add_argument("--log-level", default=os.environ.get("CP_LOG_LEVEL", "INFO"))
    p.add_argument("--version", action="version", version=f"cp-agent {__version__}")
    args = p.parse_args(argv)
    if not args.api or not args.token:
        p.error("--api and --token (or CP_API_URL and CP_AGENT_TOKEN) are required")
    return args


def _known_modules(client: ApiClient) -> list[str]:
    """Module serials of this node as the control plane knows them (empty when it can't be asked now)."""
    try:
        serials = [str(m["serial"]) for m in client.fetch_self().get("modules", []) if m.get("serial")]
    except Exception as exc:  # the API may be down at start: run with the backend's default
        log.warning("could not ask the API for this node's modules (%s); pass --module to name them", exc)
        return []
    log.info("modules of this node per the API: %s", ", ".join(serials) or "none")
    return serials


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    buffer_dir = Path(args.buffer_dir or Path.home() / ".cache" / "cp-agent" / args.node)
    client = ApiClient(args.api, args.token)
    if not args.modules and args.backend != "none":
        args.modules = _known_modules(client)
    agent = Agent(
        client=client,
        node=args.node,
        spool=Spool(buffer_dir, max_batches=args.buffer_max, prefix=args.node),
        backend=make_backend(args.backend, node=args.node, serials=args.modules,
                             reference_rate=args.reference_rate),
        interval=args.interval,
        backoff_cap=args.backoff_cap,
        command_wait=max(0.0, min(25.0, args.command_wait)),
        poll_commands=not args.no_commands,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    agent.start()
    stop.wait(args.duration or None)
    # On the way out, give the spool a few seconds to reach the API; what is left is sent on the next start.
    agent.stop(drain_timeout=5.0)
    if args.stats_file:
        Path(args.stats_file).write_text(json.dumps({**agent.stats.as_dict(), "spooled": len(agent.spool)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
