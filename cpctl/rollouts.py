"""Rollouts and vector runs from a terminal: preview a rollout (a read, so viewers may), create it
(refused with the server's words while a dry-run gate fails, unless the gate is named in
``--override`` with a reason), watch it to its end, pause, resume, abort or roll it back; run a
suite of vectors on a combination's modules and wait for the verdict.

Exit codes as everywhere (cpctl.errors): ``watch`` and ``--wait`` end 0 when the rollout completed
or the run passed, 1 when it ended otherwise (failed, aborted, rolled back; failed, error,
cancelled), 3 when the wait timed out."""

from __future__ import annotations

import time
from typing import Any

from cpctl import errors, output
from cpctl.actions import POLL_S, refused, tier_by_name
from cpctl.client import Client
from cpctl.durations import words
from cpctl.errors import Refused, TimedOut, UsageError
from cpctl.reads import node_by_name
from cpctl.resources import KINDS
from cpctl.session import Session

# A rollout's states that are its end, and which of them is success.
ROLLOUT_ENDS = {"completed", "aborted", "rolled_back", "failed"}
RUN_ENDS = {"passed", "failed", "error", "cancelled"}


def _combination(client: Client, ref: str) -> dict[str, Any]:
    if not ref.isdigit():
        raise UsageError(f"--combination takes a combination's id (`cpctl get combinations` lists them), not {ref!r}")
    return dict(client.get(f"{KINDS['combinations'].path}{ref}/"))


def _rack_id(client: Client, name: str) -> int:
    if name.isdigit():
        return int(name)
    return int(client.one("/api/v1/racks/", {"name": name}, f"rack named {name!r}")["id"])


def _spec(client: Client, args: Any) -> dict[str, Any]:
    """The request body of a preview or a create, names turned into the ids the API takes."""
    combination = _combination(client, args.combination)
    body: dict[str, Any] = {"combination": combination["id"], "module_type": combination["module_type"]}
    if args.tier:
        body["tiers"] = [tier_by_name(client, t)["id"] for t in args.tier]
    if args.rack:
        body["racks"] = [_rack_id(client, r) for r in args.rack]
    if args.node:
        body["nodes"] = [node_by_name(client, n)["id"] for n in args.node]
    for option, field in (("canary", "canary"), ("wave_size", "wave_size"), ("max_unavailable", "max_unavailable"),
                          ("bake", "bake_s"), ("on_failure", "on_failure"), ("suite", "suite")):
        value = getattr(args, option, None)
        if value is not None:
            body[field] = int(value) if field in ("canary", "suite") and str(value).isdigit() else value
    return body


def preview_text(p: dict[str, Any]) -> str:
    """The preview as an operator reads it: the target, each wave's nodes and each tier's capacity
    during it, the nodes left out and why, and the gates as a dry run."""
    lines = [f"target: {', '.join(f'{k} {v}' for k, v in (p.get('target') or {}).items())}"]
    if p.get("pinned"):
        lines.append(f"pinned now: {', '.join(f'{k} {v}' for k, v in p['pinned'].items())}")
    for wave in p.get("waves") or []:
        nodes = wave.get("nodes") or []
        name = "canary" if wave.get("canary") else f"wave {wave.get('index')}"
        lines.append(f"{name}: {len(nodes)} node{'s' if len(nodes) != 1 else ''}: "
                     + ", ".join(str(n.get("hostname")) for n in nodes))
        for cap in wave.get("capacity") or []:
            ok = "ok" if cap.get("ok") else "BELOW THE FLOOR"
            lines.append(f"  {cap.get('tier_name') or cap.get('tier')}: {cap.get('active_during')} of "
                         f"{cap.get('active_before')} active during it (floor {cap.get('floor')}): {ok}")
    for skipped in p.get("skipped") or []:
        lines.append(f"skipped {skipped.get('hostname')}: {skipped.get('reason')}")
    lines.append("gates now (dry run):")
    for name, gate in (p.get("gates") or {}).items():
        verdict = "passes" if gate.get("ok") else "FAILS" + (" (overridable)" if gate.get("overridable") else "")
        lines.append(f"  {name}: {verdict}: {gate.get('detail') or ''}".rstrip(": "))
    failing = p.get("failing") or []
    lines.append("failing: " + ", ".join(failing) + " (a start needs --override for each, and a reason)"
                 if failing else "every gate passes: it can start")
    return "\n".join(lines)


def preview(session: Session) -> int:
    args = session.args
    with session.client() as client:
        try:
            _, result = client.act("/api/v1/rollouts/preview/", _spec(client, args))
        except Refused as exc:
            refused(session, "rollout preview", exc)
            return errors.REFUSED
    if args.output in ("json", "yaml"):
        session.out.write(output.dump(result, args.output) + "\n")
    else:
        session.out.write(preview_text(result) + "\n")
    return errors.DONE


