"""Validating a candidate combination on the gray pool.

``combination_validate`` plans a validation run on every module of the combination's type
in gray nodes (standby or maintenance nodes an admin put in the pool; they never serve) and
moves the combination ``candidate → validating``. The run (advanced by ``advance.run_advance``)
then goes through three phases:

1. install: ``install_versions`` to each gray node; a module's recorded versions change when
   its agent acknowledges the install;
2. execute: the suite, as any run;
3. restore: ``install_versions`` back to each module's previous versions.

When the restore is acknowledged the combination moves to ``validated`` (no case outside its
tolerance) or ``blocked`` (the reason names the failing cases and their errors); a run that
could not conclude (no module installed, a module without results) or was cancelled returns
it to ``candidate``.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.db import transaction

from apps.agents.choices import CommandState
from apps.agents.services import install_versions_send
from apps.audit.choices import Source
from apps.common.errors import Conflict
from apps.inventory import services as inventory_services
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, VersionCombination
from apps.vectors.choices import FINAL_RUN_STATES, Outcome, RunPhase, RunPurpose, RunState, TargetState
from apps.vectors.models import RunTarget, Suite, VectorRun
from apps.vectors.runs import run_create, run_finish, run_summary

VALIDATABLE_STATES = (CombinationState.CANDIDATE, CombinationState.BLOCKED)
GRAY_NODE_STATES = (NodeState.STANDBY, NodeState.MAINTENANCE)
ACTOR = "vectors"


def gray_modules(combination: VersionCombination) -> list[Module]:
    """Modules of the combination's type on gray nodes (standby or maintenance)."""
    return list(Module.objects.filter(module_type=combination.module_type, node__gray=True,
                                      node__state__in=GRAY_NODE_STATES)
                .select_related("node").order_by("node__hostname", "slot"))


@transaction.atomic
def combination_validate(*, combination: VersionCombination, suite: Suite, actor: Any, reason: str = "",
                         timeout_s: int = 600, source: str = Source.API) -> VectorRun:
    locked = VersionCombination.objects.select_for_update().select_related(
        "module_type", "driver", "framework").get(pk=combination.pk)
    if locked.state not in VALIDATABLE_STATES:
        raise Conflict(f"combination {locked} is {locked.state}; only a candidate or blocked combination is "
                       "validated", extra={"state": locked.state})
    running = VectorRun.objects.filter(combination=locked, purpose=RunPurpose.VALIDATION).exclude(
        state__in=FINAL_RUN_STATES).first()
    if running is not None:
        raise Conflict(f"combination {locked} is already being validated by run #{running.pk}",
                       extra={"run": running.pk})
    modules = gray_modules(locked)
    if not modules:
        raise Conflict(f"no gray node holds a {locked.module_type} module: put a standby node with one in the gray "
                       "pool first (POST /api/v1/nodes/{id}/gray/)")
    previous = {m.pk: (m.driver_version, m.framework_version) for m in modules}
    run = run_create(suite=suite, modules=modules, actor=actor, reason=reason or f"validate {locked}",
                     combination=locked, purpose=RunPurpose.VALIDATION, phase=RunPhase.INSTALL,
                     timeout_s=timeout_s, source=source, previous=previous)
    inventory_services.combination_set_state(combination=locked, state=CombinationState.VALIDATING, actor=actor,
                                             source=source, reason=f"validation run #{run.pk} on the gray pool",
                                             by_validation=True)
    return run


def _send_install(run: VectorRun, targets: list[RunTarget], driver: str, framework: str, *, restore: bool) -> Any:
    combination = run.combination
    what = "restore the previous versions" if restore else f"install {driver} + {framework}"
    return install_versions_send(node=targets[0].node, driver=driver, framework=framework,
                                 module_type=str(combination.module_type) if combination else "",
                                 modules=[t.module.serial for t in targets], restore=restore, work={"run": run.pk},
                                 actor=ACTOR, reason=f"vector run #{run.pk}: {what}")


def _set_versions(target: RunTarget, driver: str, framework: str, reason: str) -> None:
    inventory_services.inventory_update(instance=target.module, data={"driver_version": driver,
                                                                      "framework_version": framework},
                                       actor=ACTOR, source=Source.SYSTEM, reason=reason)


def _timed_out(run: VectorRun, since: dt.datetime | None, now: dt.datetime) -> bool:
    return since is not None and now - since > dt.timedelta(seconds=run.timeout_s)


def _answer(command: Any) -> str:
    detail = str((command.result or {}).get("message", "")) or "no message"
    return f"the agent answered {command.state}: {detail}"[:1000]


