"""The rollout controller: advances every rollout step by step from its stored state.

``rollout_advance`` is safe to call any number of times from any number of workers: the rollout
row is claimed with ``SKIP LOCKED`` (a second worker skips a rollout another is advancing), each
node's step is stored before the next is taken, and every step can be taken again (the lifecycle
returns the rollout's own hold, a command or vector run already sent is looked up, not sent
again). A worker killed mid-pass loses the transaction of that pass; the next pass starts from
what was stored.

Node and module state change only through ``apps.operations.lifecycle`` with owner ``rollout``
(its capacity guard refuses a cordon below the tier's floor: the node waits and says so). A
rollout never releases another owner's hold: a node held by an operator or by health is skipped
with the reason and stays held.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

import apps.telemetry.selectors.cohorts as telemetry_selectors
from apps.agents.choices import CommandState
from apps.agents.models import NodeCommand
from apps.agents.services import install_versions_send
from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.common.errors import Conflict
from apps.common.events import FLEET_GROUP, publish
from apps.health import selectors as health_selectors
from apps.inventory import services as inventory_services
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, Node
from apps.operations import lifecycle
from apps.operations import selectors as op_selectors
from apps.operations.choices import ACTIVE_DRAIN_STATES, DeadlineAction, DrainState, Owner
from apps.operations.models import Drain
from apps.rollouts.choices import (
    ACTIVE_ROLLOUT_STATES,
    FINAL_STEPS,
    IN_PROGRESS_STEPS,
    FailureKind,
    OnFailure,
    RollbackPhase,
    RolloutState,
    Step,
)
from apps.rollouts.models import Rollout, RolloutNode
from apps.vectors import runs
from apps.vectors.choices import FINAL_RUN_STATES, RunPurpose, RunState, TargetState

logger = logging.getLogger(__name__)

ACTOR = "rollout"
OWNER = Owner.ROLLOUT
FAILED_COMMAND = (CommandState.FAILED, CommandState.UNKNOWN, CommandState.EXPIRED)
MAX_PASSES = 8
# The cohort gate compares a stage only when each cohort served at least this many requests in it over
# the bake window; the limits add a little absolute slack (a control cohort with no error at all).
COHORT_MIN_REQUESTS = 20
COHORT_SLACK_MS = 1.0
COHORT_SLACK_ERROR_RATE = 0.001
# Each cohort's own figures over this long before the rollout started (whole minutes, the start's
# included): its baseline, so that nodes slower for another reason are judged against their own past.
COHORT_BASELINE_S = 3600


# ---- small helpers ------------------------------------------------------------------------------


def _target(r: Rollout) -> tuple[str, str]:
    return r.combination.driver.version, r.combination.framework.version


def _hold_of(node_id: int) -> Drain | None:
    return Drain.objects.filter(node_id=node_id, state__in=ACTIVE_DRAIN_STATES).first()


def _holder_text(hold: Drain) -> str:
    who = hold.created_by_name or hold.owner
    return f"held by {hold.get_owner_display().lower()} ({who}: {hold.reason!r}); left as it is"


def _set(r: Rollout, rn: RolloutNode, step: str, now: dt.datetime, *, waiting: str = "", why: str = "") -> None:
    """Store ``rn``'s next step with one audit record linked to the rollout."""
    old = rn.step
    rn.step, rn.step_changed_at, rn.waiting_for = step, now, waiting[:1000]
    if old == Step.PENDING and rn.started_at is None and step != Step.SKIPPED:
        rn.started_at = now
    if step in FINAL_STEPS:
        rn.finished_at = now
    rn.save()
    audit_record(actor=ACTOR, action=f"rollout.node.{step}", target=rn.node, source=Source.SYSTEM,
                 reason=(why or waiting or f"rollout #{r.pk}")[:4000], related=r,
                 changes={"step": [old, step], **({"phase": rn.rollback_phase} if rn.rollback_phase else {})})
    publish("rollout.node", {"rollout": r.pk, "node": rn.node_id, "hostname": rn.node.hostname, "step": step,
                             "previous": old, "waiting_for": rn.waiting_for, "reason": rn.reason},
            groups=[FLEET_GROUP])


def _wait(rn: RolloutNode, text: str) -> bool:
    if rn.waiting_for != text[:1000]:
        rn.waiting_for = text[:1000]
        rn.save(update_fields=["waiting_for"])
    return False


def _send_install(r: Rollout, rn: RolloutNode, driver: str, framework: str, *, restore: bool) -> NodeCommand:
    what = f"restore {driver} + {framework}" if restore else f"install {driver} + {framework}"
    return install_versions_send(node=rn.node, driver=driver, framework=framework, module_type=str(r.module_type),
                                 modules=list(rn.modules), restore=restore, work={"rollout": r.pk}, actor=ACTOR,
                                 reason=f"rollout #{r.pk}: {what}")


