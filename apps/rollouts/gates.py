"""The gates of a rollout. Before it starts, the dry run (``dry_run``): each gate evaluated on the
fleet now, the ones an operator may override named in ``OVERRIDABLE_GATES``. Then the gates a wave
passes before the next starts: vectors and health when the wave's nodes are done (``wave_gates``),
then, after the bake window, the cohort gate (the upgraded nodes against the not-yet-upgraded ones,
``cohort_gate``). Reads only: what a failed gate does is the rollout's transition
(``transitions.gate_failed``), what a failed dry run does is the create's (``services``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import apps.telemetry.selectors.cohorts as telemetry_selectors
from apps.health import selectors as health_selectors
from apps.health.checks import CHECKS
from apps.health.models import Finding
from apps.inventory.choices import CombinationState
from apps.inventory.models import ModuleType, VersionCombination
from apps.inventory.versions import is_older
from apps.rollouts.choices import Step
from apps.rollouts.models import Rollout, RolloutNode
from apps.vectors.choices import RunState
from apps.vectors.models import Suite

# The cohort gate compares a stage only when each cohort served at least this many requests in it over
# the bake window; the limits add a little absolute slack (a control cohort with no error at all).
COHORT_MIN_REQUESTS = 20
COHORT_SLACK_MS = 1.0
COHORT_SLACK_ERROR_RATE = 0.001
# Each cohort's own figures over this long before the rollout started (whole minutes, the start's
# included): its baseline, so that nodes slower for another reason are judged against their own past.
COHORT_BASELINE_S = 3600


# The dry-run gates that fail a start unless an operator overrides them by name with a reason. The
# others refuse a start on their own before the gates are read (a combination not validated, no
# published suite, another active rollout of the module type).
OVERRIDABLE_GATES = ("health", "downgrade")
# Each dry-run gate as the pages name it.
GATE_TITLES = {"combination": "Combination", "downgrade": "Downgrade", "vectors": "Vectors", "health": "Health",
               "bake": "Bake", "cohort": "Cohort", "one_active_rollout": "One active rollout"}
# The check whose findings a rollout fixes on the modules it moves (apps.health.checks): a module's
# versions differ from its type's pin until the rollout completes and pins its target.
VERSION_DRIFT = "version_drift"


def finding_subject(f: Finding) -> str:
    """A finding's subject as operators name it: the node's hostname, the module's serial, the tier."""
    if f.module is not None:
        node = f.node.hostname if f.node is not None else ""
        return f"module {f.module.serial}" + (f" on {node}" if node else "")
    if f.node is not None:
        return f.node.hostname
    if f.tier is not None:
        return f"tier {f.tier.name}"
    return f.subject_key


def split_findings(found: list[Finding], *, module_type_id: int,
                   moved: set[int]) -> tuple[list[Finding], list[Finding]]:
    """The findings a rollout will not fix, and the ones it will: version drift of its module type's
    modules on the nodes it moves to its target."""
    counted: list[Finding] = []
    fixed: list[Finding] = []
    for f in found:
        ours = (f.check_name == VERSION_DRIFT and f.module is not None
                and f.module.module_type_id == module_type_id and f.module.node_id in moved)
        (fixed if ours else counted).append(f)
    return counted, fixed


def _findings_text(found: list[Finding]) -> str:
    return "; ".join(f"{f.check_name} on {finding_subject(f)}" for f in found[:5]) + (
        f" (and {len(found) - 5} more)" if len(found) > 5 else "")


def _finding_rows(found: list[Finding]) -> list[dict[str, Any]]:
    return [{"id": f.pk, "check": f.check_name, "subject": finding_subject(f), "severity": f.severity,
             "summary": f.summary} for f in found]


def health_now(*, module_type_id: int, node_ids: list[int]) -> dict[str, Any]:
    """The health gate as a dry run: the active findings on the nodes the rollout moves, counting only
    the ones it will not fix."""
    counted, fixed = split_findings(health_selectors.findings_since(node_ids=node_ids, since=None),
                                    module_type_id=module_type_id, moved=set(node_ids))
    if counted:
        detail = f"{len(counted)} active finding(s) the rollout will not fix: {_findings_text(counted)}"
    else:
        detail = "no active finding on the nodes in scope that the rollout will not fix; each wave must add none"
    if fixed:
        detail += (f"; {len(fixed)} version-drift finding(s) on nodes it moves to the target are expected "
                   "(the rollout fixes them)")
    return {"ok": not counted, "detail": detail, "findings": _finding_rows(counted), "expected": _finding_rows(fixed)}


def critical_blocks(*, node_ids: list[int]) -> dict[int, Finding]:
    """Per node id, the open critical health finding on the node or one of its modules for which a
    rollout does not take the node: it is skipped at planning, or at its turn when the finding opened
    since. Version drift is not one: it is what the rollout fixes."""
    return health_selectors.critical_findings(node_ids=node_ids, except_checks=(VERSION_DRIFT,))


