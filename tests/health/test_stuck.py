"""Stuck-state alarms: a rollout step, a vector run or an agent command in one state for more than twice
its expected duration opens a ``stuck`` finding naming the object, its state, since when and what it
waits for; the finding is updated while it stays and resolves once the object moves on. The health
sweep asks every owner, so a wedged controller is still caught."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from apps.agents.choices import CommandKind, CommandState
from apps.agents.models import NodeCommand
from apps.health import stuck
from apps.health.choices import ACTIVE_FINDING_STATES, FindingState
from apps.health.models import Finding
from apps.health.sweep import sweep
from apps.inventory.models import Module
from apps.rollouts import services
from apps.rollouts.choices import Step
from apps.rollouts.models import RolloutNode
from apps.vectors.choices import RunState
from apps.vectors.models import VectorRun
from apps.vectors.runs import run_create
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def rfleet(db: Any) -> RolloutFleet:
    return RolloutFleet()


def _stuck() -> list[Finding]:
    return list(Finding.objects.filter(check_name=stuck.STUCK, state__in=ACTIVE_FINDING_STATES).order_by("pk"))


def _rollout_node(rfleet: RolloutFleet) -> RolloutNode:
    for h in ("n-1", "n-2", "n-3"):
        rfleet.node(h)
    spec = services.Spec(combination=rfleet.candidate, module_type=rfleet.mtype, suite=rfleet.suite, bake_s=0,
                         wave_size=1, max_unavailable="1", reason="new driver")
    rollout = services.rollout_create(spec=spec, actor="test")
    return rollout.nodes.select_related("node").order_by("wave", "position").first()  # type: ignore[return-value]


def test_a_step_waiting_past_twice_its_expected_time_opens_a_finding_naming_what_it_waits_for(
        rfleet: RolloutFleet) -> None:
    rn = _rollout_node(rfleet)
    now = timezone.now()
    waits = "waiting for capacity: Hybrid inference would fall to 1 serving nodes (from 2), below its floor of 2"
    RolloutNode.objects.filter(pk=rn.pk).update(step=Step.CORDONING, waiting_for=waits,
                                                step_changed_at=now - dt.timedelta(seconds=200))
    stuck.sweep(now=now)
    assert _stuck() == []  # 200 s of an expected 120 s: not yet twice it

    later = now + dt.timedelta(seconds=60)
    result = stuck.sweep(now=later)
    [f] = _stuck()
    assert result["rollouts"]["opened"] == [f.pk]
    assert f.node_id == rn.node_id and f.subject_key == f"stuck:rollouts:rollout_node:{rn.pk}"
    assert f.evidence["state"] == "cordoning" and f.evidence["waits_for"] == waits
    assert f.evidence["stuck_s"] == 260 and f.evidence["expected_s"] == 120
    assert f"rollout #{rn.rollout_id}: {rn.node.hostname}'s step has been cordoning for 260 s" in f.summary
    assert waits in f.summary

    stuck.sweep(now=later + dt.timedelta(seconds=30))  # still stuck: the same finding, newer numbers
    [again] = _stuck()
    assert again.pk == f.pk and again.evidence["stuck_s"] == 290

    RolloutNode.objects.filter(pk=rn.pk).update(step=Step.DRAINING, step_changed_at=later)
    result = stuck.sweep(now=later + dt.timedelta(seconds=40))
    assert _stuck() == [] and result["rollouts"]["resolved"] == [f.pk]
    assert Finding.objects.get(pk=f.pk).state == FindingState.RESOLVED


def test_a_failed_node_waits_for_a_person_and_is_not_stuck(rfleet: RolloutFleet) -> None:
    rn = _rollout_node(rfleet)
    RolloutNode.objects.filter(pk=rn.pk).update(step=Step.FAILED,
                                                step_changed_at=timezone.now() - dt.timedelta(days=1))
    stuck.sweep(now=timezone.now())
    assert _stuck() == []


def test_a_command_its_agent_took_and_never_answered_is_stuck_with_the_agents_last_answer(
        rfleet: RolloutFleet) -> None:
    node = rfleet.node("n-1")
    now = timezone.now()
    quiet = NodeCommand.objects.create(node=node, kind=CommandKind.CORDON, state=CommandState.DELIVERED,
                                       delivered_at=now - dt.timedelta(seconds=300))
    working = NodeCommand.objects.create(node=node, kind=CommandKind.INSTALL_VERSIONS,
                                         state=CommandState.IN_PROGRESS, delivered_at=now - dt.timedelta(hours=1),
                                         progress_at=now - dt.timedelta(minutes=50),
                                         result={"message": "unpacking driver 2.4.0"})
    young = NodeCommand.objects.create(node=node, kind=CommandKind.INSTALL_VERSIONS, state=CommandState.IN_PROGRESS,
                                       delivered_at=now - dt.timedelta(minutes=20))
    NodeCommand.objects.create(node=node, kind=CommandKind.DRAIN, state=CommandState.IN_PROGRESS,
                               delivered_at=now - dt.timedelta(days=1))  # its drain's deadline judges it
    stuck.sweep(now=now)
    found = {f.evidence["command"]: f for f in _stuck()}
    assert set(found) == {quiet.pk, working.pk} and young.pk not in found
    assert "nothing since" in found[quiet.pk].evidence["waits_for"]
    assert "in_progress at" in found[working.pk].evidence["waits_for"]
    assert "unpacking driver 2.4.0" in found[working.pk].evidence["waits_for"]
    NodeCommand.objects.filter(pk=quiet.pk).update(state=CommandState.SUCCEEDED, finished_at=now)
    stuck.sweep(now=now)
    assert {f.evidence["command"] for f in _stuck()} == {working.pk}


def test_a_run_past_twice_its_timeout_is_stuck_naming_the_modules_it_waits_on(rfleet: RolloutFleet) -> None:
    node = rfleet.node("n-1")
    modules = list(Module.objects.filter(node=node))
    run = run_create(suite=rfleet.suite, modules=modules, actor="test", timeout_s=60)
    now = timezone.now()
    VectorRun.objects.filter(pk=run.pk).update(state=RunState.RUNNING, started_at=now - dt.timedelta(seconds=100))
    stuck.sweep(now=now)
    assert _stuck() == []
    stuck.sweep(now=now + dt.timedelta(seconds=30))
    [f] = _stuck()
    assert f.subject_key == f"stuck:vectors:vector_run:{run.pk}" and f.node_id is None
    assert f.evidence["expected_s"] == 60 and f.evidence["run"] == run.pk
    assert f"{len(modules)} module(s): {modules[0].serial} (pending)" in f.evidence["waits_for"]
    VectorRun.objects.filter(pk=run.pk).update(state=RunState.PASSED, finished_at=now)
    stuck.sweep(now=now + dt.timedelta(seconds=40))
    assert _stuck() == []


def test_the_health_sweep_asks_the_owners_and_one_that_fails_stops_no_other(
        rfleet: RolloutFleet, monkeypatch: Any) -> None:
    node = rfleet.node("n-1")
    NodeCommand.objects.create(node=node, kind=CommandKind.CORDON, state=CommandState.DELIVERED,
                               delivered_at=timezone.now() - dt.timedelta(hours=1))

    def broken(now: dt.datetime, factor: float) -> list[stuck.Stuck]:
        raise RuntimeError("the owner's read failed")

    monkeypatch.setitem(stuck._providers, "broken", broken)
    result = sweep()
    assert result["stuck"]["broken"] == "error"
    assert result["stuck"]["commands"]["stuck"] == 1 and len(_stuck()) == 1