def _set_versions(r: Rollout, rn: RolloutNode, driver: str, framework: str, why: str) -> None:
    for module in Module.objects.filter(serial__in=rn.modules, node_id=rn.node_id):
        if (module.driver_version, module.framework_version) != (driver, framework):
            inventory_services.inventory_update(instance=module, data={"driver_version": driver,
                                                                       "framework_version": framework},
                                               actor=ACTOR, source=Source.SYSTEM, reason=why)


def _answer(command: NodeCommand) -> str:
    detail = str((command.result or {}).get("message", "")) or "no message"
    return f"the agent answered {command.state}: {detail}"


def _age(since: dt.datetime | None, now: dt.datetime) -> float:
    return (now - since).total_seconds() if since else 0.0


# ---- one node's forward steps -----------------------------------------------------------------


def _fail(r: Rollout, rn: RolloutNode, kind: str, why: str, now: dt.datetime) -> bool:
    """The node failed. Its versions: it waits, failed, for the rollout's gate. The node itself
    (unreachable, install timeout, drain deadline): it is put back on its last-known-good versions
    and in service at once, reported, and counts toward the circuit breaker."""
    rn.failure_kind, rn.reason = kind, why[:4000]
    _set(r, rn, Step.FAILED, now, why=why)
    if kind == FailureKind.NODE:
        node_rollback_start(r, rn, why=why, now=now)
    return True


def _take_out(r: Rollout, rn: RolloutNode, node: Node, *, purpose: str) -> str | None:
    """Drain an active node or put a standby one in maintenance, owner rollout. Returns None when
    done, or what it waits for (the capacity guard, a concurrent change)."""
    reason = f"rollout #{r.pk}: {purpose}"
    try:
        if node.state == NodeState.STANDBY:
            lifecycle.node_maintenance_enter(node=node, owner=OWNER, reason=reason, actor=ACTOR, source=Source.SYSTEM)
            rn.hold = "maintenance"
        else:
            lifecycle.node_drain(node=node, owner=OWNER, reason=reason, actor=ACTOR, deadline_s=r.drain_deadline_s,
                                 deadline_action=DeadlineAction.ALERT, source=Source.SYSTEM)
            rn.hold = "drain"
    except lifecycle.CapacityRefused as exc:
        return f"waiting for capacity: {exc.detail}"
    except Conflict as exc:
        return f"waiting: {exc.detail}"
    rn.save(update_fields=["hold"])
    return None


def _return(r: Rollout, rn: RolloutNode, node: Node, why: str) -> str | None:
    """Release the rollout's own hold (never another owner's). None when done, else what it waits for."""
    reason = f"rollout #{r.pk}: {why}"
    try:
        if rn.hold == "maintenance":
            if node.state == NodeState.MAINTENANCE:
                lifecycle.node_maintenance_leave(node=node, owner=OWNER, reason=reason, actor=ACTOR,
                                                 source=Source.SYSTEM)
        elif rn.hold == "drain":
            hold = _hold_of(node.pk)
            if hold is not None and hold.owner == OWNER:
                lifecycle.node_uncordon(node=node, owner=OWNER, reason=reason, actor=ACTOR, source=Source.SYSTEM)
    except Conflict as exc:
        return f"waiting to return the node to service: {exc.detail}"
    rn.hold = ""
    rn.save(update_fields=["hold"])
    return None


def _drained(r: Rollout, rn: RolloutNode, node: Node, now: dt.datetime) -> tuple[bool, str]:
    """Is the node out of service under the rollout's hold? (True, "") or (False, what it waits for);
    raises _Lost when the hold is gone or another owner's."""
    if rn.hold == "maintenance":
        if node.state == NodeState.MAINTENANCE:
            return True, ""
        raise _Lost(f"node left maintenance ({node.state}) while the rollout held it")
    hold = _hold_of(node.pk)
    if hold is None or hold.owner != OWNER:
        raise _Lost("its hold was released by someone else" if hold is None else _holder_text(hold))
    if hold.state == DrainState.DRAINED:
        return True, ""
    if hold.deadline is not None and hold.deadline <= now:
        raise _Deadline(f"drain deadline passed: {op_selectors.drain_waiting_for(hold, now=now)}")
    return False, f"draining {node.hostname}: {op_selectors.drain_waiting_for(hold, now=now)}"


class _Lost(Exception):
    pass


class _Deadline(Exception):
    pass


