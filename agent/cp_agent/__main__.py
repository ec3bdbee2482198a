"""Entry point: ``python -m agent.cp_agent --api URL --token KEY --node HOSTNAME``, or, on a node with no
key yet, ``python -m agent.cp_agent --api URL --bootstrap-token T`` (it joins, waits for approval, keeps
the key it is given in its buffer dir and reports with it)."""

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
from typing import Any

from agent.cp_agent import __version__, enrol
from agent.cp_agent.backends import make_backend
from agent.cp_agent.backoff import Backoff
from agent.cp_agent.client import ApiClient
from agent.cp_agent.commands import CommandRegistry
from agent.cp_agent.holders import make_holders
from agent.cp_agent.hooks import ACTIONS, DEFAULT_TIMEOUT_S, Hook, register_actions
from agent.cp_agent.inflight import SPEC_HELP, make_in_flight
from agent.cp_agent.latency import LatencyLog
from agent.cp_agent.runner import MAX_SAMPLES_PER_BATCH, Agent
from agent.cp_agent.spool import Spool
from agent.cp_agent.vectors import VectorRunner

log = logging.getLogger("cp_agent")


def _option(kind: str) -> str:
    return kind.replace("_", "-")


def _env(kind: str) -> str:
    return f"CP_ON_{kind.upper()}"


def _pairs(values: list[str], what: str, p: argparse.ArgumentParser) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            p.error(f"{what}: expected KEY=VALUE, got {value!r}")
        out[key] = rest
    return out


