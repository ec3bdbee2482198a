"""Fleet actions: cordon, uncordon, drain (optionally waiting until drained), quarantine and
release a module, scale a tier, approve or reject nodes that joined. Each is one POST with an
Idempotency-Key; a refusal is printed as the server worded it (the capacity guard's numbers, the
holder of a hold) and exits 1."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from cpctl import errors
from cpctl.client import Client
from cpctl.durations import words
from cpctl.errors import Refused, TimedOut
from cpctl.reads import node_by_name
from cpctl.resources import KINDS
from cpctl.session import Session

POLL_S = 1.0
LOG_EVERY_S = 15.0  # off a terminal, an unchanged wait is logged this often
DONE_STATES = {"drained", "maintenance"}  # a drain with then=maintenance goes on to maintenance


def _body(args: Any, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"reason": args.reason, **{k: v for k, v in extra.items() if v is not None}}
    if getattr(args, "override", False):
        body["override"] = True
    return body


def refused(session: Session, what: str, exc: Refused) -> None:
    """The server's refusal as it worded it, under what was refused (every command prints it so)."""
    session.err.write(f"{what}: refused (HTTP {exc.status}):\n{exc.message}\n")


def node_action(session: Session) -> int:
    """cordon / uncordon / drain each node named, in order; every refusal printed, exit 1 if any."""
    args = session.args
    verb = args.command
    extra: dict[str, Any] = {}
    if verb == "drain":
        extra = {"deadline_s": args.deadline, "deadline_action": args.deadline_action, "then": args.then}
    if verb in ("cordon", "drain") and args.resume_after:
        extra["resume_after"] = args.resume_after
    status = errors.DONE
    accepted: list[dict[str, Any]] = []
    deadlines: list[dt.datetime] = []  # each drain's deadline, as the server set it
    with session.client() as client:
        for name in args.nodes:
            try:
                node = node_by_name(client, name)
                _, result = client.act(f"/api/v1/nodes/{node['id']}/{verb}/", _body(args, **extra))
            except Refused as exc:
                refused(session, f"node/{name} {verb}", exc)
                status = errors.REFUSED
                continue
            brief, hold = result["node"], result.get("drain")
            said = "unchanged" if not result["changed"] else {"cordon": "cordoned", "uncordon": "uncordoned",
                                                            "drain": "drain started"}[verb]
            line = f"node/{brief['hostname']} {said} (state {brief['state']})"
            if hold and hold.get("waiting_for"):
                line += f": {hold['waiting_for']}"
            session.out.write(line + "\n")
            session.out.flush()
            accepted.append(node)
            if hold and hold.get("deadline"):
                deadlines.append(dt.datetime.fromisoformat(hold["deadline"]))
        if verb == "drain" and args.wait and accepted:
            # By default, wait a minute past the last deadline: then it has been forced or alerted.
            last = max(deadlines, default=dt.datetime.now(dt.UTC))
            timeout = args.timeout or max(0.0, (last - dt.datetime.now(dt.UTC)).total_seconds()) + 60
            try:
                wait_drained(session, client, accepted, timeout=timeout)
            except Refused as exc:
                session.err.write(f"{exc.message}\n")
                return errors.REFUSED
    return status


@dataclass
class Progress:
    """One line a drain's wait shows: the node's state, its in-flight count and what the drain
    waits for, as the server words it."""

    hostname: str
    state: str
    in_flight: str  # the newest report's count; "unknown" when the agent cannot count, "no report" before one
    waiting_for: str

    def line(self) -> str:
        return f"node/{self.hostname} {self.state}, in flight {self.in_flight}: {self.waiting_for or '-'}"


def progress_of(hostname: str, live: dict[str, Any]) -> Progress:
    hold = live.get("hold") or {}
    latest = live.get("latest")
    if latest is None:
        flight = "no report"
    else:
        flight = "unknown" if latest.get("in_flight") is None else str(latest["in_flight"])
    return Progress(hostname, live["state"], flight, hold.get("waiting_for") or "")


def wait_drained(session: Session, client: Client, nodes: list[dict[str, Any]], *, timeout: float) -> None:
    """Poll each node's live view until it is drained; a live progress line meanwhile (rewritten in
    place on a terminal, a new line on each change otherwise). Raises TimedOut after ``timeout``
    seconds, Refused when the drain ended without draining (released, or the node failed)."""
    tty = session.err.isatty()
    started = time.monotonic()
    pending = {n["id"]: n["hostname"] for n in nodes}
    last: dict[int, str] = {}
    shown: dict[int, tuple[str, str, float]] = {}  # off a terminal: (state, in flight, when) last printed
    while pending:
        for pk, hostname in list(pending.items()):
            live = client.get(f"/api/v1/live/nodes/{pk}/")
            p = progress_of(hostname, live)
            if p.state in DONE_STATES:
                del pending[pk]
                _clear(session, tty)
                session.out.write(f"node/{hostname} {p.state} after {words(time.monotonic() - started)}\n")
                session.out.flush()
                continue
            if p.state not in ("draining", "unreachable"):
                _clear(session, tty)
                raise Refused(f"node/{hostname}: the drain ended without draining the node: it is {p.state} "
                              "(released, or taken over by another action; `cpctl describe node "
                              f"{hostname}` shows its audit trail)", status=409)
            line = p.line()
            if tty:
                session.err.write("\r\033[K" + line[:200])
            else:  # a log: a line when the state or the count changes, else one every LOG_EVERY_S
                state, flight, when = shown.get(pk, ("", "", 0.0))
                if (state, flight) != (p.state, p.in_flight) or time.monotonic() - when >= LOG_EVERY_S:
                    session.err.write(line + "\n")
                    shown[pk] = (p.state, p.in_flight, time.monotonic())
            session.err.flush()
            last[pk] = line
        if not pending:
            return
        waited = time.monotonic() - started
        if waited >= timeout:
            _clear(session, tty)
            still = ", ".join(f"node/{h}" for h in pending.values())
            raise TimedOut(f"timed out after {words(waited)} waiting for {still} to drain: "
                           + "; ".join(last.get(pk, "") for pk in pending))
        time.sleep(min(POLL_S, max(0.0, timeout - waited)))