def _forward(r: Rollout, rn: RolloutNode, now: dt.datetime) -> bool:
    node = Node.objects.select_related("tier").get(pk=rn.node_id)
    driver, framework = _target(r)
    if rn.step == Step.PENDING:
        if r.state not in (RolloutState.CANARY, RolloutState.WAVES) or rn.wave != r.current_wave:
            return False
        hold = _hold_of(node.pk)
        if hold is not None and hold.owner != OWNER:
            rn.reason = _holder_text(hold)
            _set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        if node.gray or node.state not in (NodeState.ACTIVE, NodeState.STANDBY, NodeState.CORDONED,
                                           NodeState.DRAINING, NodeState.DRAINED):
            rn.reason = f"node is {node.state} at its turn" + (" (gray pool)" if node.gray else "")
            _set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        _set(r, rn, Step.CORDONING, now, waiting=f"cordoning {node.hostname}",
             why=f"wave {rn.wave}: upgrading to {driver} + {framework}")
        return True
    if rn.step == Step.CORDONING:
        hold = _hold_of(node.pk)
        if hold is not None and hold.owner != OWNER:
            rn.reason = _holder_text(hold)
            _set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        if hold is not None:  # ours already (a pass that stored the hold and died before the step)
            rn.hold = "drain"
            rn.save(update_fields=["hold"])
        elif node.state not in (NodeState.ACTIVE, NodeState.STANDBY):
            rn.reason = f"node is {node.state}; left as it is"
            _set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        else:
            waiting = _take_out(r, rn, node, purpose=f"install {driver} + {framework}")
            if waiting is not None:
                return _wait(rn, waiting)
        _set(r, rn, Step.DRAINING, now, waiting=f"draining {node.hostname}")
        return True
    if rn.step == Step.DRAINING:
        try:
            done, waiting = _drained(r, rn, node, now)
        except _Lost as exc:
            rn.hold = ""
            return _fail(r, rn, FailureKind.NODE, str(exc), now)
        except _Deadline as exc:
            return _fail(r, rn, FailureKind.NODE, str(exc), now)
        if not done:
            return _wait(rn, waiting)
        _set(r, rn, Step.INSTALLING, now, waiting=f"installing {driver} + {framework} on {node.hostname}")
        return True
    if rn.step == Step.INSTALLING:
        if rn.install_command_id is None:
            rn.install_command = _send_install(r, rn, driver, framework, restore=False)
            rn.save(update_fields=["install_command"])
            return _wait(rn, f"waiting for {node.hostname}'s agent to install {driver} + {framework} "
                             f"(command #{rn.install_command.pk}; timeout {r.install_timeout_s} s)")
        command = NodeCommand.objects.get(pk=rn.install_command_id)
        if command.state == CommandState.SUCCEEDED:
            _set_versions(r, rn, driver, framework, f"rollout #{r.pk}: installed")
            _set(r, rn, Step.VALIDATING, now, waiting=f"running suite {r.suite} on {node.hostname}")
            return True
        if command.state in FAILED_COMMAND:
            return _fail(r, rn, FailureKind.NODE, f"install: {_answer(command)}", now)
        age = _age(command.created_at, now)
        if age > r.install_timeout_s:
            return _fail(r, rn, FailureKind.NODE, f"install: no answer within {r.install_timeout_s} s "
                                                  f"(command {command.state})", now)
        return _wait(rn, f"waiting for {node.hostname}'s agent to install {driver} + {framework} (command "
                         f"#{command.pk} {command.state}; timeout in {r.install_timeout_s - age:.0f} s)")
    if rn.step == Step.VALIDATING:
        if rn.vector_run_id is None:
            modules = list(Module.objects.filter(serial__in=rn.modules, node_id=rn.node_id))
            run = runs.run_create(suite=r.suite, modules=modules, actor=ACTOR, combination=r.combination,
                                  purpose=RunPurpose.MANUAL, timeout_s=r.vectors_timeout_s, source=Source.SYSTEM,
                                  reason=f"rollout #{r.pk}: {node.hostname} on {driver} + {framework}")
            rn.vector_run = run
            rn.save(update_fields=["vector_run"])
            return _wait(rn, f"waiting for vector run #{run.pk} on {len(modules)} module(s) of {node.hostname}")
        current = rn.vector_run
        assert current is not None
        run = current
        run.refresh_from_db(fields=["state", "message"])
        if run.state == RunState.PASSED:
            _set(r, rn, Step.UNCORDONING, now, waiting=f"returning {node.hostname} to service",
                 why=f"vector run #{run.pk} passed: {run.message}")
            return True
        if run.state == RunState.FAILED:
            return _fail(r, rn, FailureKind.VERSIONS, f"vectors failed on {node.hostname}: vector run #{run.pk}: "
                                                      f"{run.message}", now)
        if run.state in FINAL_RUN_STATES:
            return _fail(r, rn, FailureKind.NODE, f"vector run #{run.pk} ended {run.state}: {run.message}", now)
        answered = run.targets.filter(state__in=(TargetState.DONE, TargetState.ERROR, TargetState.TIMED_OUT)).count()
        total = run.targets.count()
        return _wait(rn, f"waiting for vector run #{run.pk}: {answered}/{total} module(s) answered "
                         f"(timeout {r.vectors_timeout_s} s)")
    if rn.step == Step.UNCORDONING:
        waiting = _return(r, rn, node, f"upgraded to {driver} + {framework}")
        if waiting is not None:
            return _wait(rn, waiting)
        _set(r, rn, Step.DONE, now, why=f"on {driver} + {framework}")
        return True
    return False


