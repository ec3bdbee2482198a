"""Rollouts and change windows: a rollout created outside its window waits (saying until when) and
starts its canary when the window opens; a running wave finishes after the window closes and the
next wave waits; a freeze holds it whatever the windows say; the preview names the governing window."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.inventory.models import Rack
from apps.operations.choices import WindowActor
from apps.operations.models import ChangeWindow, Freeze
from apps.rollouts import services
from apps.rollouts.choices import RolloutState, Step
from apps.rollouts.models import Rollout
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.django_db

ALWAYS = "* * * * *"


def _later() -> tuple[str, dt.datetime]:
    """A daily cron that fires three hours from now (never within a test), and that firing."""
    at = (timezone.now() + dt.timedelta(hours=3)).replace(second=0, microsecond=0)
    return f"{at.minute} {at.hour} * * *", at


def _window(cron: str, *, name: str = "nights") -> ChangeWindow:
    return ChangeWindow.objects.create(name=name, cron=cron, duration_minutes=60, time_zone="UTC",
                                       actors=[WindowActor.ROLLOUTS])


def _create(rfleet: RolloutFleet) -> Rollout:
    for i in range(1, 5):
        rfleet.node(f"n-{i}")
    spec = services.Spec(combination=rfleet.candidate, module_type=rfleet.mtype, suite=rfleet.suite, bake_s=0,
                         wave_size=2, max_unavailable="2", reason="new driver")
    return services.rollout_create(spec=spec, actor="test")


def test_a_rollout_created_outside_its_window_waits_then_starts_when_it_opens(rfleet: RolloutFleet) -> None:
    cron, opens = _later()
    window = _window(cron)
    rollout = _create(rfleet)
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING and rollout.started_at is None
    assert rollout.waiting_until == opens
    assert "outside change window 'nights'" in rollout.waiting_for
    assert f"{opens:%Y-%m-%d %H:%M} UTC" in rollout.waiting_for
    assert set(rollout.nodes.values_list("step", flat=True)) <= {Step.PENDING, Step.SKIPPED}
    assert AuditEvent.objects.filter(action="rollout.waiting", target_id=str(rollout.pk)).count() == 1
    rfleet.tick(rollout)  # still closed: still waiting, no second record
    assert AuditEvent.objects.filter(action="rollout.waiting", target_id=str(rollout.pk)).count() == 1

    ChangeWindow.objects.filter(pk=window.pk).update(cron=ALWAYS)  # the window opens
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.CANARY and rollout.waiting_until is None
    start = AuditEvent.objects.get(action="rollout.start", target_id=str(rollout.pk))
    assert "inside change window 'nights'" in start.reason
    assert rollout.nodes.get(wave=0).step != Step.PENDING


def test_a_running_wave_finishes_when_the_window_closes_and_the_next_waits(rfleet: RolloutFleet) -> None:
    window = _window(ALWAYS)
    rollout = _create(rfleet)
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.CANARY
    cron, opens = _later()
    ChangeWindow.objects.filter(pk=window.pk).update(cron=cron)  # closes while the canary runs

    rollout = rfleet.run_until(rollout, (RolloutState.WAITING, RolloutState.COMPLETED, RolloutState.ROLLED_BACK,
                                         RolloutState.PAUSED))
    assert rollout.state == RolloutState.WAITING, rollout.message
    assert rollout.current_wave == 1 and rollout.waiting_until == opens
    assert rollout.nodes.get(wave=0).step == Step.DONE  # the canary finished
    assert set(rollout.nodes.filter(wave=1).values_list("step", flat=True)) == {Step.PENDING}

    ChangeWindow.objects.filter(pk=window.pk).update(cron=ALWAYS)
    rollout = rfleet.run_until(rollout, (RolloutState.COMPLETED, RolloutState.ROLLED_BACK, RolloutState.PAUSED))
    assert rollout.state == RolloutState.COMPLETED, rollout.message
    assert AuditEvent.objects.filter(action="rollout.window_opened", target_id=str(rollout.pk)).exists()


def test_a_freeze_holds_a_rollout_inside_its_window(rfleet: RolloutFleet) -> None:
    _window(ALWAYS)
    now = timezone.now()
    Freeze.objects.create(reason="year-end close", starts_at=now - dt.timedelta(minutes=5),
                          ends_at=now + dt.timedelta(hours=2))
    rollout = _create(rfleet)
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING
    assert "frozen until" in rollout.waiting_for and "year-end close" in rollout.waiting_for
    assert rollout.waiting_until is not None and rollout.waiting_until > now + dt.timedelta(minutes=119)


def test_a_waiting_rollout_can_be_paused_resumed_and_aborted(rfleet: RolloutFleet) -> None:
    _window(_later()[0])
    rollout = _create(rfleet)
    rfleet.tick(rollout)
    rollout = services.rollout_pause(rollout=Rollout.objects.get(pk=rollout.pk), actor="ops", reason="look")
    assert rollout.state == RolloutState.PAUSED and rollout.waiting_until is None
    services.rollout_resume(rollout=rollout, actor="ops")
    rfleet.tick(rollout)
    rollout.refresh_from_db()
    assert rollout.state == RolloutState.WAITING
    rollout = services.rollout_abort(rollout=rollout, actor="ops", reason="not this week")
    assert rollout.state == RolloutState.ABORTED


def test_the_preview_names_the_window_that_governs_the_canary(rfleet: RolloutFleet,
                                                              operator_api: APIClient) -> None:
    for i in range(1, 5):
        rfleet.node(f"n-{i}")
    cron, opens = _later()
    _window(cron)
    ChangeWindow.objects.create(name="other racks", cron=ALWAYS, duration_minutes=60, time_zone="UTC",
                                actors=[WindowActor.ROLLOUTS]).racks.set([Rack.objects.create(name="rack-x")])
    body: dict[str, Any] = {"combination": rfleet.candidate.pk, "module_type": rfleet.mtype.pk,
                            "suite": rfleet.suite.pk, "wave_size": 2, "max_unavailable": "2", "bake_s": 0,
                            "reason": "new driver"}
    window = operator_api.post("/api/v1/rollouts/preview/", body, format="json").json()["window"]
    assert window["allowed"] is False and window["governing"] == ["nights"]
    assert dt.datetime.fromisoformat(window["until"]) == opens
    assert "outside change window 'nights'" in window["why"]


def test_an_operators_rollout_control_during_a_freeze_needs_a_reason_and_is_audited_as_such(
        rfleet: RolloutFleet) -> None:
    rollout = _create(rfleet)
    now = timezone.now()
    Freeze.objects.create(reason="year-end close", starts_at=now - dt.timedelta(minutes=1),
                          ends_at=now + dt.timedelta(hours=1))
    with pytest.raises(ValidationError) as refused:
        services.rollout_pause(rollout=rollout, actor="ops")
    assert "year-end close" in str(refused.value.message_dict["reason"])
    assert Rollout.objects.get(pk=rollout.pk).state == RolloutState.PLANNED  # nothing written
    services.rollout_pause(rollout=rollout, actor="ops", reason="hold it over the close")
    event = AuditEvent.objects.get(action="rollout.pause", target_id=str(rollout.pk))
    assert event.changes["during_freeze"]["reason"] == "year-end close"
