"""/api/v1/audit-events/: the trail of API changes, read-only, newest first, filterable."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.inventory.models import Rack

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/audit-events/"


@pytest.fixture
def changes(admin_api: Any) -> dict[str, Any]:
    """Three API changes of a rack: create, update, delete, each with its own request id."""
    created = admin_api.post("/api/v1/racks/", {"name": "r7", "row": "C"}, format="json",
                             HTTP_X_REQUEST_ID="req-1")
    rack_id = created.json()["id"]
    updated = admin_api.patch(f"/api/v1/racks/{rack_id}/", {"row": "D"}, format="json")
    deleted = admin_api.delete(f"/api/v1/racks/{rack_id}/")
    return {"rack_id": rack_id, "responses": [created, updated, deleted]}


def test_every_api_change_is_in_the_trail_newest_first(viewer_api, admin_user, changes):  # type: ignore[no-untyped-def]
    response = viewer_api.get(EVENTS)

    assert response.status_code == 200
    events = response.json()["results"]
    assert [e["action"] for e in events] == ["rack.delete", "rack.update", "rack.create"]
    create, update, delete = reversed(events)
    assert all(e["actor"] == admin_user.pk and e["actor_name"] == admin_user.username for e in events)
    assert all(e["target_type"] == "rack" and e["target_id"] == str(changes["rack_id"]) for e in events)
    assert create["changes"]["name"] == [None, "r7"]
    assert update["changes"] == {"row": ["C", "D"]}
    assert delete["changes"]["name"] == ["r7", None]
    assert [e["request_id"] for e in (create, update, delete)] == [
        r["X-Request-ID"] for r in changes["responses"]]
    assert create["request_id"] == "req-1"
    assert {e["source"] for e in events} == {"api"}


def test_it_filters_the_trail(viewer_api, changes):  # type: ignore[no-untyped-def]
    def actions(**params: Any) -> list[str]:
        response = viewer_api.get(EVENTS, params)
        assert response.status_code == 200, response.json()
        return [e["action"] for e in response.json()["results"]]

    assert actions(action="rack.update") == ["rack.update"]
    assert actions(request_id="req-1") == ["rack.create"]
    assert actions(actor="test-admin", target_type="rack", ordering="time") == [
        "rack.create", "rack.update", "rack.delete"]
    assert actions(actor="someone-else") == []
    assert actions(search="r7", limit=1) == ["rack.delete"]


def test_a_bad_time_filter_is_a_400(viewer_api, changes):  # type: ignore[no-untyped-def]
    response = viewer_api.get(EVENTS, {"since": "yesterday"})
    assert response.status_code == 400
    assert response.json()["errors"]["since"] == ["Enter a valid date/time."]


def test_the_trail_cannot_be_written_through_the_api(admin_api, changes):  # type: ignore[no-untyped-def]
    event = AuditEvent.objects.first()
    assert event is not None
    assert admin_api.post(EVENTS, {"action": "x"}, format="json").status_code == 405
    assert admin_api.patch(f"{EVENTS}{event.pk}/", {"reason": "x"}, format="json").status_code == 405
    assert admin_api.delete(f"{EVENTS}{event.pk}/").status_code == 405
    assert AuditEvent.objects.count() == 3


def test_rejected_changes_leave_no_trail(admin_api, changes):  # type: ignore[no-untyped-def]
    Rack.objects.create(name="taken")
    response = admin_api.post("/api/v1/racks/", {"name": "taken"}, format="json")
    assert response.status_code == 400
    assert AuditEvent.objects.count() == 3


def test_anonymous_callers_cannot_read_the_trail(anon_api, changes):  # type: ignore[no-untyped-def]
    assert anon_api.get(EVENTS).status_code == 401


def test_one_event_reads_like_its_list_item(viewer_api, changes):  # type: ignore[no-untyped-def]
    for item in viewer_api.get(EVENTS).json()["results"]:
        assert viewer_api.get(f"{EVENTS}{item['id']}/").json() == item