# ---- one node's rollback ----------------------------------------------------------------------


def node_rollback_start(r: Rollout, rn: RolloutNode, *, why: str, now: dt.datetime | None = None) -> None:
    """Start putting ``rn`` back on its last-known-good versions (or skip it: nothing was done)."""
    now = now or timezone.now()
    if rn.vector_run_id is not None and rn.step == Step.VALIDATING:
        run = rn.vector_run
        if run is not None and run.state not in FINAL_RUN_STATES:
            try:
                runs.run_cancel(run=run, actor=ACTOR, reason=f"rollout #{r.pk} rolls back", source=Source.SYSTEM)
            except Conflict:
                pass
    if rn.install_command_id is None and not rn.hold:
        if rn.step in (Step.PENDING, Step.CORDONING):
            rn.reason = rn.reason or why
            _set(r, rn, Step.SKIPPED, now, why=why)
        else:
            rn.rollback_phase = RollbackPhase.RETURN
            _set(r, rn, Step.ROLLING_BACK, now, why=why, waiting="nothing was installed")
        return
    if rn.install_command_id is None:
        rn.rollback_phase = RollbackPhase.RETURN
    elif rn.hold:
        rn.rollback_phase = RollbackPhase.INSTALL
    else:
        rn.rollback_phase = RollbackPhase.HOLD
    _set(r, rn, Step.ROLLING_BACK, now, why=why, waiting=f"rolling back ({rn.rollback_phase})")


def _rollback(r: Rollout, rn: RolloutNode, now: dt.datetime) -> bool:
    node = Node.objects.select_related("tier").get(pk=rn.node_id)
    lkg = f"{rn.lkg_driver} + {rn.lkg_framework}"
    if rn.rollback_phase == RollbackPhase.HOLD:
        if not rn.hold:
            hold = _hold_of(node.pk)
            if hold is not None and hold.owner != OWNER:
                return _wait(rn, f"waiting to roll back: {_holder_text(hold)}")
            if hold is not None:
                rn.hold = "drain"
            else:
                waiting = _take_out(r, rn, node, purpose=f"roll back to {lkg}")
                if waiting is not None:
                    return _wait(rn, waiting)
        try:
            done, waiting = _drained(r, rn, node, now)
        except (_Lost, _Deadline) as exc:
            return _wait(rn, f"waiting to roll back: {exc}")
        if not done:
            return _wait(rn, waiting)
        rn.rollback_phase = RollbackPhase.INSTALL
        rn.save(update_fields=["rollback_phase", "hold"])
        return True
    if rn.rollback_phase == RollbackPhase.INSTALL:
        if rn.restore_command_id is None:
            rn.restore_command = _send_install(r, rn, rn.lkg_driver, rn.lkg_framework, restore=True)
            rn.save(update_fields=["restore_command"])
            return _wait(rn, f"waiting for {node.hostname}'s agent to put {lkg} back "
                             f"(command #{rn.restore_command.pk})")
        command = NodeCommand.objects.get(pk=rn.restore_command_id)
        if command.state == CommandState.SUCCEEDED:
            _set_versions(r, rn, rn.lkg_driver, rn.lkg_framework, f"rollout #{r.pk}: rolled back")
            rn.rollback_phase = RollbackPhase.RETURN
            rn.save(update_fields=["rollback_phase"])
            return True
        age = _age(command.created_at, now)
        if command.state in FAILED_COMMAND or age > r.install_timeout_s:
            detail = (_answer(command) if command.state in FAILED_COMMAND
                      else f"no answer within {r.install_timeout_s} s")
            rn.needs_hand = True
            rn.reason = f"{rn.reason}; rollback to {lkg} failed ({detail}): check by hand, the node stays held"[:4000]
            _set(r, rn, Step.FAILED, now, why=rn.reason)
            return True
        return _wait(rn, f"waiting for {node.hostname}'s agent to put {lkg} back (command #{command.pk} "
                         f"{command.state}; timeout in {r.install_timeout_s - age:.0f} s)")
    waiting = _return(r, rn, node, f"rolled back to {lkg}")
    if waiting is not None:
        return _wait(rn, waiting)
    rn.rollback_phase = RollbackPhase.NONE
    _set(r, rn, Step.ROLLED_BACK, now, why=f"back on {lkg}")
    return True