def create(session: Session) -> int:
    args = session.args
    with session.client() as client:
        body = {**_spec(client, args), "reason": args.reason}
        if args.override:
            body["override"] = list(args.override)
        try:
            _, rollout = client.act("/api/v1/rollouts/", body)
        except Refused as exc:
            refused(session, "rollout create", exc)
            return errors.REFUSED
        session.out.write(f"rollout/{rollout['id']} created ({rollout['state']}): {rollout.get('combination_name')}"
                          + (f", past the overridden gates {', '.join(args.override)}" if args.override else "")
                          + "\n")
        session.out.flush()
        if args.wait:
            return watch_rollout(session, client, rollout["id"], timeout=_timeout(args, 6 * 3600))
    return errors.DONE


def _timeout(args: Any, default: float) -> float:
    """``--timeout`` as given (0 included: look once), else ``default``."""
    return float(args.timeout) if args.timeout is not None else default


def rollout_line(r: dict[str, Any]) -> str:
    wave = f", wave {r.get('current_wave')}/{r.get('wave_count')}" if r.get("wave_count") else ""
    said = r.get("waiting_for") or r.get("message") or ""
    return f"rollout/{r['id']} {r['state']}{wave}" + (f": {said}" if said else "")


def watch_rollout(session: Session, client: Client, pk: int, *, timeout: float) -> int:
    """Poll the rollout until it ends; a line each time what it says changes."""
    started = time.monotonic()
    last = ""
    while True:
        rollout = client.get(f"/api/v1/rollouts/{pk}/")
        line = rollout_line(rollout)
        if line != last:
            session.err.write(line + "\n")
            session.err.flush()
            last = line
        if rollout["state"] in ROLLOUT_ENDS:
            session.out.write(f"rollout/{pk} {rollout['state']} after {words(time.monotonic() - started)}\n")
            return errors.DONE if rollout["state"] == "completed" else errors.REFUSED
        waited = time.monotonic() - started
        if waited >= timeout:
            raise TimedOut(f"timed out after {words(waited)} watching rollout/{pk}: {last}")
        time.sleep(min(POLL_S, max(0.0, timeout - waited)))


def _rollout_id(ref: str) -> int:
    if not ref.isdigit():
        raise UsageError(f"a rollout's id (`cpctl get rollouts` lists them), not {ref!r}")
    return int(ref)


def watch(session: Session) -> int:
    with session.client() as client:
        return watch_rollout(session, client, _rollout_id(session.args.rollout),
                             timeout=_timeout(session.args, 6 * 3600))


def control(session: Session) -> int:
    """pause / resume / abort / rollback: one POST, the rollout's new state printed."""
    args = session.args
    verb = args.rollout_command
    pk = _rollout_id(args.rollout)
    with session.client() as client:
        try:
            _, rollout = client.act(f"/api/v1/rollouts/{pk}/{verb}/", {"reason": args.reason})
        except Refused as exc:
            refused(session, f"rollout/{pk} {verb}", exc)
            return errors.REFUSED
    session.out.write(rollout_line(rollout) + "\n")
    return errors.DONE


def _suite_id(client: Client, ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    found = [s for s in client.list("/api/v1/vector-suites/") if s.get("name") == ref]
    if len(found) != 1:
        raise Refused(f"no vector suite named {ref!r}" if not found else f"{len(found)} suites are named {ref!r}",
                      status=404)
    return int(found[0]["id"])


def vectors_run(session: Session) -> int:
    args = session.args
    with session.client() as client:
        body: dict[str, Any] = {"suite": _suite_id(client, args.suite), "reason": args.reason}
        if args.combination:
            body["combination"] = _combination(client, args.combination)["id"]
        if args.module:
            body["modules"] = [client.one(KINDS["modules"].path, {"serial": m}, f"module with serial {m!r}")["id"]
                               for m in args.module]
        if args.run_timeout:
            body["timeout_s"] = int(args.run_timeout)
        try:
            _, run = client.act("/api/v1/vector-runs/", body)
        except Refused as exc:
            refused(session, "vectors run", exc)
            return errors.REFUSED
        session.out.write(f"vector-run/{run['id']} {run['state']}: {run.get('suite_name')}\n")
        session.out.flush()
        if not args.wait:
            return errors.DONE
        started = time.monotonic()
        timeout = _timeout(args, int(run.get("timeout_s") or 600) + 60)
        last = ""
        while run["state"] not in RUN_ENDS:
            if time.monotonic() - started >= timeout:
                raise TimedOut(f"timed out after {words(timeout)} waiting for vector-run/{run['id']}: {last}")
            time.sleep(POLL_S)
            run = client.get(f"/api/v1/vector-runs/{run['id']}/")
            line = f"vector-run/{run['id']} {run['state']}" + (f" ({run['phase']})" if run.get("phase") else "")
            if line != last:
                session.err.write(line + "\n")
                session.err.flush()
                last = line
    summary = run.get("summary") or {}
    said = run.get("message") or ", ".join(f"{k} {v}" for k, v in summary.items() if not isinstance(v, dict | list))
    session.out.write(f"vector-run/{run['id']} {run['state']}" + (f": {said}" if said else "") + "\n")
    return errors.DONE if run["state"] == "passed" else errors.REFUSED
