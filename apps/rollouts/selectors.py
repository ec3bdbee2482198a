"""Reads of driver rollouts: lists, a rollout's progress per wave, its nodes."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

import apps.telemetry.selectors.cohorts as telemetry_selectors
from apps.health.stuck import Stuck
from apps.rollouts import gates
from apps.rollouts.choices import FINAL_STEPS, Step
from apps.rollouts.models import Rollout, RolloutNode

# The cohort chart shows at most this much of a rollout's history (per-minute points).
COHORT_CHART_MINUTES = 180


def rollout_list() -> QuerySet[Rollout]:
    return Rollout.objects.select_related("combination", "combination__driver", "combination__framework",
                                          "module_type", "suite")


def rollout_nodes(rollout: Rollout) -> QuerySet[RolloutNode]:
    return (RolloutNode.objects.filter(rollout=rollout)
            .select_related("node", "node__tier", "node__rack", "vector_run")
            .order_by("wave", "position", "node__hostname"))


def node_skip_finding(*, node_id: int) -> dict[str, Any] | None:
    """The open critical health finding for which rollouts skip the node (``gates.critical_blocks``), as
    the node page names it; None while there is none."""
    f = gates.critical_blocks(node_ids=[node_id]).get(node_id)
    if f is None:
        return None
    return {"id": f.pk, "check": f.check_name, "title": gates.check_title(f.check_name), "summary": f.summary}


def progress(rollout: Rollout) -> dict[str, Any]:
    """Overall and per wave: nodes settled of nodes planned, and the count of each step."""
    rows = list(RolloutNode.objects.filter(rollout=rollout).values_list("wave", "step", "needs_hand"))
    planned = [r for r in rows if r[0] is not None]

    def part(items: list[tuple[Any, str, bool]]) -> dict[str, Any]:
        settled = sum(1 for _, step, hand in items if step in FINAL_STEPS or hand)
        done = sum(1 for _, step, _ in items if step == Step.DONE)
        return {"nodes": len(items), "settled": settled, "done": done,
                "fraction": round(settled / len(items), 4) if items else 1.0,
                "steps": dict(Counter(step for _, step, _ in items))}

    waves = []
    for index in range(rollout.wave_count):
        items = [r for r in planned if r[0] == index]
        waves.append({"index": index, "canary": index == 0, **part(items)})
    return {**part(planned), "skipped_at_planning": sum(1 for r in rows if r[0] is None), "waves": waves}


def cohort_latency(rollout: Rollout, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """The two cohorts' per-stage p95 latency and error rate per minute, from the rollout's start
    (the last ``COHORT_CHART_MINUTES`` at most) to now or its end: the nodes it upgraded against the
    ones still waiting for a later wave; with the newest cohort gate's evidence."""
    now = now or timezone.now()
    until = min(now, rollout.finished_at) if rollout.finished_at else now
    start = rollout.started_at or rollout.created_at
    since = max(start, until - dt.timedelta(minutes=COHORT_CHART_MINUTES))
    rows = list(RolloutNode.objects.filter(rollout=rollout).exclude(wave=None).values_list("node_id", "step"))
    cohorts = {"upgraded": [n for n, step in rows if step == Step.DONE],
               "control": [n for n, step in rows if step == Step.PENDING]}
    series = telemetry_selectors.stage_cohort_series(cohorts=cohorts, since=since, until=until)
    gates = [g for g in rollout.gates if g.get("kind") == "cohort"]
    return {"since": since, "until": until, "tolerance_pct": rollout.cohort_tolerance_pct,
            "cohorts": {name: {"nodes": len(ids), "points": series[name]} for name, ids in cohorts.items()},
            "gate": gates[-1] if gates else None}


def _step_expected_s(r: Rollout, step: str) -> float:
    """A node's step is expected to take its own timeout where it has one, else a state change's moment
    (settings.ROLLOUT_STEP_EXPECTED_S)."""
    return {Step.DRAINING: float(r.drain_deadline_s), Step.INSTALLING: float(r.install_timeout_s),
            Step.VALIDATING: float(r.vectors_timeout_s), Step.ROLLING_BACK: float(r.install_timeout_s)
            }.get(step, settings.ROLLOUT_STEP_EXPECTED_S)  # type: ignore[call-overload]


def stuck_steps(now: dt.datetime, factor: float) -> list[Stuck]:
    """Nodes of rollouts in one step past ``factor`` × its expected duration (a failed node waits for a
    person, and a node left for a person's hand says so: neither is stuck)."""
    out = []
    for rn in (RolloutNode.objects.exclude(step__in=sorted(FINAL_STEPS | {Step.PENDING, Step.FAILED}))
               .filter(needs_hand=False, step_changed_at__isnull=False).select_related("rollout", "node")):
        expected = _step_expected_s(rn.rollout, rn.step)
        assert rn.step_changed_at is not None
        if (now - rn.step_changed_at).total_seconds() <= factor * expected:
            continue
        out.append(Stuck(source="rollouts", key=f"rollout_node:{rn.pk}",
                         what=f"rollout #{rn.rollout_id}: {rn.node.hostname}'s step", state=rn.step,
                         since=rn.step_changed_at, expected_s=expected, waits_for=rn.waiting_for,
                         node_id=rn.node_id, tier_id=rn.node.tier_id,
                         detail={"rollout": rn.rollout_id, "rollout_state": rn.rollout.state}))
    return out