def _timeouts(values: list[str], p: argparse.ArgumentParser) -> tuple[float, dict[str, float]]:
    """``--hook-timeout 300`` (every hook) and ``--hook-timeout drain=900`` (one kind)."""
    default, per_kind = DEFAULT_TIMEOUT_S, {}
    for value in values:
        kind, sep, seconds = value.rpartition("=")
        try:
            t = float(seconds)
        except ValueError:
            t = -1.0
        if t <= 0:
            p.error(f"--hook-timeout: {value!r}: seconds must be a number above 0")
        if not sep:
            default = t
        elif kind not in ACTIONS:
            p.error(f"--hook-timeout: {kind!r} is not an action ({', '.join(ACTIONS)})")
        else:
            per_kind[kind] = t
    return default, per_kind

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="cp-agent", description="Node agent of the AI-module array control plane.")
    p.add_argument("--api", default=os.environ.get("CP_API_URL", ""), help="API base URL (env CP_API_URL)")
    p.add_argument("--token", default=os.environ.get("CP_AGENT_TOKEN", ""),
                   help="this node's agent key (env CP_AGENT_TOKEN)")
    enrol = p.add_argument_group("joining", "a node with no key joins with a bootstrap token: it sends its host's "
                                 "facts and modules, waits for an admin (or the token's policy) to approve, stores "
                                 "the node key it is given (0600) in --buffer-dir and reports with it; a later "
                                 "start uses the stored key")
    enrol.add_argument("--bootstrap-token", default=os.environ.get("CP_BOOTSTRAP_TOKEN", ""),
                       help="the bootstrap token an admin issued (env CP_BOOTSTRAP_TOKEN)")
    enrol.add_argument("--location", default=os.environ.get("CP_LOCATION", ""), metavar="RACK/SLOT",
                       help="where the node sits, prefilling the approval (default: the chassis asset tag)")
    enrol.add_argument("--discover", default=os.environ.get("CP_DISCOVER", "none"), metavar="command:CMD",
                       help="how the modules are found: command:CMD runs a vendor tool that prints a JSON list of "
                            "{serial, vendor, model, slot, pcie_lanes, firmware_version, driver_version, "
                            "framework_version}; exporter: read them from --backend exporter:URL through its "
                            "--mapping's [discover] table; none: no modules (default)")
    enrol.add_argument("--machine-id", default=os.environ.get("CP_MACHINE_ID", ""),
                       help="the host's stable id, by which a re-join is matched (default: /etc/machine-id)")
    enrol.add_argument("--facts", default=os.environ.get("CP_FACTS", ""), metavar="FILE",
                       help="a JSON object of host facts that replace what the host tells (e.g. "
                            '{"ecc_memory": true, "memory_channels": 8} where only the BMC knows)')
    enrol.add_argument("--enrol-poll", type=float, default=10.0, metavar="SECONDS",
                       help="seconds between polls while the join waits for approval (default 10)")
    p.add_argument("--node", default=os.environ.get("CP_NODE", socket.gethostname()),
                   help="hostname of this node in the inventory (env CP_NODE; default: the host name)")
    p.add_argument("--interval", type=float, default=float(os.environ.get("CP_INTERVAL", "5")),
                   help="seconds between samples (default 5)")
    p.add_argument("--buffer-dir", default=os.environ.get("CP_BUFFER_DIR", ""),
                   help="spool directory for unsent batches (default ~/.cache/cp-agent/<node>)")
    p.add_argument("--buffer-max", type=int, default=int(os.environ.get("CP_BUFFER_MAX", "17280")),
                   help="most batches kept while the API is unreachable; the oldest are dropped "
                        "(default 17280 = 24 h at the default 5 s send interval)")
    p.add_argument("--send-interval", type=float, default=float(os.environ.get("CP_SEND_INTERVAL", "5")),
                   help="seconds between batches sent to the API; a batch holds the samples taken since, at most "
                        f"{MAX_SAMPLES_PER_BATCH} (default 5)")
    p.add_argument("--in-flight-from", default=os.environ.get("CP_IN_FLIGHT_FROM", ""),
                   help=f"where requests in flight come from (required; env CP_IN_FLIGHT_FROM): {SPEC_HELP}. "
                        "With none, or while a read fails, in_flight is reported as null (unknown) and a drain "
                        "waits for its deadline")
    p.add_argument("--holders-from", default=os.environ.get("CP_HOLDERS_FROM", "none"), metavar="command:CMD",
                   help="the processes holding the modules, so a drain waits for them: command:CMD prints a JSON "
                        "list of {pid, name, module} (module: a serial, or a --module-alias value such as a device "
                        "file); none: not looked at (default)")
    p.add_argument("--latency-log", default=os.environ.get("CP_LATENCY_LOG", ""), metavar="PATH",
                   help="a file the serving process appends '<stage> <ms>' lines to, one per request stage; each "
                        "sample sends the latencies added since as log-bucket histograms (wire contract 3; "
                        "env CP_LATENCY_LOG). Without it no latencies are sent and the agent speaks contract 2")
    p.add_argument("--backend", default=os.environ.get("CP_BACKEND", "reference"),
                   help="where module metrics come from: reference, simulated, none or exporter:URL (env CP_BACKEND)")
    p.add_argument("--mapping", default=os.environ.get("CP_MAPPING", ""),
                   help="exporter backend: the mapping of its series to module fields, a TOML file or a shipped "
                        "name (dcgm-exporter) (env CP_MAPPING)")
    p.add_argument("--module-alias", action="append", default=[], metavar="VALUE=SERIAL",
                   help="exporter backend: report the module whose label value is VALUE as SERIAL (repeatable)")
    p.add_argument("--module", action="append", default=[], dest="modules",
                   help="module serial (repeatable); the reference backend uses the first one, the exporter backend "
                        "reports only these (default: the node's modules per the API)")
    hooks = p.add_argument_group("action hooks", "a command run through /bin/sh when the control plane sends the "
                                 "action, with CP_NODE, CP_COMMAND_ID, CP_COMMAND_KIND, CP_ARGS (JSON) and "
                                 "CP_ARG_<NAME> in its environment; exit 0 = succeeded. Without one the action is "
                                 "acknowledged succeeded with hook null (install-versions: failed)")
    for kind, what in ACTIONS.items():
        hooks.add_argument(f"--on-{_option(kind)}", dest=f"on_{kind}", default=os.environ.get(_env(kind), ""),
                           metavar="CMD", help=f"{what} (env {_env(kind)})")
    hooks.add_argument("--hook-timeout", action="append", default=[], metavar="[KIND=]SECONDS",
                       help=f"kill a hook running longer (default {DEFAULT_TIMEOUT_S:g} s); KIND=SECONDS for one "
                            "action (repeatable)")
    hooks.add_argument("--progress-after", type=float, default=5.0,
                       help="acknowledge a command still running after this many seconds as in_progress (default 5)")
    p.add_argument("--reference-rate", type=float, default=50.0,
                   help="reference backend: INT8 inferences per second to run (default 50)")
    p.add_argument("--command-wait", type=float, default=20.0, help="long-poll seconds for commands (0-25)")
    p.add_argument("--no-commands", action="store_true", help="do not poll the command channel")
    p.add_argument("--backoff-cap", type=float, default=60.0, help="longest wait between retries, seconds")
    p.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0 = run until signalled)")
    p.add_argument("--flush-on-stop", type=float, default=5.0, metavar="SECONDS",
                   help="on SIGTERM, keep sending the spool this long before exiting; what is left is sent on the "
                        "next start (default 5)")
    p.add_argument("--stats-file", default="", help="write the final counters as JSON here on exit")
    p.add_argument("--log-level", default=os.environ.get("CP_LOG_LEVEL", "INFO"))
    p.add_argument("--version", action="version", version=f"cp-agent {__version__}")
    args = p.parse_args(argv)
    if not args.api or not (args.token or args.bootstrap_token):
        p.error("--api and --token (or CP_API_URL and CP_AGENT_TOKEN) are required; a node with no key yet "
                "joins with --bootstrap-token")
    if args.enrol_poll <= 0:
        p.error("--enrol-poll must be above 0")
    if not args.in_flight_from:
        p.error(f"--in-flight-from is required: {SPEC_HELP} (say none explicitly when the node has no serving "
                "process to ask; in_flight is then reported as unknown)")
    if args.interval <= 0 or args.send_interval <= 0:
        p.error("--interval and --send-interval must be above 0")
    try:
        args.in_flight = make_in_flight(args.in_flight_from, timeout=min(2.0, args.interval))
    except ValueError as exc:
        p.error(f"--in-flight-from {exc}")
    args.aliases = _pairs(args.module_alias, "--module-alias", p)
    try:
        args.holders = make_holders(args.holders_from, aliases=args.aliases, timeout=min(5.0, max(1.0, args.interval)))
    except ValueError as exc:
        p.error(f"--holders-from {exc}")
    default, per_kind = _timeouts(args.hook_timeout, p)
    args.hooks = {kind: Hook(kind, getattr(args, f"on_{kind}"), per_kind.get(kind, default))
                  for kind in ACTIONS if getattr(args, f"on_{kind}")}
    return args