def rollback_begin(r: Rollout, why: str, now: dt.datetime | None = None) -> None:
    """The rollout rolls back: every node it touched goes back, nodes not reached are skipped."""
    now = now or timezone.now()
    r.state, r.message, r.paused_from = RolloutState.ROLLING_BACK, why[:4000], ""
    r.waiting_for = "rolling back"
    r.save(update_fields=["state", "message", "paused_from", "waiting_for"])
    for rn in r.nodes.select_related("node", "vector_run").order_by("wave", "position"):
        if rn.step == Step.PENDING:
            rn.reason = "the rollout rolled back before its turn"
            _set(r, rn, Step.SKIPPED, now, why=rn.reason)
        elif rn.step in IN_PROGRESS_STEPS or rn.step == Step.DONE or (rn.step == Step.FAILED and not rn.needs_hand):
            node_rollback_start(r, rn, why=why, now=now)


# ---- the rollout's own steps: gates, waves, completion ----------------------------------------


def _health_gate(r: Rollout, node_ids: list[int], since: dt.datetime | None) -> dict[str, Any]:
    """No new health finding on the upgraded nodes or their modules since the wave began."""
    found = health_selectors.findings_since(node_ids=node_ids, since=since)
    detail = f"{len(found)} new finding(s) on upgraded nodes"
    if found:
        detail += ": " + "; ".join(f"{f.check_name} on {f.subject_key}" for f in found[:5])
    return {"ok": not found, "detail": detail, "findings": len(found)}


def _gates(r: Rollout, wave: list[RolloutNode], now: dt.datetime) -> dict[str, Any]:
    done = [rn for rn in wave if rn.step == Step.DONE]
    started = min((rn.started_at for rn in wave if rn.started_at), default=None)
    return {"wave": r.current_wave, "at": now.isoformat(),
            "vectors": {"ok": all(rn.vector_run is not None and rn.vector_run.state == RunState.PASSED for rn in done),
                        "runs": {rn.node.hostname: rn.vector_run_id for rn in done}},
            "health": _health_gate(r, [rn.node_id for rn in done], started),
            "nodes": {"done": len(done), "skipped": sum(1 for rn in wave if rn.step == Step.SKIPPED),
                      "failed": sum(1 for rn in wave if rn.failure_kind)}}


