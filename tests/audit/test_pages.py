"""The audit log page: filters, pagination, login."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.audit.services import audit_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def events(db: Any) -> list[AuditEvent]:
    with transaction.atomic():
        made = [
            audit_record(actor="alice", action="node.update", target_type="node", target_id="7",
                         target_repr="n-r1-07", reason="raise the power budget",
                         changes={"power_budget_w": [150, 180]}),
            audit_record(actor="bob", action="node.create", target_type="node", target_id="8",
                         target_repr="n-r1-08"),
            audit_record(actor="bob", action="versioncombination.pinned", target_type="versioncombination",
                         target_id="3", target_repr="Axon AX-40: driver 2.3.1"),
        ]
    # Spread them in time: alice's edit a day ago.
    AuditEvent.objects.filter(pk=made[0].pk).update(time=timezone.now() - timedelta(days=1))
    return made


@pytest.fixture
def viewer(viewer_user: User) -> Client:
    client = Client()
    client.force_login(viewer_user)
    return client


def test_it_sends_anonymous_users_to_login(client: Client) -> None:
    response = client.get("/audit/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/audit/"


def test_it_lists_records_newest_first_with_changes(viewer: Client, events: list[AuditEvent]) -> None:
    response = viewer.get("/audit/")
    assert response.status_code == 200
    assert [e.target_repr for e in response.context["events"]] == [
        "Axon AX-40: driver 2.3.1", "n-r1-08", "n-r1-07"]
    body = response.content.decode()
    assert "raise the power budget" in body and "power_budget_w" in body and "180" in body
    assert 'href="/nodes/7/"' in body


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("actor=bob", ["Axon AX-40: driver 2.3.1", "n-r1-08"]),
        ("action=node.update", ["n-r1-07"]),
        ("target_type=versioncombination", ["Axon AX-40: driver 2.3.1"]),
        ("actor=bob&target_type=node", ["n-r1-08"]),
        ("target_type=node&target_id=7", ["n-r1-07"]),
    ],
)
def test_it_filters_records(viewer: Client, events: list[AuditEvent], query: str, expected: list[str]) -> None:
    response = viewer.get("/audit/?" + query)
    assert [e.target_repr for e in response.context["events"]] == expected


def test_it_filters_by_time_window_from_the_form(viewer: Client, events: list[AuditEvent]) -> None:
    # The form's datetime-local inputs send "YYYY-MM-DDTHH:MM".
    cut = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    since = viewer.get(f"/audit/?since={cut}")
    assert [e.target_repr for e in since.context["events"]] == ["Axon AX-40: driver 2.3.1", "n-r1-08"]
    until = viewer.get(f"/audit/?until={cut}")
    assert [e.target_repr for e in until.context["events"]] == ["n-r1-07"]
    assert f'value="{cut}"' in until.content.decode()


def test_it_offers_the_actions_and_target_types_in_the_log(viewer: Client, events: list[AuditEvent]) -> None:
    body = viewer.get("/audit/").content.decode()
    assert '<option value="versioncombination.pinned"' in body
    assert '<option value="versioncombination"' in body


def test_it_reports_a_bad_time_instead_of_ignoring_it(viewer: Client, events: list[AuditEvent]) -> None:
    response = viewer.get("/audit/?since=yesterday")
    assert list(response.context["events"]) == []
    assert "Filter errors" in response.content.decode()


def test_it_paginates_records(viewer: Client, db: Any) -> None:
    with transaction.atomic():
        for i in range(120):
            audit_record(actor="system", action="node.update", target_type="node", target_id=str(i),
                         target_repr=f"n-{i:03d}")
    first = viewer.get("/audit/?actor=system")
    assert len(first.context["events"]) == 50 and first.context["paginator"].num_pages == 3
    assert "?actor=system&amp;page=2" in first.content.decode()
    last = viewer.get("/audit/?actor=system&page=3")
    assert [e.target_repr for e in last.context["events"]][-1] == "n-000"


def test_it_treats_an_empty_filter_form_as_no_filter(viewer: Client, events: list[AuditEvent]) -> None:
    response = viewer.get("/audit/?actor=&action=&target_type=&since=&until=&page=1")
    assert len(response.context["events"]) == 3
    assert "match the filters" not in response.content.decode()


def test_it_hides_agent_and_system_chatter_unless_asked(viewer: Client, events: list[AuditEvent],
                                                        viewer_api: Any) -> None:
    audit_record(actor="agent:n-r1-08", action="node_command.finish", target_type="node", target_id="8",
                 target_repr="n-r1-08", reason="install_versions: ok")
    audit_record(actor="system", action="agent_token.rotate", target_type="node", target_id="8",
                 target_repr="n-r1-08")

    def shown(query: str) -> list[str]:
        response = viewer.get(f"/audit/{query}")
        assert response.status_code == 200
        return [e.action for e in response.context["events"]]

    assert shown("") == ["versioncombination.pinned", "node.create", "node.update"]
    assert 'name="chatter"' in viewer.get("/audit/").content.decode()
    everything = shown("?chatter=true")
    assert everything[:2] == ["agent_token.rotate", "node_command.finish"] and len(everything) == 5
    assert shown("?action=node_command.finish") == ["node_command.finish"]  # named: shown
    # the API returns every record unless asked to leave the chatter out
    assert len(viewer_api.get("/api/v1/audit-events/").json()["results"]) == 5
    quiet = viewer_api.get("/api/v1/audit-events/?chatter=false").json()["results"]
    assert [e["action"] for e in quiet] == ["versioncombination.pinned", "node.create", "node.update"]