# Backends that execute regression test vectors (on ONNX Runtime, on the CPU).
RUNS_VECTORS = frozenset({"reference", "simulated"})


def _known_modules(client: ApiClient) -> list[str]:
    """Module serials of this node as the control plane knows them (empty when it can't be asked now)."""
    try:
        serials = [str(m["serial"]) for m in client.fetch_self().get("modules", []) if m.get("serial")]
    except Exception as exc:  # the API may be down at start: run with the backend's default
        log.warning("could not ask the API for this node's modules (%s); pass --module to name them", exc)
        return []
    log.info("modules of this node per the API: %s", ", ".join(serials) or "none")
    return serials


def _enrolled(args: argparse.Namespace, buffer_dir: Path, stop: threading.Event) -> int:
    """Give ``args`` a node key and the node's hostname: the one stored by an earlier join, or a new join's
    once approved. 0 when it has them; otherwise the exit code (stopped while waiting: 0 too)."""
    stored = enrol.stored_identity(buffer_dir)
    if stored is not None:
        args.token, args.node = stored.key, stored.hostname or args.node
        log.info("using the node key stored in %s (node %s)", buffer_dir / enrol.KEY_FILE, args.node)
        return 0
    try:
        facts = enrol.host_facts()
        if args.facts:
            facts.update(enrol.load_facts_file(args.facts))
        modules = enrol.discover_modules(args.discover, exporter=_exporter_for_discovery(args))
        machine = args.machine_id or enrol.machine_id()
        if not machine:
            raise enrol.EnrolError("no machine id: /etc/machine-id is unreadable; give --machine-id")
        enroller = enrol.Enroller(api_url=args.api, bootstrap_token=args.bootstrap_token, buffer_dir=buffer_dir,
                                  hostname=args.node, machine_id=machine, facts=facts, modules=modules,
                                  location_hint=args.location or facts.get("asset_tag") or "",
                                  poll_s=args.enrol_poll)
        try:
            identity = enroller.run(stop, Backoff(cap=args.backoff_cap))
        finally:
            enroller.close()
    except enrol.EnrolError as exc:
        log.error("%s", exc)
        return exc.code
    if identity is None:
        return 0
    args.token, args.node = identity.key, identity.hostname
    return 0