def install_step(run: VectorRun, now: dt.datetime) -> bool:
    combination = run.combination
    if combination is None:
        run_finish(run, RunState.ERROR, "the combination was deleted")
        return False
    driver, framework = combination.driver.version, combination.framework.version
    targets = list(run.targets.select_related("module", "node", "install_command"))
    fresh: dict[int, list[RunTarget]] = defaultdict(list)
    for t in targets:
        if t.state == TargetState.PENDING and t.install_command_id is None:
            fresh[t.node_id].append(t)
    for group in fresh.values():
        command = _send_install(run, group, driver, framework, restore=False)
        for t in group:
            t.install_command, t.state, t.sent_at = command, TargetState.INSTALLING, now
            t.save(update_fields=["install_command", "state", "sent_at"])
    for t in targets:
        if t.state != TargetState.INSTALLING or t.install_command is None:
            continue
        command = t.install_command
        command.refresh_from_db(fields=["state", "result"])
        if command.state == CommandState.SUCCEEDED:
            _set_versions(t, driver, framework, f"vector run #{run.pk}: installed for validation")
            t.state, t.sent_at = TargetState.PENDING, None
        elif command.state in (CommandState.FAILED, CommandState.UNKNOWN, CommandState.EXPIRED):
            t.state, t.message = TargetState.ERROR, f"install: {_answer(command)}"
        elif _timed_out(run, t.sent_at, now):
            t.state, t.message = TargetState.TIMED_OUT, f"install: no answer within {run.timeout_s} s"
        else:
            continue
        t.save(update_fields=["state", "sent_at", "message"])
    if any(t.state == TargetState.INSTALLING for t in targets):
        return False
    if any(t.state == TargetState.PENDING for t in targets):
        run.phase = RunPhase.EXECUTE
        run.save(update_fields=["phase"])
        return True
    run.summary = {**run.summary, **run_summary(run), "verdict": RunState.ERROR,
                   "verdict_message": "the combination could not be installed on any gray node: "
                                      + "; ".join(f"{t.module.serial}: {t.message}" for t in targets[:5])}
    run.phase = RunPhase.RESTORE
    run.save(update_fields=["summary", "phase"])
    return True


def executed(run: VectorRun, state: str, message: str, now: dt.datetime) -> bool:
    """The vectors ran: keep the verdict and put the gray nodes back."""
    run.summary = {**run.summary, "verdict": state, "verdict_message": message}
    run.phase = RunPhase.RESTORE
    run.save(update_fields=["summary", "phase"])
    return True


def _blocked_reason(run: VectorRun) -> str:
    rows = (run.results.filter(outcome=Outcome.FAIL).select_related("vector", "module")
            .order_by("vector__name", "module__serial"))
    worst: dict[str, tuple[float | None, str]] = {}
    for r in rows:
        prev = worst.get(r.vector.name)
        if prev is None or (r.max_abs_error or 0) > (prev[0] or 0):
            worst[r.vector.name] = (r.max_abs_error, r.module.serial)
    parts = [f"{name} (max abs error {err} on {serial})" for name, (err, serial) in sorted(worst.items())]
    return f"vector run #{run.pk}: {len(parts)} case(s) outside tolerance: " + ", ".join(parts[:20])


def restore_step(run: VectorRun, now: dt.datetime) -> bool:
    targets = list(run.targets.select_related("module", "node", "restore_command"))
    fresh: dict[tuple[int, str, str], list[RunTarget]] = defaultdict(list)
    for t in targets:
        if t.install_command_id is not None and t.restore_command_id is None and not t.restored:
            fresh[(t.node_id, t.previous_driver, t.previous_framework)].append(t)
    for (_, driver, framework), group in fresh.items():
        command = _send_install(run, group, driver, framework, restore=True)
        for t in group:
            t.restore_command = command
            t.save(update_fields=["restore_command"])
    waiting = False
    for t in targets:
        if t.restored or t.restore_command is None:
            continue
        command = t.restore_command
        command.refresh_from_db(fields=["state", "result", "created_at"])
        if command.state == CommandState.SUCCEEDED:
            _set_versions(t, t.previous_driver, t.previous_framework,
                          f"vector run #{run.pk}: previous versions restored after validation")
            t.restored = True
            t.save(update_fields=["restored"])
        elif command.state in (CommandState.FAILED, CommandState.UNKNOWN, CommandState.EXPIRED):
            t.message = f"{t.message}; restore: {_answer(command)}".strip("; ")[:1000]
            t.save(update_fields=["message"])
        elif _timed_out(run, command.created_at, now):
            t.message = f"{t.message}; restore: no answer within {run.timeout_s} s".strip("; ")[:1000]
            t.save(update_fields=["message"])
        else:
            waiting = True
    if waiting:
        return False
    unrestored = [t.module.serial for t in targets if t.install_command_id is not None and not t.restored]
    summary = run.summary
    cancelled = bool(summary.get("cancelled"))
    verdict = RunState.CANCELLED if cancelled else summary.get("verdict", RunState.ERROR)
    message = run.message if cancelled else summary.get("verdict_message", "")
    if unrestored:
        message += f"; NOT restored (check by hand): {', '.join(unrestored)}"
    run.summary = {**summary, **run_summary(run), "unrestored": unrestored}
    combination = run.combination
    if combination is not None:
        if verdict == RunState.PASSED:
            to, why = CombinationState.VALIDATED, f"vector run #{run.pk} passed on the gray pool: {message}"
        elif verdict == RunState.FAILED:
            to, why = CombinationState.BLOCKED, _blocked_reason(run)
        else:
            to, why = CombinationState.CANDIDATE, f"vector run #{run.pk} did not conclude ({verdict}): {message}"
        inventory_services.combination_set_state(combination=combination, state=to, actor=ACTOR,
                                                 source=Source.SYSTEM, reason=why[:4000], by_validation=True)
        if to == CombinationState.BLOCKED:
            message = why
    run_finish(run, verdict, message)
    return False