def cohort_gate(r: Rollout, upgraded: list[RolloutNode], control: list[RolloutNode], since: dt.datetime,
                now: dt.datetime) -> dict[str, Any]:
    """The upgraded nodes against the not-yet-upgraded ones over ``since``..``now`` (the bake window),
    per stage from the per-node stage rollups. p95 latency: where both cohorts served
    ``COHORT_MIN_REQUESTS`` in the stage over the hour before the rollout started (the baseline), the
    upgraded cohort's own p95 then, moved as the control's moved since, is what it is expected to
    show; without a baseline, the control's p95. The upgraded p95 must be within ``cohort_tolerance_pct``
    of that (plus a little absolute slack), and the error rate within it of the control's. A stage is
    compared only when both cohorts served ``COHORT_MIN_REQUESTS`` in it over the bake window; with
    nothing to compare (no control left, no per-node data) the gate passes and says it was not
    evaluated."""
    tol = r.cohort_tolerance_pct / 100
    cohorts = {"upgraded": [rn.node_id for rn in upgraded], "control": [rn.node_id for rn in control]}
    figures = telemetry_selectors.stage_cohorts(cohorts=cohorts, since=since, until=now)
    started = r.started_at or r.created_at
    base_since = started - dt.timedelta(seconds=COHORT_BASELINE_S)
    baseline = telemetry_selectors.stage_cohorts(cohorts=cohorts, since=base_since, until=started)
    compared: list[dict[str, Any]] = []
    for stage, up in figures["upgraded"].items():
        ctl = figures["control"].get(stage)
        if ctl is None or min(up["requests"], ctl["requests"]) < COHORT_MIN_REQUESTS:
            continue
        base_up, base_ctl = baseline["upgraded"].get(stage), baseline["control"].get(stage)
        before = None
        expected, against = ctl["p95_ms"], f"control {ctl['p95_ms']:g} ms"
        if (base_up and base_ctl and min(base_up["requests"], base_ctl["requests"]) >= COHORT_MIN_REQUESTS
                and base_ctl["p95_ms"] > 0):
            before = {"upgraded_p95_ms": base_up["p95_ms"], "control_p95_ms": base_ctl["p95_ms"]}
            expected = base_up["p95_ms"] * ctl["p95_ms"] / base_ctl["p95_ms"]
            against = (f"{base_up['p95_ms']:g} ms before the rollout; control {base_ctl['p95_ms']:g} → "
                       f"{ctl['p95_ms']:g} ms")
        p95_limit = round(expected * (1 + tol) + COHORT_SLACK_MS, 2)
        err_limit = round(ctl["error_rate"] * (1 + tol) + COHORT_SLACK_ERROR_RATE, 6)
        why = []
        if up["p95_ms"] > p95_limit:
            why.append(f"{stage} p95 {up['p95_ms']:g} ms > {p95_limit:g} ms ({against} + {r.cohort_tolerance_pct} %)")
        if up["error_rate"] > err_limit:
            why.append(f"{stage} error rate {up['error_rate']:.2%} > {err_limit:.2%} (control "
                       f"{ctl['error_rate']:.2%} + {r.cohort_tolerance_pct} %)")
        compared.append({"stage": stage, "upgraded_p95_ms": up["p95_ms"], "control_p95_ms": ctl["p95_ms"],
                         "baseline": before, "expected_p95_ms": round(expected, 2),
                         "limit_p95_ms": p95_limit, "upgraded_error_rate": up["error_rate"],
                         "control_error_rate": ctl["error_rate"], "limit_error_rate": err_limit,
                         "upgraded_requests": up["requests"], "control_requests": ctl["requests"],
                         "ok": not why, "why": "; ".join(why)})
    failed = [c["why"] for c in compared if not c["ok"]]
    if failed:
        detail = "upgraded cohort worse than control: " + "; ".join(failed)
    elif compared:
        with_baseline = sum(1 for c in compared if c["baseline"])
        detail = (f"{len(compared)} stage(s) within {r.cohort_tolerance_pct} % of control: "
                  + ", ".join(c["stage"] for c in compared)
                  + (f" ({with_baseline} against the cohorts' own figures before the rollout)"
                     if with_baseline else ""))
    elif not control:
        detail = "not evaluated: no node left that is not upgraded (no control cohort)"
    elif not upgraded:
        detail = "not evaluated: no node upgraded in this rollout yet"
    else:
        detail = (f"not evaluated: no stage with {COHORT_MIN_REQUESTS}+ requests in both cohorts in the per-node "
                  "stage rollups over the bake window")
    return {"kind": "cohort", "wave": r.current_wave, "at": now.isoformat(), "ok": not failed, "detail": detail,
            "window": {"since": since.isoformat(), "until": now.isoformat()},
            "baseline": {"since": base_since.isoformat(), "until": started.isoformat(),
                         "upgraded": baseline["upgraded"], "control": baseline["control"]},
            "tolerance_pct": r.cohort_tolerance_pct,
            "upgraded": {"nodes": len(upgraded), "hostnames": [rn.node.hostname for rn in upgraded[:20]],
                         "stages": figures["upgraded"]},
            "control": {"nodes": len(control), "hostnames": [rn.node.hostname for rn in control[:20]],
                        "stages": figures["control"]},
            "compared": compared}


def _cohort_passed(r: Rollout) -> bool:
    """This wave's cohort gate was evaluated and passed, or an operator resumed past its failure."""
    return any(g.get("kind") == "cohort" and g.get("wave") == r.current_wave and (g.get("ok") or g.get("acknowledged"))
               for g in r.gates)


def _gate_failed(r: Rollout, why: str, now: dt.datetime) -> None:
    """A gate failed: roll back or pause, per the rollout's policy (one audit record)."""
    audit_record(actor=ACTOR, action="rollout.gate_failed", target=r, source=Source.SYSTEM, reason=why[:4000],
                 changes={"policy": r.on_failure})
    if r.on_failure == OnFailure.ROLLBACK:
        rollback_begin(r, why, now)
    else:
        r.paused_from, r.state, r.message = r.state, RolloutState.PAUSED, why[:4000]
        r.waiting_for = "paused on a failed gate: waiting for resume, abort or rollback"


def _fail_rollout(r: Rollout, now: dt.datetime, why: str, *, before: str) -> None:
    """The rollout cannot go on and cannot put things back on its own: ``failed``, with the reason."""
    r.state, r.finished_at, r.waiting_for, r.paused_from = RolloutState.FAILED, now, "", ""
    r.message = why[:4000]
    audit_record(actor=ACTOR, action="rollout.failed", target=r, source=Source.SYSTEM, reason=r.message,
                 changes={"state": [before, RolloutState.FAILED]})


