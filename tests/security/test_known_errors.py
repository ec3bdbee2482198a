"""Answers that were server errors: each is now a 400 naming the field or the problem, nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.operations.api.serializers import DEADLINE_S_MAX
from apps.operations.models import Drain
from apps.telemetry.models import IngestBatch, NodeSample
from tests.operations.conftest import Fleet as OpsFleet
from tests.operations.conftest import fleet, state_of  # noqa: F401  (fixture)
from tests.telemetry.conftest import Fleet as TelemetryFleet

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("action", ["maintenance", "drain"])
@pytest.mark.parametrize("deadline", [10366393834703, -1, DEADLINE_S_MAX + 1, "soon"])
def test_a_deadline_out_of_range_is_a_400_naming_it_and_the_range(fleet: OpsFleet, operator_api: Any,  # noqa: F811
                                                                   action: str, deadline: Any) -> None:
    node = fleet.node("n-1")
    r = operator_api.post(f"/api/v1/nodes/{node.pk}/{action}/", {"reason": "x", "deadline_s": deadline},
                          format="json")
    assert r.status_code == 400, r.content
    assert r.json()["errors"] == {"deadline_s": [f"must be a whole number of seconds, 0-{DEADLINE_S_MAX} (7 days)"]}
    assert not Drain.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="node.").exists()
    assert state_of(node) == NodeState.ACTIVE


def test_a_deadline_at_the_bound_is_taken(fleet: OpsFleet, operator_api: Any) -> None:  # noqa: F811
    node = fleet.node("n-1")
    r = operator_api.post(f"/api/v1/nodes/{node.pk}/maintenance/", {"reason": "x", "deadline_s": DEADLINE_S_MAX},
                          format="json")
    assert r.status_code == 202, r.content
    assert Drain.objects.count() == 1


def test_ten_thousand_nested_brackets_in_telemetry_are_a_400_naming_it(db: Any) -> None:
    f = TelemetryFleet()
    body = b"[" * 10_000 + b"]" * 10_000
    r = f.client(f.key_a).post("/api/v1/telemetry/", body, content_type="application/json")
    assert r.status_code == 400, r.content
    assert "nested too deeply" in r.json()["detail"]
    assert not IngestBatch.objects.exists() and not NodeSample.objects.exists()


def test_ten_thousand_nested_brackets_in_an_api_write_are_a_400_naming_it(admin_api: Any) -> None:
    body = b"[" * 10_000 + b"]" * 10_000
    r = admin_api.post("/api/v1/racks/", body, content_type="application/json")
    assert r.status_code == 400, r.content
    assert "nested too deeply" in r.json()["detail"]


@pytest.mark.parametrize("url", ["/api/v1/audit-events/", "/api/v1/autoscaler-decisions/"])
@pytest.mark.parametrize("since", ["2102-06-19T10:48:31-19:50", "0001-01-01T00:00:00+01:00"])
def test_a_time_filter_past_what_postgresql_takes_is_a_400_or_utc(admin_api: Any, url: str, since: str) -> None:
    """Found by the schema fuzzer: an offset past ±15:59 (valid ISO 8601) was a 500 from PostgreSQL."""
    r = admin_api.get(url, {"since": since})
    if since.startswith("0001"):
        assert r.status_code == 400 and list(r.json()["errors"]) == ["since"], r.content
    else:
        assert r.status_code == 200, r.content


@pytest.mark.django_db
def test_an_offset_past_a_bigint_is_named_not_a_server_error(admin_api: Any) -> None:
    r = admin_api.get("/api/v1/framework-releases/?offset=124648180106022223872&limit=5")
    assert r.status_code == 400 and "offset" in r.json()["errors"], r.json()
    r = admin_api.get("/api/v1/nodes/?offset=124648180106022223872")
    assert r.status_code == 400 and r.json()["errors"]["offset"] == [
        "must be a whole number, 0-1000000000000, not 124648180106022223872"]


@pytest.mark.django_db
def test_health_findings_take_any_time_offset_and_any_id_without_a_server_error(operator_api: Any) -> None:
    r = operator_api.get("/api/v1/health/findings/?since=0995-05-19T07%3A22%3A55-16%3A24")  # read into UTC
    assert r.status_code == 200, r.content
    r = operator_api.post("/api/v1/health/findings/null%2Cnull/acknowledge/", {"reason": "0"}, format="json")
    assert r.status_code == 404, r.content
