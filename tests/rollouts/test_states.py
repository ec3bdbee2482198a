"""Every rollout state is reached, each with what it waits for or why it ended: planned, canary,
waves, paused, aborted (here), completed, rolling_back and rolled_back (test_controller, test_gate),
and failed, entered when the rollout cannot go on and cannot put the fleet back on its own: a
rollback that itself fails, or a rollout in which no node could be upgraded."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, Node
from apps.operations.choices import ACTIVE_DRAIN_STATES, Owner
from apps.operations.models import Drain
from apps.rollouts import services
from apps.rollouts.choices import FINAL_ROLLOUT_STATES, RolloutState, Step
from apps.rollouts.models import Rollout, RolloutNode
from apps.simulator.services import fault_set
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.django_db
ENDS = (RolloutState.COMPLETED, RolloutState.ROLLED_BACK, RolloutState.FAILED, RolloutState.PAUSED,
        RolloutState.ABORTED)


def _create(rfleet: RolloutFleet, **kw: Any) -> Rollout:
    for h in ("n-1", "n-2", "n-3", "n-4", "n-5"):
        rfleet.node(h)
    spec = services.Spec(combination=rfleet.candidate, module_type=rfleet.mtype, suite=rfleet.suite, bake_s=0,
                         wave_size=2, max_unavailable="2", reason="new driver", **kw)
    return services.rollout_create(spec=spec, actor="test")


def test_a_rollback_that_itself_fails_ends_failed_naming_the_node_which_stays_held(
        rfleet: RolloutFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    fault_set(kind="bad_combination", combination=rfleet.candidate, actor="test")
    real = rfleet.pool.sim.install_versions

    def restore_fails(hostname: str, command: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if (command.get("args") or {}).get("restore"):
            return "failed", {"hook": None, "message": "restore hook exited 2: package cache gone"}
        return real(hostname, command)

    monkeypatch.setattr(rfleet.pool.sim, "install_versions", restore_fails)
    rollout = _create(rfleet)
    rollout = rfleet.run_until(rollout, ENDS)
    assert rollout.state == RolloutState.FAILED
    canary = RolloutNode.objects.select_related("node").get(rollout=rollout, wave=0)
    assert canary.needs_hand and canary.step == Step.FAILED
    assert "canary" in rollout.message and "test_qlinearmatmul" in rollout.message  # why it rolled back
    assert f"the rollback failed on 1 node(s), held for a check by hand: {canary.node.hostname}" in rollout.message
    assert "package cache gone" in rollout.message
    # The node stays out of service under the rollout's hold; the others were never touched.
    assert Drain.objects.get(node=canary.node, state__in=ACTIVE_DRAIN_STATES).owner == Owner.ROLLOUT
    assert set(rollout.nodes.filter(wave__gt=0).values_list("step", flat=True)) == {Step.SKIPPED}
    event = AuditEvent.objects.get(action="rollout.failed", target_id=str(rollout.pk))
    assert event.changes == {"state": [RolloutState.ROLLING_BACK, RolloutState.FAILED]}
    rfleet.candidate.refresh_from_db()
    assert rfleet.candidate.state == CombinationState.VALIDATED
    for _ in range(2):  # final: the sweep leaves it alone
        rfleet.tick()
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.FAILED and rollout.state in FINAL_ROLLOUT_STATES


def test_a_rollout_in_which_no_node_could_be_upgraded_fails_and_pins_nothing(rfleet: RolloutFleet) -> None:
    rollout = _create(rfleet)
    # Between the plan and their turn every node went unreachable.
    Node.objects.filter(hostname__startswith="n-").update(state=NodeState.UNREACHABLE)
    rollout = rfleet.run_until(rollout, ENDS)
    assert rollout.state == RolloutState.FAILED
    assert rollout.message.startswith("no node could be upgraded: n-1 (node is unreachable at its turn)")
    assert set(rollout.nodes.values_list("step", flat=True)) == {Step.SKIPPED}
    rfleet.candidate.refresh_from_db()
    assert rfleet.candidate.state == CombinationState.VALIDATED
    assert set(Module.objects.values_list("driver_version", flat=True)) == {"2.3.1"}


def test_planned_canary_waves_paused_and_aborted_each_say_what_they_wait_for_or_why(rfleet: RolloutFleet) -> None:
    rollout = _create(rfleet)
    seen = {rollout.state: rollout.waiting_for}
    assert rollout.state == RolloutState.PLANNED and "controller" in rollout.waiting_for
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    seen[rollout.state] = rollout.waiting_for
    assert rollout.state == RolloutState.CANARY and rollout.waiting_for.startswith("wave 0:")
    rollout = rfleet.run_until(rollout, (RolloutState.WAVES,))
    seen[rollout.state] = rollout.waiting_for
    assert rollout.waiting_for
    services.rollout_pause(rollout=rollout, actor="ops", reason="watching the canary's tier")
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.PAUSED and rollout.message == "paused by ops: watching the canary's tier"
    services.rollout_abort(rollout=rollout, actor="ops", reason="wrong window")
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.ABORTED and rollout.message.startswith("aborted by ops: wrong window")
    assert set(seen) == {RolloutState.PLANNED, RolloutState.CANARY, RolloutState.WAVES}
    assert all(seen.values())