def _clear(session: Session, tty: bool) -> None:
    if tty:
        session.err.write("\r\033[K")


def module_action(session: Session) -> int:
    args = session.args
    verb = args.command
    status = errors.DONE
    with session.client() as client:
        for serial in args.modules:
            try:
                module = client.one(KINDS["modules"].path, {"serial": serial}, f"module with serial {serial!r}")
                _, result = client.act(f"/api/v1/modules/{module['id']}/{verb}/", _body(args))
            except Refused as exc:
                refused(session, f"module/{serial} {verb}", exc)
                status = errors.REFUSED
                continue
            said = "unchanged" if not result["changed"] else {"quarantine": "quarantined", "release": "released"}[verb]
            session.out.write(f"module/{serial} {said} (state {result['module'].get('state')})\n")
    return status


def tier_by_name(client: Client, name: str) -> dict[str, Any]:
    if name.isdigit():
        return dict(client.get(f"{KINDS['tiers'].path}{name}/"))
    return client.one(KINDS["tiers"].path, {"kind": name}, f"tier of kind {name!r}")


def scale(session: Session) -> int:
    args = session.args
    with session.client() as client:
        try:
            tier = tier_by_name(client, args.tier)
            _, result = client.act(f"/api/v1/tiers/{tier['id']}/scale/",
                                   _body(args, desired=args.to, supersede=args.supersede or None,
                                         drain_deadline_s=args.drain_deadline))
        except Refused as exc:
            refused(session, f"tier/{args.tier} scale", exc)
            return errors.REFUSED
        req = result["scale_request"]
        said = "scaling" if result["changed"] else "already scaling"
        session.out.write(f"tier/{tier['kind']} {said} from {req.get('from_active')} to {req.get('desired')} "
                          f"active nodes (scale request {req['id']}, {req['state']})\n")
        if req.get("note"):
            session.out.write(f"  note: {req['note']}\n")
        if args.wait:
            return _wait_scaled(session, client, req, timeout=args.timeout or 1800)
    return errors.DONE


def _wait_scaled(session: Session, client: Client, req: dict[str, Any], *, timeout: float) -> int:
    started = time.monotonic()
    last = ""
    while req["state"] == "running":
        if time.monotonic() - started >= timeout:
            raise TimedOut(f"timed out after {words(timeout)} waiting for scale request {req['id']}: {last}")
        time.sleep(POLL_S)
        req = client.get(f"/api/v1/scale-requests/{req['id']}/")
        line = f"scale request {req['id']} {req['state']}: {req.get('progress') or ''}"
        if line != last:
            session.err.write(line + "\n")
            last = line
    session.out.write(f"scale request {req['id']} {req['state']}\n")
    return errors.DONE if req["state"] == "completed" else errors.REFUSED


def enrolment_by_name(client: Client, name: str) -> dict[str, Any]:
    """An enrolment by id, or the pending one of a hostname."""
    if name.isdigit():
        return dict(client.get(f"{KINDS['enrolments'].path}{name}/"))
    return client.one(KINDS["enrolments"].path, {"hostname": name, "state": "pending"},
                      f"pending enrolment of {name!r}")


def approve(session: Session) -> int:
    """One bulk approval of every enrolment named: all approved, or none (each refusal printed)."""
    args = session.args
    if args.slot is not None and len(args.enrolments) > 1:
        raise errors.UsageError("--slot places one node: name one enrolment, or approve them one by one")
    place = {k: v for k, v in (("rack", args.rack), ("slot", args.slot), ("tier", args.tier)) if v is not None}
    with session.client() as client:
        try:
            found = [enrolment_by_name(client, name) for name in args.enrolments]
            _, done = client.act(f"{KINDS['enrolments'].path}approve/",
                                 {"items": [{"enrolment": e["id"], **place} for e in found], "reason": args.reason})
        except Refused as exc:
            refused(session, "approve", exc)
            return errors.REFUSED
    for e in done:
        session.out.write(f"enrolment/{e['id']} {e['hostname']} approved: node/{e['node_hostname']} in {e['rack']} "
                          f"slot {e['slot']}; its agent receives its key at its next poll\n")
    return errors.DONE


def reject(session: Session) -> int:
    args = session.args
    with session.client() as client:
        try:
            found = [enrolment_by_name(client, name) for name in args.enrolments]
            _, done = client.act(f"{KINDS['enrolments'].path}reject/",
                                 {"enrolments": [e["id"] for e in found], "reason": args.reason})
        except Refused as exc:
            refused(session, "reject", exc)
            return errors.REFUSED
    for e in done:
        session.out.write(f"enrolment/{e['id']} {e['hostname']} rejected\n")
    return errors.DONE
