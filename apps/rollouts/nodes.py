"""One node's steps in a rollout: forward (cordon or drain, install, validate with vectors, return
to service) and back (hold, put the last-known-good versions back, return). Each step is stored
with one audit record before the next is taken, and every step can be taken again (the lifecycle
returns the rollout's own hold, a command or vector run already sent is looked up, not sent
again).

Node and module state change only through ``apps.operations.lifecycle`` with owner ``rollout``
(its capacity guard refuses a cordon below the tier's floor: the node waits and says so). A
rollout never releases another owner's hold: a node held by an operator or by health is skipped
with the reason and stays held. Nor does it take a node with an open critical health finding on it
or its modules: skipped at its turn, naming the finding.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from apps.agents.choices import CommandState
from apps.agents.models import NodeCommand
from apps.agents.services import install_versions_send
from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.common.errors import Conflict
from apps.common.events import FLEET_GROUP, publish
from apps.inventory import services as inventory_services
from apps.inventory.choices import NodeState
from apps.inventory.models import Module, Node
from apps.operations import lifecycle
from apps.operations import selectors as op_selectors
from apps.operations.choices import ACTIVE_DRAIN_STATES, DeadlineAction, DrainState, Owner
from apps.operations.models import Drain
from apps.rollouts import gates
from apps.rollouts.choices import FINAL_STEPS, FailureKind, RollbackPhase, RolloutState, Step
from apps.rollouts.models import Rollout, RolloutNode
from apps.vectors import runs
from apps.vectors.choices import FINAL_RUN_STATES, RunPurpose, RunState, TargetState

ACTOR = "rollout"
OWNER = Owner.ROLLOUT
FAILED_COMMAND = (CommandState.FAILED, CommandState.UNKNOWN, CommandState.EXPIRED)


# ---- small helpers ------------------------------------------------------------------------------


def _target(r: Rollout) -> tuple[str, str]:
    return r.combination.driver.version, r.combination.framework.version


def _hold_of(node_id: int) -> Drain | None:
    return Drain.objects.filter(node_id=node_id, state__in=ACTIVE_DRAIN_STATES).first()


def _holder_text(hold: Drain) -> str:
    who = hold.created_by_name or hold.owner
    return f"held by {hold.get_owner_display().lower()} ({who}: {hold.reason!r}); left as it is"


def step_set(r: Rollout, rn: RolloutNode, step: str, now: dt.datetime, *, waiting: str = "", why: str = "") -> None:
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
    step_set(r, rn, Step.FAILED, now, why=why)
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


def _skipped_for_health(r: Rollout, rn: RolloutNode, now: dt.datetime) -> bool:
    """A critical health finding opened on the node or its modules since the rollout was planned: the
    node is skipped at its turn, the finding named in its reason and the audit record."""
    finding = gates.critical_blocks(node_ids=[rn.node_id]).get(rn.node_id)
    if finding is None:
        return False
    rn.reason = f"at its turn: {gates.critical_reason(finding)}"
    step_set(r, rn, Step.SKIPPED, now, why=rn.reason)
    return True


class _Lost(Exception):
    pass


class _Deadline(Exception):
    pass


def forward(r: Rollout, rn: RolloutNode, now: dt.datetime) -> bool:
    node = Node.objects.select_related("tier").get(pk=rn.node_id)
    driver, framework = _target(r)
    if rn.step == Step.PENDING:
        if r.state not in (RolloutState.CANARY, RolloutState.WAVES) or rn.wave != r.current_wave:
            return False
        hold = _hold_of(node.pk)
        if hold is not None and hold.owner != OWNER:
            rn.reason = _holder_text(hold)
            step_set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        if node.gray or node.state not in (NodeState.ACTIVE, NodeState.STANDBY, NodeState.CORDONED,
                                           NodeState.DRAINING, NodeState.DRAINED):
            rn.reason = f"node is {node.state} at its turn" + (" (gray pool)" if node.gray else "")
            step_set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        if _skipped_for_health(r, rn, now):
            return True
        step_set(r, rn, Step.CORDONING, now, waiting=f"cordoning {node.hostname}",
             why=f"wave {rn.wave}: upgrading to {driver} + {framework}")
        return True
    if rn.step == Step.CORDONING:
        hold = _hold_of(node.pk)
        if hold is not None and hold.owner != OWNER:
            rn.reason = _holder_text(hold)
            step_set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        if hold is not None:  # ours already (a pass that stored the hold and died before the step)
            rn.hold = "drain"
            rn.save(update_fields=["hold"])
        elif node.state not in (NodeState.ACTIVE, NodeState.STANDBY):
            rn.reason = f"node is {node.state}; left as it is"
            step_set(r, rn, Step.SKIPPED, now, why=rn.reason)
            return True
        elif _skipped_for_health(r, rn, now):  # still not taken out (waiting for capacity): not taken now
            return True
        else:
            waiting = _take_out(r, rn, node, purpose=f"install {driver} + {framework}")
            if waiting is not None:
                return _wait(rn, waiting)
        step_set(r, rn, Step.DRAINING, now, waiting=f"draining {node.hostname}")
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
        step_set(r, rn, Step.INSTALLING, now, waiting=f"installing {driver} + {framework} on {node.hostname}")
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
            step_set(r, rn, Step.VALIDATING, now, waiting=f"running suite {r.suite} on {node.hostname}")
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
            step_set(r, rn, Step.UNCORDONING, now, waiting=f"returning {node.hostname} to service",
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
        step_set(r, rn, Step.DONE, now, why=f"on {driver} + {framework}")
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
            step_set(r, rn, Step.SKIPPED, now, why=why)
        else:
            rn.rollback_phase = RollbackPhase.RETURN
            step_set(r, rn, Step.ROLLING_BACK, now, why=why, waiting="nothing was installed")
        return
    if rn.install_command_id is None:
        rn.rollback_phase = RollbackPhase.RETURN
    elif rn.hold:
        rn.rollback_phase = RollbackPhase.INSTALL
    else:
        rn.rollback_phase = RollbackPhase.HOLD
    step_set(r, rn, Step.ROLLING_BACK, now, why=why, waiting=f"rolling back ({rn.rollback_phase})")


def rollback(r: Rollout, rn: RolloutNode, now: dt.datetime) -> bool:
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
            step_set(r, rn, Step.FAILED, now, why=rn.reason)
            return True
        return _wait(rn, f"waiting for {node.hostname}'s agent to put {lkg} back (command #{command.pk} "
                         f"{command.state}; timeout in {r.install_timeout_s - age:.0f} s)")
    waiting = _return(r, rn, node, f"rolled back to {lkg}")
    if waiting is not None:
        return _wait(rn, waiting)
    rn.rollback_phase = RollbackPhase.NONE
    step_set(r, rn, Step.ROLLED_BACK, now, why=f"back on {lkg}")
    return True
