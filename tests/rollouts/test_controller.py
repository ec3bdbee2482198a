"""The rollout controller on a small fleet, the simulator's agent answering in-process: a clean
rollout (canary, waves, pinned, never below the floor, the operator's cordon kept), a bad
combination caught by the canary and rolled back, pause on failure, a pass that dies mid-way, a
node whose critical finding opened after planning skipped at its turn."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.health.models import Finding
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, Node
from apps.operations import lifecycle
from apps.operations.choices import ACTIVE_DRAIN_STATES, Owner
from apps.operations.models import Drain
from apps.rollouts import nodes, services
from apps.rollouts.choices import FailureKind, RolloutState, Step
from apps.rollouts.models import Rollout, RolloutNode
from apps.simulator.services import fault_set
from tests.rollouts.conftest import RolloutFleet, serving_over_time

pytestmark = pytest.mark.django_db


def _fleet(rfleet: RolloutFleet) -> dict[str, Node]:
    nodes = {h: rfleet.node(h) for h in ("n-1", "n-2", "n-3", "n-4", "n-5", "n-6")}
    nodes["s-1"] = rfleet.node("s-1", state=NodeState.STANDBY)
    lifecycle.node_cordon(node=nodes["n-6"], owner=Owner.OPERATOR, reason="bad fan", actor="ops")
    return nodes


def _create(rfleet: RolloutFleet, **kw: Any) -> Rollout:
    spec = services.Spec(combination=rfleet.candidate, module_type=rfleet.mtype, suite=rfleet.suite,
                         bake_s=0, reason="new driver", **kw)
    return services.rollout_create(spec=spec, actor="test")


def test_a_clean_rollout_completes_within_the_floor_and_keeps_the_operators_cordon(rfleet: RolloutFleet) -> None:
    nodes = _fleet(rfleet)
    rollout = _create(rfleet, wave_size=2, max_unavailable="2")
    # n-6 is held by an operator: skipped at planning with the reason. 5 active: floor 2, budget 2.
    skipped = RolloutNode.objects.get(rollout=rollout, node=nodes["n-6"])
    assert skipped.step == Step.SKIPPED and "held by operator" in skipped.reason and "bad fan" in skipped.reason
    waves = {rn.node.hostname: rn.wave for rn in rollout.nodes.select_related("node").exclude(wave=None)}
    assert waves["n-1"] == 0 and sum(1 for w in waves.values() if w == 0) == 1  # one canary per tier

    rollout = rfleet.run_until(rollout, (RolloutState.COMPLETED, RolloutState.ROLLED_BACK, RolloutState.PAUSED))
    assert rollout.state == RolloutState.COMPLETED, rollout.message
    steps = dict(rollout.nodes.values_list("node__hostname", "step"))
    assert steps == {"n-1": "done", "n-2": "done", "n-3": "done", "n-4": "done", "n-5": "done", "s-1": "done",
                     "n-6": "skipped"}
    target = ("2.4.0", "1.18.0")
    on = set(Module.objects.exclude(node=nodes["n-6"]).values_list("driver_version", "framework_version"))
    assert on == {target}
    rfleet.candidate.refresh_from_db()
    assert rfleet.candidate.state == CombinationState.PINNED
    # The floor held at every recorded transition (2 = min_active_nodes; the tier had 5 active).
    counts = serving_over_time(rfleet.tier)
    assert min(counts) >= 2 and min(counts) == 3, counts  # 2 out at once at most
    # The operator's node is still cordoned by the operator; nothing of the rollout's is left held.
    n6 = Node.objects.get(pk=nodes["n-6"].pk)
    assert n6.state == NodeState.CORDONED
    assert Drain.objects.get(node=n6, state__in=ACTIVE_DRAIN_STATES).owner == Owner.OPERATOR
    assert not Drain.objects.filter(owner=Owner.ROLLOUT, state__in=ACTIVE_DRAIN_STATES).exists()
    assert Node.objects.get(pk=nodes["s-1"].pk).state == NodeState.STANDBY
    assert set(Node.objects.filter(hostname__startswith="n-").exclude(pk=n6.pk).values_list("state", flat=True)) \
        == {NodeState.ACTIVE}
    # Every node step and control is in the audit trail, linked to the rollout.
    actions = list(AuditEvent.objects.filter(related_type="rollout", related_id=str(rollout.pk))
                   .filter(target_id=str(nodes["n-1"].pk)).values_list("action", flat=True))
    for step in ("cordoning", "draining", "installing", "validating", "uncordoning", "done"):
        assert f"rollout.node.{step}" in actions
    assert AuditEvent.objects.filter(action="rollout.completed", target_id=str(rollout.pk)).exists()


def test_a_bad_combination_fails_the_canary_and_rolls_it_back_touching_nothing_else(rfleet: RolloutFleet) -> None:
    nodes = _fleet(rfleet)
    fault_set(kind="bad_combination", combination=rfleet.candidate, actor="test")  # goes bad in the field
    rollout = _create(rfleet, wave_size=2, max_unavailable="2")
    rollout = rfleet.run_until(rollout, (RolloutState.ROLLED_BACK, RolloutState.COMPLETED))
    assert rollout.state == RolloutState.ROLLED_BACK
    assert "canary" in rollout.message and "test_qlinearmatmul" in rollout.message
    canary = RolloutNode.objects.get(rollout=rollout, wave=0)
    assert canary.step == Step.ROLLED_BACK and canary.failure_kind == FailureKind.VERSIONS
    assert Node.objects.get(pk=canary.node_id).state == NodeState.ACTIVE
    assert set(Module.objects.values_list("driver_version", "framework_version")) == {("2.3.1", "1.18.0")}
    touched = set(AuditEvent.objects.filter(related_type="rollout", related_id=str(rollout.pk),
                                            action="rollout.node.cordoning").values_list("target_id", flat=True))
    assert touched == {str(canary.node_id)}
    others = set(rollout.nodes.exclude(pk=canary.pk).values_list("step", flat=True))
    assert others == {Step.SKIPPED}
    rfleet.candidate.refresh_from_db()
    assert rfleet.candidate.state == CombinationState.VALIDATED  # not pinned
    assert Node.objects.get(pk=nodes["n-6"].pk).state == NodeState.CORDONED


def test_pause_on_failure_waits_for_an_operator_then_resume_rolls_the_failed_node_back(
        rfleet: RolloutFleet) -> None:
    _fleet(rfleet)
    fault = fault_set(kind="bad_combination", combination=rfleet.candidate, actor="test")
    rollout = _create(rfleet, wave_size=2, max_unavailable="2", on_failure="pause")
    rollout = rfleet.run_until(rollout, (RolloutState.PAUSED, RolloutState.ROLLED_BACK))
    assert rollout.state == RolloutState.PAUSED and "test_qlinearmatmul" in rollout.message
    canary = RolloutNode.objects.get(rollout=rollout, wave=0)
    assert canary.step == Step.FAILED
    assert Node.objects.get(pk=canary.node_id).state == NodeState.DRAINED  # held, out of service
    for _ in range(3):  # paused: nothing new starts
        rfleet.tick(rollout)
    assert not rollout.nodes.filter(wave=1).exclude(step=Step.PENDING).exists()
    fault_set(kind="bad_combination", combination=rfleet.candidate, enabled=False, actor="test")
    assert fault.pk
    services.rollout_resume(rollout=rollout, actor="test", reason="fixed in the field")
    rollout = rfleet.run_until(rollout, (RolloutState.COMPLETED, RolloutState.ROLLED_BACK, RolloutState.PAUSED))
    assert rollout.state == RolloutState.COMPLETED, rollout.message
    canary.refresh_from_db()
    assert canary.step == Step.ROLLED_BACK
    assert "not upgraded" in rollout.message and Node.objects.get(pk=canary.node_id).hostname in rollout.message


def test_a_pass_that_dies_mid_way_is_resumed_from_the_stored_steps(rfleet: RolloutFleet,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _fleet(rfleet)
    rollout = _create(rfleet, wave_size=3, max_unavailable="2")
    real = nodes._set_versions
    calls = {"n": 0}

    def dying(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise SystemExit("worker killed")
        real(*args, **kwargs)

    monkeypatch.setattr(nodes, "_set_versions", dying)
    with pytest.raises(SystemExit):
        rfleet.run_until(rollout, (RolloutState.COMPLETED,))
    monkeypatch.setattr(nodes, "_set_versions", real)
    rollout = rfleet.run_until(rollout, (RolloutState.COMPLETED, RolloutState.ROLLED_BACK, RolloutState.PAUSED))
    assert rollout.state == RolloutState.COMPLETED, rollout.message
    assert not Drain.objects.filter(owner=Owner.ROLLOUT, state__in=ACTIVE_DRAIN_STATES).exists()
    # One install per node, never two: the stored command was looked up again.
    assert all(rn.install_command_id for rn in rollout.nodes.filter(step=Step.DONE))
    from apps.agents.models import NodeCommand

    per_node = NodeCommand.objects.filter(kind="install_versions").values_list("node_id", flat=True)
    assert len(per_node) == len(set(per_node))



def test_nodes_failing_on_their_own_go_back_at_once_and_trip_the_circuit_breaker(
        rfleet: RolloutFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    _fleet(rfleet)
    real = rfleet.pool.sim.install_versions

    def hook_fails(hostname: str, command: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if (command.get("args") or {}).get("restore"):
            return real(hostname, command)
        return "failed", {"hook": None, "message": "install hook exited 3: disk full"}

    monkeypatch.setattr(rfleet.pool.sim, "install_versions", hook_fails)
    rollout = _create(rfleet, canary=2, wave_size=2, max_unavailable="2", max_failures=2)
    rollout = rfleet.run_until(rollout, (RolloutState.ROLLED_BACK, RolloutState.COMPLETED, RolloutState.PAUSED))
    assert rollout.state == RolloutState.ROLLED_BACK
    assert rollout.message.startswith("circuit breaker: 2 node(s) failed (limit 2)"), rollout.message
    assert "disk full" in rollout.message
    failed = list(rollout.nodes.exclude(failure_kind=""))
    assert len(failed) == 2 and {rn.failure_kind for rn in failed} == {FailureKind.NODE}
    assert {rn.step for rn in failed} == {Step.ROLLED_BACK}
    assert set(rollout.nodes.filter(wave__gt=0).values_list("step", flat=True)) == {Step.SKIPPED}
    assert set(Module.objects.values_list("driver_version", flat=True)) == {"2.3.1"}
    assert not Drain.objects.filter(owner=Owner.ROLLOUT, state__in=ACTIVE_DRAIN_STATES).exists()


def _module_finding(check: str, node: Node, severity: str, summary: str, first_seen: dt.datetime) -> Finding:
    module = Module.objects.filter(node=node).order_by("slot").first()
    assert module is not None
    return Finding.objects.create(check_name=check, subject_kind="module", subject_key=f"module:{module.pk}",
                                  node=node, module=module, severity=severity, summary=summary,
                                  first_seen=first_seen, last_seen=timezone.now())


def test_a_node_whose_critical_finding_opened_after_planning_is_skipped_at_its_turn_naming_it(
        rfleet: RolloutFleet) -> None:
    nodes = _fleet(rfleet)
    # A warning, older than the rollout (started past the health gate): its node is upgraded all the same.
    _module_finding("temperature", nodes["n-4"], "warning", "81 °C", timezone.now() - dt.timedelta(hours=1))
    rollout = _create(rfleet, wave_size=2, max_unavailable="2", override=["health"])
    planned = RolloutNode.objects.get(rollout=rollout, node=nodes["n-3"])
    assert planned.step == Step.PENDING and planned.wave, planned.wave  # planned in a wave after the canary
    ecc = _module_finding("ecc", nodes["n-3"], "critical", "2 uncorrected ECC errors", timezone.now())

    rollout = rfleet.run_until(rollout, (RolloutState.COMPLETED, RolloutState.ROLLED_BACK, RolloutState.PAUSED))
    assert rollout.state == RolloutState.COMPLETED, rollout.message
    steps = dict(rollout.nodes.values_list("node__hostname", "step"))
    assert steps["n-3"] == "skipped" and steps["n-4"] == "done" and steps["n-2"] == "done", steps
    skipped = RolloutNode.objects.get(pk=planned.pk)
    assert skipped.reason.startswith(f"at its turn: critical health finding #{ecc.pk} ECC errors (ecc) on module "
                                     "n-3-m0 on n-3 is open: 2 uncorrected ECC errors"), skipped.reason
    assert set(Module.objects.filter(node=nodes["n-3"]).values_list("driver_version", flat=True)) == {"2.3.1"}
    assert Node.objects.get(pk=nodes["n-3"].pk).state == NodeState.ACTIVE
    trail = AuditEvent.objects.filter(related_type="rollout", related_id=str(rollout.pk),
                                      target_id=str(nodes["n-3"].pk))
    assert list(trail.values_list("action", flat=True)) == ["rollout.node.skipped"]
    assert f"critical health finding #{ecc.pk}" in trail.get().reason
    assert "n-3 (at its turn: critical health finding" in rollout.message  # named among the nodes not upgraded
