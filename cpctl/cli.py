"""The command line: ``cpctl [--context NAME] COMMAND ...``. Every command has ``--help`` with an
example; usage errors exit 2 before anything is sent (docs/cli.md lists the exit codes)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx

from cpctl import API_MAJOR, __version__, actions, config, errors, fleetfile, output, reads, rollouts
from cpctl.durations import seconds
from cpctl.errors import CpctlError
from cpctl.resources import KINDS
from cpctl.session import Session

Handler = Callable[[Session], int]


class _Parser(argparse.ArgumentParser):
    """Examples in the epilog keep their lines."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*a, **kw)


def _example(*lines: str) -> str:
    return "example:\n" + "\n".join(f"  {line}" for line in lines)


def _common(with_output: tuple[str, ...] | None = None) -> _Parser:
    """Options every command takes, after its name too (``cpctl get nodes --context prod``)."""
    p = _Parser(add_help=False)
    p.add_argument("--context", default=argparse.SUPPRESS, help="the context to use (default: the current one)")
    p.add_argument("--request-timeout", type=float, default=argparse.SUPPRESS, metavar="S",
                   help="seconds to wait for each answer (default 15)")
    if with_output:
        p.add_argument("-o", "--output", choices=with_output, default=with_output[0], help="output format")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cpctl", description=(
        f"The AI-module array fleet from a terminal (cpctl {__version__}, REST API {API_MAJOR}.x).\n"
        "Talks to the control plane's REST API with a user's API token or a service account's token."),
        epilog=_example("cpctl config set-context prod --server https://cp.example.org --token $TOKEN",
                        "cpctl get nodes --tier hybrid_inference --state active",
                        "cpctl drain n-r1-07 --reason 'swap DIMM 3' --deadline 10m --wait") + (
            "\n\nexit codes: 0 done, 1 refused by the server, 2 usage error, 3 timed out waiting,\n"
            "            4 no usable answer (network, server error, an API version cpctl does not speak)"))
    parser.add_argument("--context", help="the context to use (default: the current one)")
    parser.add_argument("--request-timeout", type=float, default=15.0, metavar="S",
                        help="seconds to wait for each answer (default 15)")
    parser.add_argument("--version", action="version", version=f"cpctl {__version__} (API {API_MAJOR}.x)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _config_commands(sub)
    _read_commands(sub)
    _action_commands(sub)
    _rollout_commands(sub)
    _file_commands(sub)
    p = sub.add_parser("version", parents=[_common()], help="cpctl's version and the server's API version",
                       description="Print cpctl's version, the API version it speaks, and the server's.",
                       epilog=_example("cpctl version"), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=version)
    p = sub.add_parser("completion", help="print a shell completion script",
                       description="Print a completion script for the shell.",
                       epilog=_example("cpctl completion bash > ~/.local/share/bash-completion/completions/cpctl",
                                       "source <(cpctl completion bash)   # this shell only"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=["bash"])
    p.set_defaults(func=completion)
    return parser


# -- config -------------------------------------------------------------------------------------

def _config_commands(sub: Any) -> None:
    cfg = sub.add_parser("config", help="contexts: which server and token to use",
                         description="Contexts, as kubeconfig has them, in $XDG_CONFIG_HOME/cpctl/config "
                                     "(~/.config/cpctl/config), written 0600. CPCTL_SERVER and CPCTL_TOKEN "
                                     "override the chosen context's server and token.",
                         epilog=_example("cpctl config set-context prod --server https://cp.example.org --token $T",
                                         "cpctl config use-context prod", "cpctl config get-contexts"),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = cfg.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    p = csub.add_parser("set-context", help="create or change a context",
                        description="Create a context, or change the server or token of one. The first context "
                                    "becomes the current one; --use makes this one current.",
                        epilog=_example("cpctl config set-context lab --server http://127.0.0.1:8000 --token 9f2c...",
                                        "cpctl config set-context lab --token $NEW_TOKEN   # rotate the token"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name")
    p.add_argument("--server", help="the control plane's URL, e.g. https://cp.example.org")
    p.add_argument("--token", help="an API token (Token ...) or a service account's token (Bearer ...)")
    p.add_argument("--use", action="store_true", help="make it the current context")
    p.set_defaults(func=config_set_context)
    p = csub.add_parser("use-context", help="make a context the current one",
                        epilog=_example("cpctl config use-context prod"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name")
    p.set_defaults(func=config_use_context)
    p = csub.add_parser("get-contexts", help="list the contexts (tokens are not shown)",
                        epilog=_example("cpctl config get-contexts", "cpctl config get-contexts -o yaml"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
    p.set_defaults(func=config_get_contexts)
    p = csub.add_parser("current-context", help="print the current context's name",
                        epilog=_example("cpctl config current-context"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=config_current_context)
    p = csub.add_parser("delete-context", help="remove a context",
                        epilog=_example("cpctl config delete-context lab"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name")
    p.set_defaults(func=config_delete_context)


def config_set_context(session: Session) -> int:
    args, path = session.args, session.config_path()
    cfg = session.load()
    ctx = config.set_context(cfg, name=args.name, server=args.server, token=args.token)
    if args.use:
        cfg.current = ctx.name
    config.save(cfg, path)
    session.out.write(f"context {ctx.name!r} set ({ctx.server}){'; current' if cfg.current == ctx.name else ''}\n")
    return 0


def config_use_context(session: Session) -> int:
    cfg = session.load()
    if session.args.name not in cfg.contexts:
        known = ", ".join(sorted(cfg.contexts)) or "none"
        raise errors.UsageError(f"no context named {session.args.name!r} (known: {known})")
    cfg.current = session.args.name
    config.save(cfg, session.config_path())
    session.out.write(f"switched to context {cfg.current!r}\n")
    return 0


def config_get_contexts(session: Session) -> int:
    cfg = session.load()
    rows = [{"name": c.name, "server": c.server, "current": c.name == cfg.current} for c in cfg.contexts.values()]
    if session.args.output != "table":
        session.out.write(output.dump(rows, session.args.output) + "\n")
    else:
        table = output.table([["*" if r["current"] else "", r["name"], r["server"]] for r in rows],
                             ["CURRENT", "NAME", "SERVER"], empty="")
        session.out.write(table + "\n")
    return 0


def config_current_context(session: Session) -> int:
    cfg = session.load()
    if cfg.current is None:
        raise errors.UsageError("no current context: run `cpctl config use-context NAME`")
    session.out.write(cfg.current + "\n")
    return 0


def config_delete_context(session: Session) -> int:
    cfg = session.load()
    if cfg.contexts.pop(session.args.name, None) is None:
        raise errors.UsageError(f"no context named {session.args.name!r}")
    if cfg.current == session.args.name:
        cfg.current = None
    config.save(cfg, session.config_path())
    session.out.write(f"deleted context {session.args.name!r}\n")
    return 0


# -- reads --------------------------------------------------------------------------------------

def _read_commands(sub: Any) -> None:
    get = sub.add_parser("get", help="list nodes, modules, tiers, findings, rollouts, combinations, enrolments",
                         description="List a kind of object, every page of it, filtered as the API filters.",
                         epilog=_example("cpctl get nodes --state draining --state cordoned",
                                         "cpctl get modules --node n-r1-07 -o wide", "cpctl get tiers -o yaml"),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = get.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind in KINDS.values():
        example = {"nodes": "cpctl get nodes --tier hybrid_inference --rack rack-1 -o wide",
                   "modules": "cpctl get modules --state quarantined",
                   "tiers": "cpctl get tiers", "findings": "cpctl get findings --state open --severity critical",
                   "rollouts": "cpctl get rollouts --state waves",
                   "combinations": "cpctl get combinations --state pinned -o json",
                   "enrolments": "cpctl get enrolments --state pending -o wide"}[kind.name]
        p = gsub.add_parser(kind.name, aliases=list(kind.aliases), parents=[_common(output.FORMATS)],
                            help=f"list {kind.name}", epilog=_example(example),
                            description=f"List {kind.name} ({kind.path}); name some to get only those.",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("names", nargs="*", metavar="NAME",
                       help=f"only these (by {kind.by_name or 'id'})")
        for f in kind.filters:
            p.add_argument(f.flag, dest=f"filter_{f.param}", help=f.help, action="append" if f.many else "store",
                           metavar=f.flag.lstrip("-").upper().replace("-", "_"))
        p.set_defaults(func=reads.get)
    desc = sub.add_parser("describe", help="one object in depth",
                          epilog=_example("cpctl describe node n-r1-07"),
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    dsub = desc.add_subparsers(dest="kind", metavar="KIND", required=True)
    p = dsub.add_parser("node", aliases=["nodes", "no"], parents=[_common(("text", "json", "yaml"))],
                        help="a node's state, hold, modules, open findings and recent audit",
                        description="A node's state, the hold on it and what it waits for, its newest report, "
                                    "its modules, its open findings and its recent audit trail.",
                        epilog=_example("cpctl describe node n-r1-07", "cpctl describe node n-r1-07 -o json"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", metavar="NAME", help="the node's hostname")
    p.add_argument("--audit", type=int, default=10, metavar="N", help="audit records to show (default 10)")
    p.set_defaults(func=reads.describe_node)


# -- actions ------------------------------------------------------------------------------------

def _action_commands(sub: Any) -> None:
    def reason(p: argparse.ArgumentParser) -> None:
        p.add_argument("--reason", required=True, help="why (kept in the audit trail)")
        p.add_argument("--override", action="store_true",
                       help="go below the tier's floor or clear another owner's hold (audited)")

    for verb, what, example in [
        ("cordon", "stop sending new work to nodes; work in flight finishes",
         "cpctl cordon n-r1-07 n-r1-08 --reason 'rack 1 PDU swap'"),
        ("uncordon", "release a cordon or drain and put nodes back to work",
         "cpctl uncordon n-r1-07 --reason 'PDU swapped'"),
        ("drain", "cordon nodes and wait for their work in flight to finish",
         "cpctl drain n-r1-07 --reason 'swap DIMM 3' --deadline 10m --wait"),
    ]:
        p = sub.add_parser(verb, parents=[_common()], help=what, description=what[0].upper() + what[1:] + ".",
                           epilog=_example(example), formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("nodes", nargs="+", metavar="NODE", help="node hostnames")
        reason(p)
        if verb in ("cordon", "drain"):
            p.add_argument("--resume-after", metavar="TIME",
                           help="ISO 8601 time at which the hold is released by itself")
        if verb == "drain":
            p.add_argument("--deadline", type=seconds, metavar="DURATION",
                           help="how long the drain may take, e.g. 10m (server default 15m)")
            p.add_argument("--deadline-action", choices=["alert", "force"],
                           help="at the deadline: stay draining and alert (default), or force it drained")
            p.add_argument("--then", choices=["stay", "maintenance"], help="once drained (default stay)")
            p.add_argument("--wait", action="store_true",
                           help="wait until drained, showing the in-flight count and what the drain waits for")
            p.add_argument("--timeout", type=seconds, metavar="DURATION",
                           help="give up waiting after this long, exit 3 (default: a minute past the drain's deadline)")
        p.set_defaults(func=actions.node_action)
    for verb, what, example in [
        ("quarantine", "take modules out of service (their node keeps serving on the others)",
         "cpctl quarantine AX-0042 --reason 'ECC errors climbing'"),
        ("release", "put quarantined modules back in service", "cpctl release AX-0042 --reason 'reseated'"),
    ]:
        p = sub.add_parser(verb, parents=[_common()], help=what, description=what[0].upper() + what[1:] + ".",
                           epilog=_example(example), formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("modules", nargs="+", metavar="MODULE", help="module serials")
        reason(p)
        p.set_defaults(func=actions.module_action)
    p = sub.add_parser("approve", parents=[_common()], help="approve nodes that joined (admins)",
                       description="Approve pending enrolments, all or none: their nodes and modules are created "
                                   "where --rack and --slot say (default: prefilled from the agent's location "
                                   "hint), and each agent receives its node key at its next poll.",
                       epilog=_example("cpctl approve n-r2-01 n-r2-02 --reason 'rack r2 delivery'",
                                       "cpctl approve 17 --rack rack-2 --slot 9 --reason 'moved'"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("enrolments", nargs="+", metavar="ENROLMENT", help="enrolment ids, or the hostnames they joined as")
    p.add_argument("--rack", help="the rack to place them in (its name)")
    p.add_argument("--slot", type=int, help="the slot (one enrolment only)")
    p.add_argument("--tier", help="the tier (its kind), when the bootstrap token's scope names none")
    p.add_argument("--reason", default="", help="why (kept in the audit trail)")
    p.set_defaults(func=actions.approve)
    p = sub.add_parser("reject", parents=[_common()], help="reject nodes that joined (admins)",
                       description="Reject pending enrolments, all or none; each agent is told the reason and stops.",
                       epilog=_example("cpctl reject n-r2-03 --reason 'no ECC memory'"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("enrolments", nargs="+", metavar="ENROLMENT", help="enrolment ids, or the hostnames they joined as")
    p.add_argument("--reason", required=True, help="why (the agent and the audit trail show it)")
    p.set_defaults(func=actions.reject)
    p = sub.add_parser("scale", parents=[_common()], help="set a tier's number of active nodes",
                       description="Ask for a tier's number of active nodes: standby nodes are activated, or the "
                                   "least busy active nodes drained back to standby.",
                       epilog=_example("cpctl scale hybrid_inference --to 30 --reason 'launch day'"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tier", metavar="TIER", help="the tier's kind (access_logic, hybrid_inference, ...) or id")
    p.add_argument("--to", type=int, required=True, metavar="N", help="active nodes wanted")
    reason(p)
    p.add_argument("--supersede", action="store_true", help="replace a running scale request of another count")
    p.add_argument("--drain-deadline", type=seconds, metavar="DURATION", help="deadline of the scale-down's drains")
    p.add_argument("--wait", action="store_true", help="wait until the scale request completes")
    p.add_argument("--timeout", type=seconds, metavar="DURATION", help="give up waiting after this long (exit 3)")
    p.set_defaults(func=actions.scale)


# -- rollouts and vector runs -------------------------------------------------------------------

def _rollout_commands(sub: Any) -> None:
    ro = sub.add_parser("rollout", help="preview, start, watch and steer driver rollouts",
                        description="Driver rollouts: preview one (nothing written), start it, watch it to its end, "
                                    "pause, resume, abort or roll it back.",
                        epilog=_example("cpctl rollout preview --combination 7 --tier hybrid_inference",
                                        "cpctl rollout create --combination 7 --reason 'driver 2.4.0' --wait",
                                        "cpctl rollout pause 12 --reason 'peak hour'"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rsub = ro.add_subparsers(dest="rollout_command", metavar="SUBCOMMAND", required=True)

    def scope(p: argparse.ArgumentParser) -> None:
        p.add_argument("--combination", required=True, metavar="ID", help="the version combination to roll out")
        p.add_argument("--tier", action="append", metavar="TIER", help="only this tier (kind or id; repeatable)")
        p.add_argument("--rack", action="append", metavar="RACK", help="only this rack (name or id; repeatable)")
        p.add_argument("--node", action="append", metavar="NODE", help="only this node (hostname; repeatable)")
        p.add_argument("--canary", metavar="N|P%", help="canary per tier: nodes (1) or a percentage ('10%%')")
        p.add_argument("--wave-size", type=int, metavar="N", help="nodes per wave (default 4)")
        p.add_argument("--max-unavailable", metavar="N|P%", help="per tier at once, never past the floor (25%%)")
        p.add_argument("--bake", type=seconds, metavar="DURATION", help="wait after each wave, e.g. 10m (default)")
        p.add_argument("--on-failure", choices=["rollback", "pause"], help="what a failed gate does (rollback)")
        p.add_argument("--suite", metavar="ID", help="vector suite (default: the one that validated it)")

    p = rsub.add_parser("preview", parents=[_common(("text", "json", "yaml"))],
                        help="what a rollout would do: waves, capacity, gates (writes nothing)",
                        description="Waves node by node, each tier's capacity during each wave against its floor, "
                                    "the nodes left out and why, and the gates as a dry run. A read: viewers may.",
                        epilog=_example("cpctl rollout preview --combination 7 --rack rack-1 --wave-size 2"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    scope(p)
    p.set_defaults(func=rollouts.preview)
    p = rsub.add_parser("create", parents=[_common()], help="start a rollout",
                        description="Start a rollout. While a dry-run gate fails the server refuses (exit 1, its "
                                    "words printed); --override names each failing gate to start past it.",
                        epilog=_example("cpctl rollout create --combination 7 --reason 'driver 2.4.0 validated'",
                                        "cpctl rollout create --combination 5 --override downgrade "
                                        "--reason 'back to the validated driver' --wait"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    scope(p)
    p.add_argument("--reason", required=True, help="why (kept with the rollout and in the audit trail)")
    p.add_argument("--override", action="append", metavar="GATE",
                   help="a failing gate to start past (repeatable; audited)")
    p.add_argument("--wait", action="store_true", help="watch it to its end (exit 0 completed, 1 otherwise)")
    p.add_argument("--timeout", type=seconds, metavar="DURATION", help="give up watching after this long (exit 3)")
    p.set_defaults(func=rollouts.create)
    p = rsub.add_parser("watch", parents=[_common()], help="follow a rollout to its end",
                        description="Print a line each time the rollout's state, wave or what it waits for changes; "
                                    "exit 0 when it completed, 1 when it ended otherwise, 3 on --timeout.",
                        epilog=_example("cpctl rollout watch 12 --timeout 2h"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rollout", metavar="ROLLOUT", help="the rollout's id")
    p.add_argument("--timeout", type=seconds, metavar="DURATION", help="give up after this long (exit 3)")
    p.set_defaults(func=rollouts.watch)
    for verb, what in [("pause", "no new node starts; nodes in progress finish their steps"),
                       ("resume", "go on with a paused rollout"),
                       ("abort", "stop: nodes in progress finish, the rest stay as they are"),
                       ("rollback", "every upgraded node back to its last-known-good versions")]:
        p = rsub.add_parser(verb, parents=[_common()], help=what, description=what[0].upper() + what[1:] + ".",
                            epilog=_example(f"cpctl rollout {verb} 12 --reason 'peak hour'"),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("rollout", metavar="ROLLOUT", help="the rollout's id")
        p.add_argument("--reason", required=True, help="why (kept in the audit trail)")
        p.set_defaults(func=rollouts.control)

    vec = sub.add_parser("vectors", help="run regression test vectors",
                         description="Regression test vectors: run a suite on a combination's modules or on modules "
                                     "named, and wait for the verdict.",
                         epilog=_example("cpctl vectors run --suite onnx-int8 --combination 7 --reason nightly --wait"),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    vsub = vec.add_subparsers(dest="vectors_command", metavar="SUBCOMMAND", required=True)
    p = vsub.add_parser("run", parents=[_common()], help="run a suite and (with --wait) wait for its verdict",
                        description="Run a vector suite on the modules that are on a combination now, or on the "
                                    "modules named; --wait ends 0 when it passed, 1 when it failed, erred or was "
                                    "cancelled, 3 on --timeout.",
                        epilog=_example("cpctl vectors run --suite onnx-int8 --combination 7 --reason 'after the "
                                        "firmware update' --wait", "cpctl vectors run --suite 3 --module AX-0042 "
                                        "--reason reseated"),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", required=True, metavar="SUITE", help="the suite's id or name")
    p.add_argument("--combination", metavar="ID", help="run on the modules on this combination now")
    p.add_argument("--module", action="append", metavar="SERIAL", help="run on this module (repeatable)")
    p.add_argument("--reason", default="", help="why (kept with the run)")
    p.add_argument("--run-timeout", type=seconds, metavar="DURATION", help="the run's own timeout (server: 10m)")
    p.add_argument("--wait", action="store_true", help="wait for the verdict")
    p.add_argument("--timeout", type=seconds, metavar="DURATION",
                   help="give up waiting after this long (exit 3; default the run's timeout and a minute)")
    p.set_defaults(func=rollouts.vectors_run)


# -- fleet files -------------------------------------------------------------------------------

FLEET_EXAMPLE = """fleet.yaml:
  tiers:
    hybrid_inference: {min_active_nodes: 12, max_active_nodes: 42}
  pins:
    AX-40: {driver: 2.4.0, framework: axon-runtime 1.19.0}
"""


def _file_commands(sub: Any) -> None:
    p = sub.add_parser("diff", parents=[_common()], help="what apply -f would change",
                       description="Compare a fleet file (tiers' active-node bounds, module types' pins) with the "
                                   "server and print what differs; writes nothing.",
                       epilog=_example("cpctl diff -f fleet.yaml") + "\n\n" + FLEET_EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-f", "--filename", required=True, type=Path, metavar="FILE", help="the fleet file (- for stdin)")
    p.set_defaults(func=fleet_diff)
    p = sub.add_parser("apply", parents=[_common()], help="bring tiers and pins to what a fleet file says",
                       description="Set tiers' active-node bounds and pin module types' versions as a fleet file "
                                   "says; only what differs is sent, so applying twice changes nothing. A file "
                                   "that fails validation is refused whole, naming the path in it (exit 2).",
                       epilog=_example("cpctl apply -f fleet.yaml --reason 'driver 2.4.0 validated on the gray pool'")
                       + "\n\n" + FLEET_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-f", "--filename", required=True, type=Path, metavar="FILE", help="the fleet file (- for stdin)")
    p.add_argument("--reason", required=True, help="why (kept in the audit trail of each pin)")
    p.set_defaults(func=fleet_apply)


def fleet_diff(session: Session) -> int:
    data = fleetfile.read(session.args.filename)
    with session.client() as client:
        changes = fleetfile.plan(client, data, reason="")
    for change in changes:
        session.out.write(change.line() + "\n")
    if not changes:
        session.out.write("no changes: the server is as the file says\n")
    return errors.DONE


def fleet_apply(session: Session) -> int:
    data = fleetfile.read(session.args.filename)
    status = errors.DONE
    with session.client() as client:
        changes = fleetfile.plan(client, data, reason=session.args.reason)
        for change, refused in fleetfile.apply(client, changes):
            if refused is None:
                session.out.write(f"{change.line()}: applied\n")
            else:
                session.err.write(f"{change.line()}: refused (HTTP {refused.status}):\n{refused.message}\n")
                status = errors.REFUSED
    if not changes:
        session.out.write("no changes: the server is as the file says\n")
    return status


# -- the rest -----------------------------------------------------------------------------------

def version(session: Session) -> int:
    session.out.write(f"cpctl {__version__}, speaks API {API_MAJOR}.x\n")
    with session.client() as client:
        me = client.get("/api/v1/me/")
        session.out.write(f"server {client.server}, API {client.api_version}; you are {me['username']} "
                          f"({me.get('role') or 'no role'})\n")
    return 0


def completion(session: Session) -> int:
    session.out.write(bash_completion(build_parser()))
    return 0


def _choices(parser: argparse.ArgumentParser) -> tuple[list[str], list[str], dict[str, argparse.ArgumentParser]]:
    opts = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    subs: dict[str, argparse.ArgumentParser] = {}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            subs.update(a.choices)
    return sorted(set(opts)), sorted(subs), subs


def bash_completion(parser: argparse.ArgumentParser) -> str:
    """Commands, subcommands and options, read from the parser itself (nothing listed twice)."""
    cases: list[str] = []

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        opts, names, subs = _choices(p)
        cases.append(f'        "{path}") words="{" ".join(names + opts)}" ;;')
        seen: set[int] = set()
        for name, child in subs.items():
            if id(child) not in seen or name in names:
                walk(child, f"{path} {name}".strip())
                seen.add(id(child))

    walk(parser, "")
    return ("# bash completion for cpctl: source <(cpctl completion bash)\n"
            "_cpctl() {\n"
            "    local cur=${COMP_WORDS[COMP_CWORD]} path='' w words i\n"
            "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
            "        w=${COMP_WORDS[i]}\n"
            "        [[ $w == -* ]] && continue\n"
            "        case \"${path:+$path }$w\" in\n"
            + "\n".join(f'            "{c.split(chr(34))[1]}") path="{c.split(chr(34))[1]}" ;;'
                        for c in cases if c.split(chr(34))[1]) + "\n"
            "        esac\n"
            "    done\n"
            "    case \"$path\" in\n" + "\n".join(cases) + "\n"
            "        *) words='' ;;\n"
            "    esac\n"
            "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
            "}\n"
            "complete -F _cpctl cpctl\n")


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None,
         transport: httpx.BaseTransport | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)  # a usage error exits 2 here, before anything is sent
    func: Handler | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(err)
        return errors.USAGE
    session = Session(args, out=out, err=err, transport=transport)
    try:
        return func(session)
    except CpctlError as exc:
        err.write(f"error: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except BrokenPipeError:  # `cpctl get nodes | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return errors.DONE


if __name__ == "__main__":
    raise SystemExit(main())