def check_title(check_name: str) -> str:
    spec = CHECKS.get(check_name)
    return spec.title if spec is not None else check_name


def critical_reason(f: Finding) -> str:
    """Why a node is skipped for ``f`` (``critical_blocks``): the finding by id, its check and summary."""
    return (f"critical health finding #{f.pk} {check_title(f.check_name)} ({f.check_name}) on {finding_subject(f)} "
            f"is open: {f.summary}; a rollout does not take a node while a critical finding on it or its modules "
            "is open")


def downgrade_now(combination: VersionCombination) -> dict[str, Any]:
    """The target against the module type's pinned combination, component by component: a driver or
    framework older than the pinned one is a downgrade."""
    pinned = (VersionCombination.objects.filter(module_type_id=combination.module_type_id,
                                                state=CombinationState.PINNED)
              .select_related("driver", "framework").first())
    if pinned is None:
        return {"ok": True, "detail": "no pinned combination to compare with", "pinned": None, "older": []}
    older = [{"component": name, "target": target, "pinned": now}
             for name, target, now in (("driver", combination.driver.version, pinned.driver.version),
                                       ("framework", combination.framework.version, pinned.framework.version))
             if is_older(target, now)]
    pin = {"driver": pinned.driver.version, "framework": pinned.framework.version}
    if older:
        detail = "downgrade: " + "; ".join(f"{o['component']} {o['target']} is older than the pinned {o['pinned']}"
                                           for o in older)
    elif pinned.pk == combination.pk:
        detail = "the target is the pinned combination"
    else:
        detail = f"not older than the pinned {pin['driver']} + {pin['framework']}"
    return {"ok": not older, "detail": detail, "pinned": pin, "older": older}


def dry_run(*, combination: VersionCombination, module_type: ModuleType, suite: Suite | None, node_ids: list[int],
            bake_s: int, cohort_tolerance_pct: int, active: Rollout | None) -> dict[str, dict[str, Any]]:
    """Every gate evaluated on the fleet now, nothing written: each with its title, and whether an
    operator may start past it when it fails (``overridable``)."""
    gates: dict[str, dict[str, Any]] = {
        "combination": {"ok": True, "state": combination.state},
        "downgrade": downgrade_now(combination),
        "vectors": {"ok": suite is not None,
                    "detail": (f"each upgraded node's modules must pass suite {suite}" if suite
                               else "no published suite to run")},
        "health": health_now(module_type_id=module_type.pk, node_ids=node_ids),
        "bake": {"ok": True, "detail": f"{bake_s} s after each wave"},
        "cohort": {"ok": True, "detail": (
            f"after each wave's bake: the upgraded nodes' per-stage p95 latency and error rate within "
            f"{cohort_tolerance_pct} % of the nodes not upgraded yet (per-node stage rollups; the "
            f"latency against each cohort's own figures of the hour before the rollout where it has them)")},
        "one_active_rollout": {"ok": active is None,
                               "detail": f"rollout #{active.pk} is {active.state}" if active else "none active"},
    }
    for name, gate in gates.items():
        gate["title"] = GATE_TITLES[name]
        gate["overridable"] = name in OVERRIDABLE_GATES
    return gates


def failing(gates: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, gate in gates.items() if not gate["ok"]]


def health_gate(r: Rollout, node_ids: list[int], since: dt.datetime | None) -> dict[str, Any]:
    """No new health finding on the upgraded nodes or their modules since the wave began, but the
    version drift the rollout fixes (its target is pinned when it completes)."""
    found, fixed = split_findings(health_selectors.findings_since(node_ids=node_ids, since=since),
                                  module_type_id=r.module_type_id, moved=set(node_ids))
    detail = f"{len(found)} new finding(s) on upgraded nodes"
    if found:
        detail += ": " + _findings_text(found)
    if fixed:
        detail += f"; {len(fixed)} version-drift finding(s) expected until the target is pinned"
    return {"ok": not found, "detail": detail, "findings": len(found)}


def wave_gates(r: Rollout, wave: list[RolloutNode], now: dt.datetime) -> dict[str, Any]:
    done = [rn for rn in wave if rn.step == Step.DONE]
    started = min((rn.started_at for rn in wave if rn.started_at), default=None)
    return {"wave": r.current_wave, "at": now.isoformat(),
            "vectors": {"ok": all(rn.vector_run is not None and rn.vector_run.state == RunState.PASSED for rn in done),
                        "runs": {rn.node.hostname: rn.vector_run_id for rn in done}},
            "health": health_gate(r, [rn.node_id for rn in done], started),
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


def cohort_passed(r: Rollout) -> bool:
    """This wave's cohort gate was evaluated and passed, or an operator resumed past its failure."""
    return any(g.get("kind") == "cohort" and g.get("wave") == r.current_wave and (g.get("ok") or g.get("acknowledged"))
               for g in r.gates)
