"""Reads of regression test vectors."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, Max, Q, QuerySet

from apps.health.stuck import Stuck
from apps.inventory.choices import SERVING_STATES
from apps.inventory.models import Module, VersionCombination
from apps.operations import budget
from apps.operations.choices import WindowActor
from apps.vectors.choices import FINAL_RUN_STATES, Outcome, RunPurpose, RunState, TargetState
from apps.vectors.models import RunTarget, Suite, Vector, VectorResult, VectorRun

# Runs the control plane starts by itself on serving modules: automated holds in the remediation budget.
AUTOMATED_PURPOSES = (RunPurpose.NIGHTLY, RunPurpose.VERSIONS_CHANGED)
ENDED_TARGET_STATES = (TargetState.DONE, TargetState.TIMED_OUT, TargetState.ERROR)


def budget_holds(since: dt.datetime) -> list[budget.Hold]:
    """The remediation budget's reader of vector runs (``apps.operations.budget``): each module of a
    nightly or versions-changed run on a non-gray node, holding while the run and its target are not
    over and the node serves, started when the run was created."""
    rows = (RunTarget.objects.filter(run__purpose__in=AUTOMATED_PURPOSES, node__gray=False)
            .filter(Q(node__state__in=SERVING_STATES) & ~Q(run__state__in=FINAL_RUN_STATES)
                    & ~Q(state__in=ENDED_TARGET_STATES) | Q(run__created_at__gte=since))
            .values_list("node__tier_id", "node__state", "run__state", "state", "run__created_at"))
    return [budget.Hold(WindowActor.VECTOR_RUNS.value, tier_id, budget.MODULES,
                        node_state in SERVING_STATES and run_state not in FINAL_RUN_STATES
                        and state not in ENDED_TARGET_STATES, created)
            for tier_id, node_state, run_state, state, created in rows]


def combination_modules(combination: VersionCombination) -> QuerySet[Module]:
    """The modules in nodes that run ``combination``'s driver and framework now: what a run of a suite
    "on the combination" runs on."""
    return Module.objects.filter(module_type=combination.module_type, driver_version=combination.driver.version,
                                 framework_version=combination.framework.version, node__isnull=False)


def suite_list() -> QuerySet[Suite]:
    return Suite.objects.annotate(vector_count=Count("members"))


def vector_list() -> QuerySet[Vector]:
    return Vector.objects.defer("model", "inputs", "expected")


def run_list() -> QuerySet[VectorRun]:
    return VectorRun.objects.select_related("suite", "combination__module_type", "combination__driver",
                                            "combination__framework")


def result_list() -> QuerySet[VectorResult]:
    return VectorResult.objects.select_related("vector", "module", "module__node").defer(
        "actual", "vector__model", "vector__inputs", "vector__expected")


def run_progress(run: VectorRun) -> dict[str, Any]:
    """Per module: state and counts by outcome; overall: results stored of results expected."""
    cases = run.suite.members.count()
    counts: dict[int, dict[str, int]] = {}
    for module_id, outcome, n in (run.results.order_by().values_list("module_id", "outcome")
                                  .annotate(n=Count("id"))):
        counts.setdefault(module_id, {})[outcome] = n
    modules: list[dict[str, Any]] = []
    for t in run.targets.select_related("module", "node").order_by("node__hostname", "module__slot"):
        c = counts.get(t.module_id, {})
        modules.append({"module": t.module_id, "serial": t.module.serial, "node": t.node.hostname,
                        "state": t.state, "message": t.message,
                        "outcomes": {o: c.get(o, 0) for o in Outcome.values}})
    stored = sum(sum(c.values()) for c in counts.values())
    expected = cases * len(modules)
    return {"cases": cases, "modules": modules, "stored": stored, "expected": expected,
            "percent": round(100.0 * stored / expected, 1) if expected else 0.0}


def runs_by_combination(combinations: list[VersionCombination], per: int = 5) -> dict[int, list[VectorRun]]:
    out: dict[int, list[VectorRun]] = {c.pk: [] for c in combinations}
    for run in run_list().filter(combination__in=combinations).order_by("-created_at")[: per * max(1, len(out))]:
        if run.combination_id is not None and len(out.setdefault(run.combination_id, [])) < per:
            out[run.combination_id].append(run)
    return out


def operator_points(*, module_type_id: int, runs: int = 30) -> list[dict[str, Any]]:
    """Per finished run of the type's combinations (newest ``runs``) and operator: cases that
    passed, cases judged (pass or fail), the worst abs error."""
    recent = list(VectorRun.objects.filter(combination__module_type_id=module_type_id, finished_at__isnull=False,
                                           state__in=FINAL_RUN_STATES)
                  .order_by("-finished_at").values_list("pk", "finished_at")[:runs])
    when = dict(recent)
    rows = (VectorResult.objects.filter(run_id__in=when).order_by()
            .values("run_id", "vector__operator")
            .annotate(passed=Count("id", filter=Q(outcome=Outcome.PASS)),
                      judged=Count("id", filter=Q(outcome__in=[Outcome.PASS, Outcome.FAIL])),
                      worst=Max("max_abs_error")))
    return [{"run": r["run_id"], "finished_at": when[r["run_id"]], "operator": r["vector__operator"],
             "passed": r["passed"], "judged": r["judged"], "worst": r["worst"]} for r in rows if r["judged"]]


def _run_expected_s(run: VectorRun) -> float:
    """A run's modules work side by side, each within ``timeout_s``; a validation installs the candidate
    first and puts the previous versions back after (each within the same timeout)."""
    return float(run.timeout_s) * (3 if run.purpose == RunPurpose.VALIDATION else 1)


def stuck_runs(now: dt.datetime, factor: float) -> list[Stuck]:
    """Running vector runs past ``factor`` × their expected duration, with the modules they wait on."""
    out = []
    for run in VectorRun.objects.filter(state=RunState.RUNNING, started_at__isnull=False).select_related("suite"):
        expected = _run_expected_s(run)
        assert run.started_at is not None
        if (now - run.started_at).total_seconds() <= factor * expected:
            continue
        open_targets = list(run.targets.exclude(state__in=(TargetState.DONE, TargetState.TIMED_OUT, TargetState.ERROR))
                            .select_related("module", "command").order_by("module__serial"))
        waits = ", ".join(f"{t.module.serial} ({t.state}"
                          + (f", command #{t.command_id} {t.command.state}" if t.command else "") + ")"
                          for t in open_targets[:10])
        out.append(Stuck(source="vectors", key=f"vector_run:{run.pk}", what=f"vector run #{run.pk} ({run.suite})",
                         state=f"{run.state} ({run.phase})", since=run.started_at, expected_s=expected,
                         waits_for=(f"{len(open_targets)} module(s): {waits}" if open_targets
                                    else "the controller to finish it: every module has answered"),
                         detail={"run": run.pk, "phase": run.phase}))
    return out
