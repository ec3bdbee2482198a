"""The cohort gate: after each wave's bake, the upgraded nodes' per-stage p95 latency and error rate
against the nodes not upgraded yet, from the per-node stage rollups (written here as the rollup run
would), within the rollout's tolerance; evidence stored on the rollout; a failed gate rolls back or
pauses per policy, and an operator's resume goes past it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, Node
from apps.operations import lifecycle
from apps.operations.choices import Owner
from apps.rollouts import services
from apps.rollouts.choices import RolloutState, Step
from apps.rollouts.models import Rollout, RolloutNode
from apps.telemetry.models import StageNodeRollup
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.django_db
BAKE_S = 300


def _start(rfleet: RolloutFleet, **kw: Any) -> Rollout:
    for h in ("n-1", "n-2", "n-3", "n-4", "n-5", "n-6"):
        rfleet.node(h)
    rfleet.node("s-1", state=NodeState.STANDBY)
    lifecycle.node_cordon(node=Node.objects.get(hostname="n-6"), owner=Owner.OPERATOR, reason="bad fan", actor="ops")
    spec = services.Spec(combination=rfleet.candidate, module_type=rfleet.mtype, suite=rfleet.suite, bake_s=BAKE_S,
                         wave_size=2, max_unavailable="2", reason="new driver", **kw)
    return services.rollout_create(spec=spec, actor="test")


def _baked(rfleet: RolloutFleet, rollout: Rollout, *, upgraded: dict[str, tuple[float, int]],
           control: tuple[float, int], before: dict[str, tuple[float, int]] | None = None) -> Rollout:
    """Advance until the current wave has settled, write five minutes of per-node stage rollups over
    its bake window (upgraded nodes: {stage: (p95 ms, errors per 100 requests)}; control: the same for
    every stage), and let the bake end. The rollout started two hours ago (its baseline, the hour
    before, apart from the bake); with ``before``, the five minutes before its start hold the upgraded
    nodes' figures ``before`` (the control's the same as in the bake)."""
    for _ in range(100):
        rfleet.tick(rollout)
        rollout.refresh_from_db()
        if rollout.wave_finished_at is not None or rollout.state not in (RolloutState.CANARY, RolloutState.WAVES):
            break
    assert rollout.wave_finished_at is not None, rollout.waiting_for
    assert "baking wave" in rollout.waiting_for and "compared" in rollout.waiting_for
    now = timezone.now().replace(second=0, microsecond=0)
    rows = list(rollout.nodes.select_related("node").exclude(wave=None))
    done = [rn.node for rn in rows if rn.step == Step.DONE]
    pending = [rn.node for rn in rows if rn.step == Step.PENDING]
    assert done and pending

    def write(last: dt.datetime, figures: dict[str, tuple[float, int]]) -> None:
        """Five minutes up to ``last``: the upgraded nodes' ``figures``, the control's for the same stages."""
        for k in range(5):
            minute = last - dt.timedelta(minutes=k)
            for node in done + pending:
                for stage, (p95, errors) in (figures.items() if node in done else ((s, control) for s in figures)):
                    StageNodeRollup.objects.update_or_create(node=node, stage=stage, minute=minute, defaults={
                        "tier_id": node.tier_id, "count": 100, "errors": errors, "p50_ms": p95 / 2,
                        "p95_ms": p95, "p99_ms": p95 * 1.2, "max_ms": p95 * 1.5})

    write(now, upgraded)
    started = now - dt.timedelta(hours=2)
    Rollout.objects.filter(pk=rollout.pk).update(started_at=started)
    if before is not None:
        write(started, before)
    # The bake time has passed (moved back rather than waited for).
    Rollout.objects.filter(pk=rollout.pk).update(
        wave_finished_at=timezone.now() - dt.timedelta(seconds=BAKE_S + 1))
    rollout.refresh_from_db()
    return rollout


def _cohort_gates(rollout: Rollout) -> list[dict[str, Any]]:
    return [g for g in rollout.gates if g.get("kind") == "cohort"]


def test_a_canary_within_the_tolerance_passes_and_the_next_wave_starts(rfleet: RolloutFleet) -> None:
    rollout = _start(rfleet)
    rollout = _baked(rfleet, rollout, upgraded={"generation": (105.0, 1), "perception": (40.0, 0)},
                     control=(100.0, 1))
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAVES and rollout.current_wave == 1, rollout.message
    [gate] = _cohort_gates(rollout)
    assert gate["ok"] and gate["wave"] == 0 and gate["tolerance_pct"] == 20
    compared = {c["stage"]: c for c in gate["compared"]}
    assert set(compared) == {"generation", "perception"}
    assert compared["generation"]["upgraded_p95_ms"] == 105 and compared["generation"]["control_p95_ms"] == 100
    assert compared["generation"]["limit_p95_ms"] == 121  # 100 × 1.2 + 1 ms slack
    assert gate["upgraded"]["nodes"] == 1 and gate["control"]["nodes"] == 5
    assert gate["upgraded"]["stages"]["generation"]["requests"] == 500


def test_a_slower_canary_fails_the_cohort_gate_and_is_rolled_back(rfleet: RolloutFleet) -> None:
    rollout = _start(rfleet)
    rollout = _baked(rfleet, rollout, upgraded={"generation": (180.0, 1), "perception": (40.0, 0)},
                     control=(100.0, 1))
    rollout = rfleet.run_until(rollout, (RolloutState.ROLLED_BACK, RolloutState.COMPLETED, RolloutState.PAUSED))
    assert rollout.state == RolloutState.ROLLED_BACK
    assert "cohort gate" in rollout.message and "generation p95 180 ms > 121 ms" in rollout.message
    [gate] = _cohort_gates(rollout)
    assert not gate["ok"]
    assert {c["stage"]: c["ok"] for c in gate["compared"]} == {"generation": False, "perception": True}
    canary = RolloutNode.objects.get(rollout=rollout, wave=0)
    assert canary.step == Step.ROLLED_BACK
    assert set(Module.objects.values_list("driver_version", flat=True)) == {"2.3.1"}
    assert set(rollout.nodes.filter(wave__gt=0).values_list("step", flat=True)) == {Step.SKIPPED}
    assert AuditEvent.objects.filter(action="rollout.gate_failed", target_id=str(rollout.pk)).exists()
    rfleet.candidate.refresh_from_db()
    assert rfleet.candidate.state == CombinationState.VALIDATED


def test_more_errors_fail_the_gate_and_pause_then_a_resume_goes_past_it(rfleet: RolloutFleet) -> None:
    rollout = _start(rfleet, on_failure="pause", cohort_tolerance_pct=50)
    rollout = _baked(rfleet, rollout, upgraded={"tool_call": (50.0, 6)}, control=(50.0, 2))
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.PAUSED
    assert "tool_call error rate 6.00% > 3.10%" in rollout.message, rollout.message
    assert RolloutNode.objects.get(rollout=rollout, wave=0).step == Step.DONE  # paused, not rolled back
    for _ in range(2):
        rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.PAUSED and rollout.current_wave == 0
    services.rollout_resume(rollout=rollout, actor="ops", reason="looked at it: a noisy neighbour")
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.current_wave == 1 and rollout.state == RolloutState.WAVES, rollout.waiting_for
    [gate] = _cohort_gates(rollout)
    assert not gate["ok"] and gate["acknowledged"] == "ops"


def test_without_per_node_figures_the_gate_says_it_was_not_evaluated(rfleet: RolloutFleet) -> None:
    rollout = _start(rfleet)
    rollout = _baked(rfleet, rollout, upgraded={}, control=(100.0, 0))
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.current_wave == 1
    [gate] = _cohort_gates(rollout)
    assert gate["ok"] and gate["compared"] == [] and gate["detail"].startswith("not evaluated: no stage with 20+")


def test_a_canary_as_slow_as_it_was_before_the_rollout_passes(rfleet: RolloutFleet) -> None:
    """A node slower for another reason (a module at half width) is judged against its own past: 150 ms
    before and after its upgrade, beside a control at 100 ms, is no regression."""
    rollout = _start(rfleet)
    rollout = _baked(rfleet, rollout, upgraded={"generation": (150.0, 1)}, control=(100.0, 1),
                     before={"generation": (150.0, 1)})
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAVES and rollout.current_wave == 1, rollout.message
    [gate] = _cohort_gates(rollout)
    [c] = gate["compared"]
    assert gate["ok"] and c["ok"] and c["baseline"] == {"upgraded_p95_ms": 150, "control_p95_ms": 100}
    assert c["expected_p95_ms"] == 150 and c["limit_p95_ms"] == 181  # 150 × 1.2 + 1 ms slack
    assert rollout.started_at is not None and gate["baseline"]["until"] == rollout.started_at.isoformat()


def test_a_canary_slower_than_before_fails_though_within_the_controls_tolerance(rfleet: RolloutFleet) -> None:
    """60 ms before its upgrade, 100 ms after, while the control stayed at 100 ms: the upgrade made it
    two thirds slower, which a comparison with the control alone (100 ≤ 121) would have let through."""
    rollout = _start(rfleet)
    rollout = _baked(rfleet, rollout, upgraded={"generation": (100.0, 1)}, control=(100.0, 1),
                     before={"generation": (60.0, 1)})
    rollout = rfleet.run_until(rollout, (RolloutState.ROLLED_BACK, RolloutState.COMPLETED, RolloutState.PAUSED))
    assert rollout.state == RolloutState.ROLLED_BACK
    assert "generation p95 100 ms > 73 ms" in rollout.message, rollout.message
    assert "60 ms before the rollout" in rollout.message, rollout.message