def _exporter_for_discovery(args: argparse.Namespace) -> Any:
    """The exporter backend a join discovers its modules with (``--discover exporter``), or None."""
    if args.discover != "exporter" or not args.backend.startswith("exporter:"):
        return None
    try:
        return make_backend(args.backend, node=args.node, serials=[], mapping=args.mapping, aliases=args.aliases)
    except ValueError as exc:
        raise enrol.EnrolError(f"--discover exporter: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    buffer_dir = Path(args.buffer_dir or Path.home() / ".cache" / "cp-agent" / args.node)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if not args.token:
        code = _enrolled(args, buffer_dir, stop)
        if code or stop.is_set():
            return code
    client = ApiClient(args.api, args.token)
    if not args.modules and args.backend != "none":
        args.modules = _known_modules(client)
    try:
        backend = make_backend(args.backend, node=args.node, serials=args.modules,
                               reference_rate=args.reference_rate, mapping=args.mapping, aliases=args.aliases)
    except ValueError as exc:
        log.error("%s", exc)
        client.close()
        return 2
    commands = CommandRegistry()
    register_actions(commands, args.hooks, node=args.node,
                     record_versions=getattr(backend, "record_versions", None))
    if backend.name in RUNS_VECTORS:
        runner = VectorRunner(client.fetch_vector)
        commands.register("run_vectors", runner.run, progress_info={"runtime": "onnxruntime CPU"})
    for kind, hook in sorted(args.hooks.items()):
        log.info("hook for %s: %r (timeout %g s)", kind, hook.command, hook.timeout_s)
    agent = Agent(
        client=client,
        node=args.node,
        spool=Spool(buffer_dir, max_batches=args.buffer_max, prefix=args.node),
        backend=backend,
        in_flight=args.in_flight, holders=args.holders,
        latency=LatencyLog(args.latency_log) if args.latency_log else None,
        interval=args.interval,
        send_interval=args.send_interval,
        backoff_cap=args.backoff_cap,
        command_wait=max(0.0, min(25.0, args.command_wait)),
        commands=commands,
        poll_commands=not args.no_commands,
        progress_after=max(0.5, args.progress_after),
    )
    agent.start()
    stop.wait(args.duration or None)
    # On the way out, give the spool some seconds to reach the API; what is left is sent on the next start.
    agent.stop(drain_timeout=max(0.0, args.flush_on_stop))
    if args.stats_file:
        Path(args.stats_file).write_text(json.dumps({**agent.stats.as_dict(), "spooled": len(agent.spool)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