def _complete(r: Rollout, now: dt.datetime) -> None:
    rows = list(r.nodes.select_related("node"))
    if not any(rn.step == Step.DONE for rn in rows):
        # Every node was skipped or failed on its own at its turn: nothing was upgraded, nothing to pin.
        left = [f"{rn.node.hostname} ({rn.reason or rn.step})" for rn in rows]
        _fail_rollout(r, now, "no node could be upgraded: " + "; ".join(left[:20]), before=r.state)
        return
    combination = r.combination
    combination.refresh_from_db(fields=["state"])
    if combination.state == CombinationState.VALIDATED:
        inventory_services.combination_set_state(combination=combination, state=CombinationState.PINNED, actor=ACTOR,
                                                 source=Source.SYSTEM, reason=f"rollout #{r.pk} completed")
    done = [rn.node.hostname for rn in rows if rn.step == Step.DONE]
    left = [f"{rn.node.hostname} ({rn.reason})" for rn in rows if rn.step != Step.DONE]
    r.state, r.finished_at, r.waiting_for = RolloutState.COMPLETED, now, ""
    r.message = (f"{len(done)} node(s) upgraded; combination pinned"
                 + (f"; not upgraded: {'; '.join(left[:20])}" if left else ""))[:4000]
    audit_record(actor=ACTOR, action="rollout.completed", target=r, source=Source.SYSTEM, reason=r.message,
                 changes={"state": [RolloutState.WAVES, RolloutState.COMPLETED]})


def _settled(rn: RolloutNode) -> bool:
    return rn.step in FINAL_STEPS or rn.needs_hand


def _rollout_step(r: Rollout, now: dt.datetime) -> None:
    rows = list(r.nodes.select_related("node", "vector_run").order_by("wave", "position"))
    if r.state in (RolloutState.CANARY, RolloutState.WAVES):
        failed = [rn for rn in rows if rn.step == Step.FAILED and rn.failure_kind == FailureKind.VERSIONS
                  and not rn.needs_hand]
        failures = sum(1 for rn in rows if rn.failure_kind) - r.failures_acknowledged
        why = ""
        if failed:
            why = (f"wave {r.current_wave}{' (canary)' if r.current_wave == 0 else ''} failed its gate: "
                   + "; ".join(rn.reason for rn in failed))
        elif failures >= r.max_failures:
            why = (f"circuit breaker: {failures} node(s) failed (limit {r.max_failures}): "
                   + "; ".join(f"{rn.node.hostname}: {rn.reason}" for rn in rows if rn.failure_kind)[:3000])
        if why:
            r.gates = [*r.gates, {"wave": r.current_wave, "at": now.isoformat(), "failed": why[:4000]}]
            r.save(update_fields=["gates"])
            _gate_failed(r, why, now)
            return
        wave = [rn for rn in rows if rn.wave == r.current_wave]
        busy = [rn for rn in wave if not _settled(rn)]
        if busy:
            r.waiting_for = (f"wave {r.current_wave}: {len(busy)} node(s) in progress; "
                             + "; ".join(f"{rn.node.hostname}: {rn.waiting_for or rn.step}" for rn in busy[:5]))[:1000]
            return
        if r.wave_finished_at is None:
            r.wave_finished_at = now
            gate = _gates(r, wave, now)
            r.gates = [*r.gates, gate]
            if not (gate["vectors"]["ok"] and gate["health"]["ok"]):
                r.save(update_fields=["gates"])
                _gate_failed(r, f"wave {r.current_wave} failed its gate: {gate}", now)
                return
        until = r.wave_finished_at + dt.timedelta(seconds=r.bake_s)
        if now < until:
            r.waiting_for = (f"baking wave {r.current_wave} until {until:%H:%M:%S} UTC "
                             f"({(until - now).total_seconds():.0f} s); vectors and health passed; then the "
                             f"upgraded nodes' stage latency and errors are compared with the rest's "
                             f"(within {r.cohort_tolerance_pct} %)")
            return
        if not _cohort_passed(r):
            upgraded = [rn for rn in rows if rn.step == Step.DONE]
            control = [rn for rn in rows if rn.step == Step.PENDING and rn.wave is not None
                       and rn.wave > r.current_wave]
            gate = cohort_gate(r, upgraded, control, r.wave_finished_at, now)
            r.gates = [*r.gates, gate]
            if not gate["ok"]:
                r.save(update_fields=["gates"])
                _gate_failed(r, f"wave {r.current_wave}{' (canary)' if r.current_wave == 0 else ''} failed the "
                                f"cohort gate over its bake window: {gate['detail']}", now)
                return
            publish("rollout.gate", {"id": r.pk, "gate": gate}, groups=[FLEET_GROUP])
        if r.current_wave + 1 < r.wave_count:
            before = r.state
            r.current_wave += 1
            r.state, r.wave_finished_at = RolloutState.WAVES, None
            r.waiting_for = f"wave {r.current_wave} starting"
            audit_record(actor=ACTOR, action="rollout.wave", target=r, source=Source.SYSTEM,
                         reason=f"wave {r.current_wave} of {r.wave_count - 1} starts",
                         changes={"state": [before, r.state], "wave": [r.current_wave - 1, r.current_wave]})
            return
        _complete(r, now)
        return
    if r.state == RolloutState.ROLLING_BACK:
        busy = [rn for rn in rows if not _settled(rn) and rn.step not in (Step.DONE, Step.PENDING)]
        if busy:
            r.waiting_for = (f"rolling back {len(busy)} node(s): "
                             + "; ".join(f"{rn.node.hostname}: {rn.waiting_for or rn.step}" for rn in busy[:5]))[:1000]
            return
        stuck = [rn for rn in rows if rn.needs_hand]
        if stuck:
            # The rollback itself failed somewhere: the fleet is not back where it was.
            _fail_rollout(r, now, f"{r.message}; the rollback failed on {len(stuck)} node(s), held for a check by "
                                  "hand: " + "; ".join(f"{rn.node.hostname}: {rn.reason}" for rn in stuck[:10]),
                          before=RolloutState.ROLLING_BACK)
            return
        r.state, r.finished_at, r.waiting_for = RolloutState.ROLLED_BACK, now, ""
        audit_record(actor=ACTOR, action="rollout.rolled_back", target=r, source=Source.SYSTEM, reason=r.message,
                     changes={"state": [RolloutState.ROLLING_BACK, RolloutState.ROLLED_BACK]})
        return
    if r.state in (RolloutState.PAUSED, RolloutState.ABORTED):
        busy = [rn for rn in rows if rn.step in IN_PROGRESS_STEPS or rn.step == Step.ROLLING_BACK]
        if busy:
            r.waiting_for = (f"{r.state}: finishing {len(busy)} node(s) in progress: "
                             + "; ".join(f"{rn.node.hostname}: {rn.waiting_for or rn.step}" for rn in busy[:5]))[:1000]
        elif r.state == RolloutState.ABORTED:
            r.waiting_for = ""


