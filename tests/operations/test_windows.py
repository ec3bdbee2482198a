"""Change windows and freezes: the API (admins write, each write audited, bad input a 400 naming
the field, nothing stored) and the verdict every actor asks (opt-in windows, any window open is
open, a freeze beats every window, "until when" from the cron in the window's zone)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.operations import lifecycle, windows
from apps.operations.choices import WindowActor
from apps.operations.models import ChangeWindow, Freeze
from tests.operations.conftest import Fleet

UTC = dt.UTC
SAT = dt.datetime(2026, 12, 5, 13, 0, tzinfo=UTC)  # a Saturday afternoon
ROLLOUTS = WindowActor.ROLLOUTS


def _window(name: str = "nights", *, cron: str = "0 22 * * *", minutes: int = 120, zone: str = "UTC",
            actors: list[str] | None = None, tiers: list[Any] | None = None, racks: list[Any] | None = None
            ) -> ChangeWindow:
    w = ChangeWindow.objects.create(name=name, cron=cron, duration_minutes=minutes, time_zone=zone,
                                    actors=actors or [ROLLOUTS])
    w.tiers.set(tiers or [])
    w.racks.set(racks or [])
    return w


def _freeze(start: dt.datetime, end: dt.datetime, *, reason: str = "year-end", racks: list[Any] | None = None
            ) -> Freeze:
    f = Freeze.objects.create(reason=reason, starts_at=start, ends_at=end)
    f.racks.set(racks or [])
    return f


# ---- the verdict ------------------------------------------------------------------------------


def test_it_is_unrestricted_when_no_window_governs(fleet: Fleet) -> None:
    _window(actors=[WindowActor.SCALE_DOWN])
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT)
    assert v.allowed and "unrestricted" in v.why and v.governing == []


def test_outside_its_window_it_waits_until_the_next_opening(fleet: Fleet) -> None:
    _window()
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT)
    assert not v.allowed
    assert v.until == dt.datetime(2026, 12, 5, 22, 0, tzinfo=UTC)
    assert "outside change window 'nights'" in v.why and "2026-12-05 22:00 UTC" in v.why


def test_inside_its_window_it_acts_and_says_until_when_it_closes(fleet: Fleet) -> None:
    _window()
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT.replace(hour=23))
    assert v.allowed and v.window == "nights"
    assert v.until == dt.datetime(2026, 12, 6, 0, 0, tzinfo=UTC)


def test_inside_any_governing_window_is_inside(fleet: Fleet) -> None:
    _window("nights")
    _window("afternoons", cron="0 12 * * *", minutes=180)
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT)
    assert v.allowed and v.window == "afternoons" and sorted(v.governing) == ["afternoons", "nights"]


def test_a_window_on_another_rack_does_not_govern(fleet: Fleet) -> None:
    _window(racks=[fleet.racks[1]])
    here = windows.Scope(tiers=frozenset({fleet.tier.pk}), racks=frozenset({fleet.racks[0].pk}))
    there = windows.Scope(tiers=frozenset({fleet.tier.pk}), racks=frozenset({fleet.racks[1].pk}))
    assert windows.verdict(actor=ROLLOUTS, scope=here, at=SAT).allowed
    assert not windows.verdict(actor=ROLLOUTS, scope=there, at=SAT).allowed


def test_a_freeze_beats_an_open_window_and_says_when_both_allow(fleet: Fleet) -> None:
    _window(cron="0 12 * * *", minutes=180)  # open 12:00–15:00 daily
    _freeze(SAT - dt.timedelta(hours=1), SAT + dt.timedelta(days=1))  # until Sunday 13:00
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT)
    assert not v.allowed and v.freeze is not None
    assert "frozen until 2026-12-06 13:00 UTC (year-end)" in v.why
    # Sunday 13:00 is inside the 12:00–15:00 window, so that is when it may act
    assert v.until == dt.datetime(2026, 12, 6, 13, 0, tzinfo=UTC)


def test_after_a_freeze_it_waits_for_the_next_opening(fleet: Fleet) -> None:
    _window()  # 22:00–24:00
    _freeze(SAT - dt.timedelta(hours=1), SAT.replace(hour=23))
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT)
    assert v.until == dt.datetime(2026, 12, 5, 23, 0, tzinfo=UTC)  # the freeze ends inside the window
    _freeze(SAT.replace(hour=22), SAT.replace(hour=0) + dt.timedelta(days=1), reason="second")
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT)
    assert v.until == dt.datetime(2026, 12, 6, 22, 0, tzinfo=UTC)


def test_a_freeze_holds_even_where_no_window_governs(fleet: Fleet) -> None:
    _freeze(SAT, SAT + dt.timedelta(hours=2), racks=[fleet.racks[0]])
    here = windows.Scope(racks=frozenset({fleet.racks[0].pk}))
    assert not windows.verdict(actor=WindowActor.HEALTH_ACTIONS, scope=here, at=SAT).allowed
    assert windows.verdict(actor=WindowActor.HEALTH_ACTIONS, scope=here, at=SAT + dt.timedelta(hours=2)).allowed


def test_the_window_opens_in_its_own_zone(fleet: Fleet) -> None:
    _window(cron="0 9 * * mon-fri", minutes=60, zone="Europe/Berlin")
    v = windows.verdict(actor=ROLLOUTS, scope=windows.Scope(), at=SAT)
    assert v.until == dt.datetime(2026, 12, 7, 8, 0, tzinfo=UTC)


def test_the_calendar_lists_openings_and_freezes_in_order(fleet: Fleet) -> None:
    _window()
    _freeze(SAT + dt.timedelta(days=2), SAT + dt.timedelta(days=3))
    spans = windows.calendar(start=SAT.replace(hour=0), days=3)
    assert [(s.kind, s.starts.day) for s in spans] == [("window", 5), ("window", 6), ("freeze", 7), ("window", 7)]


def test_overlapping_openings_are_one_span_on_the_calendar() -> None:
    every_five = ChangeWindow(name="rolling", cron="*/5 * * * *", duration_minutes=10, time_zone="UTC")
    day = SAT.replace(hour=0)
    assert windows.openings(every_five, day, day + dt.timedelta(days=1)) == [
        (day - dt.timedelta(minutes=5), day + dt.timedelta(days=1))]
    late = ChangeWindow(name="late nights", cron="0 22 * * *", duration_minutes=240, time_zone="UTC")
    spans = windows.openings(late, day, day + dt.timedelta(days=3))
    assert spans[0] == (day - dt.timedelta(hours=2), day + dt.timedelta(hours=2))  # Friday's runs into Saturday
    assert len(spans) == 4


# ---- the API ----------------------------------------------------------------------------------


URL = "/api/v1/change-windows/"


def _body(**over: Any) -> dict[str, Any]:
    return {"name": "weeknights", "cron": "0 22 * * mon-fri", "duration_minutes": 240,
            "time_zone": "Europe/Berlin", "actors": ["rollouts", "scale_down"], **over}


def test_it_creates_a_window_audited(fleet: Fleet, admin_api: Any) -> None:
    resp = admin_api.post(URL, _body(tiers=[fleet.tier.pk], reason="ops agreed"), format="json")
    assert resp.status_code == 201, resp.content
    data = resp.json()
    assert data["scope"] == f"tiers {fleet.tier.name}" and data["next_opening"]
    event = AuditEvent.objects.get(action="change_window.create")
    assert event.reason == "ops agreed" and event.changes["tiers"] == [None, [fleet.tier.pk]]


@pytest.mark.parametrize(("over", "field", "words"), [
    ({"cron": "0 25 * * *"}, "cron", "hour field has 25"),
    ({"time_zone": "Europe/Atlantis"}, "time_zone", "not a known time zone"),
    ({"duration_minutes": 0}, "duration_minutes", ""),
    ({"duration_minutes": -5}, "duration_minutes", ""),
    ({"actors": []}, "actors", "at least one"),
    ({"actors": ["rollouts", "coffee"]}, "actors[1]", "unknown coffee"),
])
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(fleet: Fleet, admin_api: Any,
                                                               over: dict[str, Any], field: str, words: str) -> None:
    resp = admin_api.post(URL, _body(**over), format="json")
    assert resp.status_code == 400, resp.content
    assert field in resp.json()["errors"], resp.json()
    assert words in str(resp.json()["errors"][field])
    assert not ChangeWindow.objects.exists() and not AuditEvent.objects.filter(action__startswith="change_").exists()


@pytest.mark.parametrize("path", [URL, "/api/v1/freezes/"])
def test_a_create_retried_with_its_idempotency_key_makes_one_object(fleet: Fleet, admin_api: Any, path: str) -> None:
    body = (_body(reason="ops agreed") if path == URL else
            {"reason": "year-end close", "starts_at": "2026-12-20T00:00:00Z", "ends_at": "2027-01-04T00:00:00Z"})
    first = admin_api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="create-1")
    again = admin_api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="create-1")
    assert first.status_code == again.status_code == 201, (first.content, again.content)
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert ChangeWindow.objects.count() + Freeze.objects.count() == 1
    assert AuditEvent.objects.filter(action__endswith=".create").count() == 1
    other = admin_api.post(path, {**body, "reason": "another"}, format="json", HTTP_IDEMPOTENCY_KEY="create-1")
    assert other.status_code == 422


@pytest.mark.parametrize(("over", "field"), [({"tiers": [99999]}, "tiers"), ({"racks": [99999]}, "racks")])
def test_an_unknown_tier_or_rack_is_a_404_naming_the_field_and_stores_nothing(
        fleet: Fleet, admin_api: Any, over: dict[str, Any], field: str) -> None:
    resp = admin_api.post(URL, _body(**over), format="json")
    assert resp.status_code == 404, resp.content
    assert "99999" in str(resp.json()["errors"][field])
    assert not ChangeWindow.objects.exists() and not AuditEvent.objects.filter(action__startswith="change_").exists()


def test_an_actor_named_twice_counts_once(fleet: Fleet, admin_api: Any) -> None:
    resp = admin_api.post(URL, _body(actors=["rollouts", "rollouts"]), format="json")
    assert resp.status_code == 201, resp.content
    assert resp.json()["actors"] == ["rollouts"]


def test_only_admins_write(fleet: Fleet, operator_api: Any, viewer_api: Any) -> None:
    assert operator_api.post(URL, _body(), format="json").status_code == 403
    assert viewer_api.get(URL).status_code == 200


def test_it_changes_and_deletes_a_window_audited(fleet: Fleet, admin_api: Any) -> None:
    pk = admin_api.post(URL, _body(), format="json").json()["id"]
    resp = admin_api.patch(f"{URL}{pk}/", {"duration_minutes": 60, "racks": [fleet.racks[0].pk]}, format="json")
    assert resp.status_code == 200, resp.content
    changes = AuditEvent.objects.get(action="change_window.update").changes
    assert changes["duration_minutes"] == [240, 60] and changes["racks"] == [[], [fleet.racks[0].pk]]
    assert admin_api.patch(f"{URL}{pk}/", {"cron": "nope"}, format="json").status_code == 400
    assert ChangeWindow.objects.get(pk=pk).cron == "0 22 * * mon-fri"
    assert admin_api.delete(f"{URL}{pk}/").status_code == 204
    assert AuditEvent.objects.filter(action="change_window.delete").count() == 1


def test_it_creates_a_freeze_and_refuses_one_that_ends_first(fleet: Fleet, admin_api: Any) -> None:
    body = {"reason": "year-end close", "starts_at": "2026-12-20T00:00:00Z", "ends_at": "2027-01-04T00:00:00Z",
            "racks": [fleet.racks[1].pk]}
    resp = admin_api.post("/api/v1/freezes/", body, format="json")
    assert resp.status_code == 201, resp.content
    assert resp.json()["scope"] == f"racks {fleet.racks[1].name}"
    assert AuditEvent.objects.get(action="freeze.create").reason == "year-end close"
    bad = admin_api.post("/api/v1/freezes/", {**body, "ends_at": "2026-12-01T00:00:00Z"}, format="json")
    assert bad.status_code == 409 and "ends_at" in bad.json()["errors"]  # a rule the schema cannot type
    empty = admin_api.post("/api/v1/freezes/", {**body, "reason": ""}, format="json")
    assert empty.status_code == 400 and "reason" in empty.json()["errors"]
    assert Freeze.objects.count() == 1


# ---- an operator's own action during a freeze ------------------------------------------------------


def test_an_operators_action_during_a_freeze_asks_for_a_reason_and_is_audited_as_such(
        fleet: Fleet, operator_api: Any) -> None:
    node = fleet.node("n-1", rack=0)
    other = fleet.node("n-2", rack=1)
    lifecycle.node_cordon(node=node, reason="fan", actor="ops")
    lifecycle.node_cordon(node=other, reason="fan", actor="ops")
    now = timezone.now()
    _freeze(now - dt.timedelta(minutes=1), now + dt.timedelta(hours=1), reason="launch day", racks=[fleet.racks[0]])

    refused = operator_api.post(f"/api/v1/nodes/{node.pk}/uncordon/", {}, format="json")
    assert refused.status_code == 400, refused.content
    assert "launch day" in refused.json()["errors"]["reason"][0]
    node.refresh_from_db()
    assert node.state == "cordoned"  # nothing half-written

    done = operator_api.post(f"/api/v1/nodes/{node.pk}/uncordon/", {"reason": "the fan is fixed"}, format="json")
    assert done.status_code == 200, done.content
    event = AuditEvent.objects.filter(action="node.uncordon", target_id=str(node.pk)).get()
    assert event.changes["during_freeze"]["reason"] == "launch day" and event.reason == "the fan is fixed"

    # a node the freeze does not cover: no reason needed, nothing said of a freeze
    assert operator_api.post(f"/api/v1/nodes/{other.pk}/uncordon/", {}, format="json").status_code == 200
    assert "during_freeze" not in AuditEvent.objects.get(action="node.uncordon", target_id=str(other.pk)).changes


def test_a_second_window_of_the_same_name_is_a_400_naming_it(fleet: Fleet, admin_api: Any) -> None:
    assert admin_api.post(URL, _body(), format="json").status_code == 201
    again = admin_api.post(URL, _body(), format="json")
    assert again.status_code == 400 and "name" in again.json()["errors"]
    # a concurrent twin that passed the check before the first was stored: the constraint answers
    twin = ChangeWindow(name="weeknights", cron="0 1 * * *", duration_minutes=5, actors=["rollouts"])
    twin.full_clean = lambda *args, **kwargs: None  # type: ignore[method-assign]
    with pytest.raises(ValidationError, match="a window named 'weeknights' already exists"):
        windows.window_save(window=twin, actor="admin")
    assert ChangeWindow.objects.count() == 1
