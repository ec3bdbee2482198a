"""Vector runs, the primitives: plan a run over modules, send ``run_vectors`` over the
command channel, judge what the agents send back, finish the run.

The run's state machine (``advance.py``) moves a run through its phases with these; results
are stored once per (run, module, case) by a unique constraint (a worker killed mid-way leaves
the command's results to be stored by the next pass; nothing is stored twice).

Validation runs (``validation.py``) add an install phase before and a restore phase after.
The control plane judges: the agent's outputs are compared here (``compare.judge``) with the
expected outputs and tolerances; the agent's own view of a case is never asked.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from celery import current_app
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from apps.agents.choices import CommandKind, CommandState
from apps.agents.services import node_command_send
from apps.audit.choices import Source
from apps.audit.services import actor_identity, audit_record
from apps.common.errors import Conflict
from apps.inventory import scopes
from apps.inventory.choices import CombinationState
from apps.inventory.models import Module, VersionCombination
from apps.vectors import codec
from apps.vectors.choices import (
    FINAL_RUN_STATES,
    Outcome,
    RunPhase,
    RunPurpose,
    RunState,
    SuiteState,
    TargetState,
)
from apps.vectors.compare import compare_output, judge
from apps.vectors.models import RunTarget, Suite, Vector, VectorResult, VectorRun

logger = logging.getLogger(__name__)

ADVANCE_TASK = "apps.vectors.tasks.vector_run_advance"  # sent by name: the task advances runs (``advance.py``)
FINAL_TARGET_STATES = frozenset({TargetState.DONE, TargetState.TIMED_OUT, TargetState.ERROR})


def _enqueue(run_id: int) -> None:
    try:
        current_app.signature(ADVANCE_TASK, args=(run_id,), queue="vectors").apply_async()
    except Exception as exc:  # the broker may be down: the periodic sweep advances the run
        logger.warning("could not queue run #%s (%s); the sweep will advance it", run_id, exc)


@transaction.atomic
def run_create(*, suite: Suite, modules: Iterable[Module], actor: Any, reason: str = "",
               combination: VersionCombination | None = None, purpose: str = RunPurpose.MANUAL,
               phase: str = RunPhase.EXECUTE, timeout_s: int = 600, source: str = Source.API,
               previous: dict[int, tuple[str, str]] | None = None) -> VectorRun:
    """Plan a run of ``suite`` on ``modules`` (each on a node); the commands go out when the
    run is advanced (at once, by a worker on the ``vectors`` queue)."""
    if suite.state != SuiteState.PUBLISHED:
        raise Conflict(f"suite {suite} is a draft; publish it before running it")
    chosen = list(Module.objects.filter(pk__in=[m.pk for m in modules]).select_related("node")
                  .order_by("node__hostname", "slot"))
    if not chosen:
        raise Conflict("no module to run the vectors on")
    homeless = [m.serial for m in chosen if m.node_id is None]
    if homeless:
        raise Conflict(f"module(s) {', '.join(homeless)} are in no node; vectors run through a node's agent")
    scopes.require_nodes(actor=actor, nodes=scopes.nodes_for_check({m.node_id for m in chosen if m.node_id}))
    user, name = actor_identity(actor)
    run = VectorRun.objects.create(
        suite=suite, combination=combination, purpose=purpose, phase=phase, reason=reason, timeout_s=timeout_s,
        created_by=user, created_by_name=name)
    previous = previous or {}
    RunTarget.objects.bulk_create([
        RunTarget(run=run, module=m, node=m.node, previous_driver=previous.get(m.pk, ("", ""))[0],
                  previous_framework=previous.get(m.pk, ("", ""))[1])
        for m in chosen])
    audit_record(actor=actor, action="vector_run.create", target=run, source=source, reason=reason,
                 changes={"suite": [None, str(suite)], "modules": [None, len(chosen)], "purpose": [None, purpose]})
    run_id = run.pk
    transaction.on_commit(lambda: _enqueue(run_id))
    return run


@transaction.atomic
def run_cancel(*, run: VectorRun, actor: Any, reason: str = "", source: str = Source.API) -> VectorRun:
    """Stop a run: no more commands go out, late answers are ignored. A validation run still
    puts the gray nodes back on their previous versions."""
    locked = VectorRun.objects.select_for_update().get(pk=run.pk)
    if locked.state in FINAL_RUN_STATES:
        raise Conflict(f"run #{locked.pk} already ended {locked.state}")
    before = locked.state
    if locked.purpose == RunPurpose.VALIDATION and locked.phase in (RunPhase.INSTALL, RunPhase.EXECUTE):
        locked.phase = RunPhase.RESTORE
        locked.message = f"cancelled: {reason}" if reason else "cancelled"
        locked.summary = {**locked.summary, "cancelled": True}
        locked.save(update_fields=["phase", "message", "summary"])
    else:
        run_finish(locked, RunState.CANCELLED, f"cancelled: {reason}" if reason else "cancelled")
    audit_record(actor=actor, action="vector_run.cancel", target=locked, source=source, reason=reason,
                 changes={"state": [before, locked.state]})
    run_id = locked.pk
    transaction.on_commit(lambda: _enqueue(run_id))
    return locked


def run_finish(run: VectorRun, state: str, message: str) -> None:
    """End ``run`` in ``state`` (in the caller's transaction, the run row locked)."""
    run.state = state
    run.message = message[:4000]
    run.phase = RunPhase.DONE
    run.finished_at = timezone.now()
    run.save(update_fields=["state", "message", "phase", "finished_at", "summary"])


def suite_vectors(suite: Suite) -> list[Vector]:
    return [m.vector for m in suite.members.select_related("vector").order_by("position")]


def _command_args(run: VectorRun, target: RunTarget, vectors: list[Vector]) -> dict[str, Any]:
    return {"run": run.pk, "module": target.module.serial, "slot": target.module.slot,
            "suite": str(run.suite),
            "vectors": [{"sha256": v.sha256, "operator": v.operator, "name": v.name} for v in vectors]}


def send_pending(run: VectorRun, now: dt.datetime) -> int:
    """Send ``run_vectors`` to every target not sent yet."""
    vectors = suite_vectors(run.suite)
    sent = 0
    for target in run.targets.filter(state=TargetState.PENDING).select_related("module", "node"):
        command = node_command_send(
            node=target.node, kind=CommandKind.RUN_VECTORS, args=_command_args(run, target, vectors), actor="vectors",
            reason=f"vector run #{run.pk} ({run.suite})", source=Source.SYSTEM,
            expires_at=now + dt.timedelta(seconds=run.timeout_s))
        target.command, target.state, target.sent_at = command, TargetState.SENT, now
        target.save(update_fields=["command", "state", "sent_at"])
        sent += 1
    return sent


def store_results(run: VectorRun, target: RunTarget, result: dict[str, Any]) -> tuple[int, str]:
    """Judge the agent's outputs of every case and store one result per case (a second pass
    over the same answer stores nothing new). Returns (stored, problem)."""
    cases = result.get("cases")
    if not isinstance(cases, dict):
        return 0, "the agent's answer has no cases"
    rows = []
    missing = []
    baselines = _baselines(run, target)
    for vector in suite_vectors(run.suite):
        case = cases.get(vector.sha256)
        if not isinstance(case, dict):
            missing.append(vector.name)
            continue
        status = str(case.get("status", ""))
        outputs = None
        message = str(case.get("message", ""))[:4000]
        if status == "ok":
            try:
                outputs = [codec.decode(o, f"{vector.name} output {i}")
                           for i, o in enumerate(case.get("outputs") or [])]
            except codec.TensorError as exc:
                status, message = "error", f"the agent's output could not be decoded: {exc}"
        expected = [(str(t.get("name", "")), codec.decode(t)) for t in vector.expected]
        verdict = judge(expected=expected, tolerances=list(vector.tolerances), status=status, outputs=outputs,
                        message=message)
        err = verdict.max_abs_error
        ms = case.get("ms")
        ok = outputs is not None and status == "ok"
        digest = codec.outputs_digest(outputs) if ok and outputs is not None else ""
        baseline = _against_baseline(vector, outputs if ok else None, baselines.get(vector.pk))
        rows.append(VectorResult(
            run=run, module_id=target.module_id, vector=vector, outcome=verdict.outcome,
            message=verdict.message[:4000], outputs=verdict.outputs,
            max_abs_error=err if err is not None and err != float("inf") else None,
            agent_ms=float(ms) if isinstance(ms, (int, float)) else None, digest=digest,
            actual=list(case.get("outputs") or []) if ok else [], baseline=baseline))
    mine = VectorResult.objects.filter(run=run, module_id=target.module_id)
    before = mine.count()
    VectorResult.objects.bulk_create(rows, ignore_conflicts=True)
    problem = f"no answer for {len(missing)} case(s): {', '.join(missing[:5])}" if missing else ""
    return mine.count() - before, problem


def _baselines(run: VectorRun, target: RunTarget) -> dict[int, tuple[int, list[dict[str, Any]]]]:
    """For a run of a combination that is not the pinned one: per vector, the outputs of the
    latest run of the type's pinned combination (any module of the type) as (run id, outputs)."""
    combination = run.combination
    if combination is None or combination.state == CombinationState.PINNED:
        return {}
    pinned = VersionCombination.objects.filter(module_type_id=combination.module_type_id,
                                               state=CombinationState.PINNED).first()
    if pinned is None:
        return {}
    out: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    rows = (VectorResult.objects.filter(run__combination=pinned, run__suite=run.suite)
            .exclude(actual=[]).order_by("vector_id", "-run_id").values_list("vector_id", "run_id", "actual"))
    for vector_id, run_id, actual in rows:
        out.setdefault(vector_id, (run_id, actual))
    return out


def _against_baseline(vector: Vector, outputs: list[Any] | None, baseline: tuple[int, list[dict[str, Any]]] | None
                      ) -> dict[str, Any]:
    """The difference of ``outputs`` from the pinned combination's, with the vector's tolerances."""
    if outputs is None or baseline is None:
        return {}
    run_id, actual = baseline
    try:
        base = [codec.decode(t) for t in actual]
    except codec.TensorError:
        return {}
    if len(base) != len(outputs):
        return {"run": run_id, "identical": False, "message": "another number of outputs than the baseline's"}
    reports = [compare_output(o, b, tol, str(t.get("name", "")))
               for o, b, tol, t in zip(outputs, base, vector.tolerances, vector.expected, strict=False)]
    return {"run": run_id, "identical": all(r.metrics.get("mismatches") == 0 for r in reports),
            "inside_tolerance": all(r.passed for r in reports),
            "outputs": [{"name": r.name, "max_abs_error": r.metrics.get("max_abs_error"),
                         "mismatches": r.metrics.get("mismatches"), "cosine": r.metrics.get("cosine")}
                        for r in reports]}


def collect(run: VectorRun, now: dt.datetime) -> None:
    """Judge the answers that came back and time out the targets that waited too long."""
    for target in run.targets.filter(state=TargetState.SENT).select_related("command", "module"):
        command = target.command
        if command is None:
            target.state, target.message = TargetState.ERROR, "its command was deleted"
        elif command.state == CommandState.SUCCEEDED:
            _, problem = store_results(run, target, command.result or {})
            target.state = TargetState.ERROR if problem else TargetState.DONE
            target.message = problem or str((command.result or {}).get("message", ""))[:1000]
        elif command.state in (CommandState.FAILED, CommandState.UNKNOWN, CommandState.EXPIRED):
            target.state = TargetState.ERROR
            detail = str((command.result or {}).get("message", "")) or "no message"
            target.message = f"the agent answered {command.state}: {detail}"[:1000]
        elif target.sent_at and now - target.sent_at > dt.timedelta(seconds=run.timeout_s):
            target.state = TargetState.TIMED_OUT
            target.message = f"no results within {run.timeout_s} s (command {command.state})"
        else:
            continue
        target.finished_at = now
        target.save(update_fields=["state", "message", "finished_at"])


def run_summary(run: VectorRun) -> dict[str, Any]:
    counts = dict(run.results.order_by().values_list("outcome").annotate(n=Count("id")))
    failing = sorted(set(run.results.filter(outcome=Outcome.FAIL).values_list("vector__name", flat=True)))
    errors = sorted(set(run.results.filter(outcome=Outcome.ERROR).values_list("vector__name", flat=True)))
    targets = dict(run.targets.order_by().values_list("state").annotate(n=Count("id")))
    moved = sorted(set(run.results.filter(baseline__identical=False).values_list("vector__name", flat=True)))
    return {"outcomes": {o: counts.get(o, 0) for o in Outcome.values}, "failing_cases": failing,
            "baseline_moved_cases": moved, "error_cases": errors, "targets": targets,
            "cases": run.suite.members.count(), "fingerprint_outliers": fingerprint_outliers(run)}


def fingerprint_outliers(run: VectorRun) -> dict[str, list[str]]:
    """Modules whose outputs differ, bit for bit, from the majority of their twins (same module
    type and versions) on the same case, inside tolerance or not: possible silent data corruption.
    {module serial: [case names]}; a case needs at least three twins with outputs to have a majority."""
    rows = (run.results.exclude(digest="").order_by()
            .values_list("vector__name", "module__serial", "module__module_type_id", "module__driver_version",
                         "module__framework_version", "digest"))
    groups: dict[tuple[Any, ...], list[tuple[str, str]]] = {}
    for case, serial, type_id, driver, framework, digest in rows:
        groups.setdefault((case, type_id, driver, framework), []).append((serial, digest))
    outliers: dict[str, list[str]] = {}
    for (case, *_), members in groups.items():
        if len(members) < 3:
            continue
        votes = Counter(d for _, d in members)
        majority, n = votes.most_common(1)[0]
        if n * 2 <= len(members):
            continue  # no majority: nothing to single out
        for serial, digest in members:
            if digest != majority:
                outliers.setdefault(serial, []).append(case)
    return {serial: sorted(cases) for serial, cases in sorted(outliers.items())}


def verdict_of(run: VectorRun, summary: dict[str, Any]) -> tuple[str, str]:
    """passed: every module answered and no case is outside its tolerance; failed: a case is
    (the cases named); error: a module gave no results (timed out, or its agent refused)."""
    if summary["failing_cases"]:
        names = ", ".join(summary["failing_cases"][:20])
        return RunState.FAILED, f"{len(summary['failing_cases'])} case(s) outside tolerance: {names}"
    bad = list(run.targets.exclude(state=TargetState.DONE).select_related("module")[:5])
    if bad:
        return RunState.ERROR, "; ".join(f"{t.module.serial}: {t.state} ({t.message})" for t in bad)
    o = summary["outcomes"]
    message = f"{o[Outcome.PASS]} pass, {o[Outcome.UNSUPPORTED]} unsupported, {o[Outcome.ERROR]} error, 0 fail"
    outliers = summary.get("fingerprint_outliers") or {}
    if outliers:
        message += ("; outputs differ from their twins' (possible silent data corruption): "
                    + ", ".join(f"{serial} ({len(cases)} case(s))" for serial, cases in outliers.items()))
    return RunState.PASSED, message