def _pass(rollout_id: int) -> str | None:
    with transaction.atomic():
        r = (Rollout.objects.select_for_update(skip_locked=True, of=("self",))
             .select_related("combination", "combination__driver", "combination__framework", "module_type", "suite")
             .filter(pk=rollout_id).first())
        if r is None:
            return None
        now = timezone.now()
        before = (r.state, r.current_wave)
        if r.state == RolloutState.PLANNED:
            r.state, r.started_at = RolloutState.CANARY, now
            audit_record(actor=ACTOR, action="rollout.start", target=r, source=Source.SYSTEM,
                         reason="the canary starts", changes={"state": [RolloutState.PLANNED, RolloutState.CANARY]})
        for _ in range(MAX_PASSES):
            moved = False
            for rn in (r.nodes.exclude(step__in=sorted(FINAL_STEPS)).filter(needs_hand=False)
                       .select_related("node", "vector_run").order_by("wave", "position")):
                if rn.step == Step.ROLLING_BACK:
                    moved = _rollback(r, rn, now) or moved
                elif rn.step != Step.FAILED:
                    moved = _forward(r, rn, now) or moved
            state = r.state
            _rollout_step(r, now)
            if not moved and r.state == state:
                break
        r.save()
        if (r.state, r.current_wave) != before:
            publish("rollout.state", {"id": r.pk, "state": r.state, "wave": r.current_wave,
                                      "waiting_for": r.waiting_for, "message": r.message}, groups=[FLEET_GROUP])
        return str(r.state)


def rollout_advance(rollout_id: int) -> str | None:
    """Advance one rollout as far as it goes now; its state (None when another worker has it)."""
    return _pass(rollout_id)


def rollouts_advance() -> dict[int, str | None]:
    """The sweep: every rollout that is active or still has nodes in progress."""
    busy = sorted(IN_PROGRESS_STEPS | {Step.ROLLING_BACK})
    ids = list(Rollout.objects.filter(Q(state__in=sorted(ACTIVE_ROLLOUT_STATES)) | Q(nodes__step__in=busy))
               .distinct().order_by("pk").values_list("pk", flat=True))
    return {pk: rollout_advance(pk) for pk in ids}
