"""Hostile bodies at JSON API writes: node bulk create (admin) and a node action (cordon, operator).
Each is refused with a 4xx naming the field or the problem and writes nothing (row counts);
duplicated keys follow the same rule as the telemetry ingest: the last wins."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from apps.agents.models import NodeCommand
from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.inventory.models import Node
from apps.operations.models import Drain
from tests.inventory.test_api_nodes import make_fleet, node_body
from tests.operations.conftest import Fleet as OpsFleet
from tests.operations.conftest import fleet as ops_fleet  # noqa: F401  (fixture)
from tests.operations.conftest import state_of
from tests.security.hostile import MB, NESTED, duplicate_key, encode, replace_value

pytestmark = pytest.mark.django_db
BULK = "/api/v1/nodes/bulk/"


@pytest.fixture
def fleet(db: Any) -> dict[str, Any]:
    return make_fleet()


def valid() -> bytes:
    return encode({"items": [node_body(hostname="n-r1-02", slot=2), node_body(hostname="n-r1-03", slot=3)]})


def refused(api: APIClient, body: bytes, status: int = 400, url: str = BULK) -> dict[str, Any]:
    nodes, events = Node.objects.count(), AuditEvent.objects.count()
    r = api.post(url, body, content_type="application/json")
    assert r.status_code == status, r.content
    assert Node.objects.count() == nodes and AuditEvent.objects.count() == events
    return r.json()


def test_the_valid_body_is_taken(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    r = admin_api.post(BULK, valid(), content_type="application/json")
    assert r.status_code == 201, r.content
    assert Node.objects.count() == 3


def test_truncated_json(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    body = valid()
    assert "the body is not valid JSON" in refused(admin_api, body[: len(body) // 2])["detail"]


def test_nested_ten_thousand_deep(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    assert "nested too deeply" in refused(admin_api, NESTED)["detail"]


def test_nested_ten_thousand_deep_inside_a_field(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    assert "nested too deeply" in refused(admin_api, replace_value(valid(), "labels", NESTED))["detail"]


def test_ten_megabytes_of_whitespace(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    data = refused(admin_api, b" " * (10 * MB), status=413)
    assert f"exceeds the limit of {settings.MAX_BODY_BYTES} bytes" in data["detail"]


def test_whitespace_under_the_body_limit(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    assert "the body is not valid JSON" in refused(admin_api, b" \n\t\r" * MB)["detail"]


def test_invalid_utf8(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    data = refused(admin_api, valid().replace(b'"n-r1-02"', b'"n-\xff\xfe"'))
    assert "not valid UTF-8" in data["detail"]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_literals(admin_api: APIClient, fleet: dict[str, Any], literal: bytes) -> None:
    data = refused(admin_api, replace_value(valid(), "slot", literal))
    assert "the body is not valid JSON" in data["detail"]


def test_a_number_past_a_double_names_its_field(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    data = refused(admin_api, replace_value(valid(), "cpu_clock_ghz", b"1e999"))
    assert data["errors"] == {"items[0].cpu_clock_ghz": ["must be a finite number"]}


def test_duplicated_keys_the_last_wins(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    r = admin_api.post(BULK, duplicate_key(valid(), "slot", b"99", b"7"), content_type="application/json")
    assert r.status_code == 201, r.content
    assert Node.objects.get(hostname="n-r1-02").slot == 7


def test_duplicated_keys_the_last_is_the_one_checked(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    data = refused(admin_api, duplicate_key(valid(), "slot", b"7", b"-1"))
    assert list(data["errors"]) == ["items[0].slot"]


def test_an_integer_past_64_bits(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    data = refused(admin_api, replace_value(valid(), "slot", str(2**64).encode()))
    assert list(data["errors"]) == ["items[0].slot"]


def test_an_integer_of_a_thousand_digits(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    data = refused(admin_api, replace_value(valid(), "slot", b"9" * 1000))
    assert list(data["errors"]) == ["items[0].slot"]


def test_an_integer_of_ten_thousand_digits(admin_api: APIClient, fleet: dict[str, Any]) -> None:
    data = refused(admin_api, replace_value(valid(), "slot", b"9" * 10_000))
    assert "integer value out of range" in data["detail"]


# ---- a node action: timestamps (resume_after) -----------------------------------------------------


def cordon(api: APIClient, node: Node, body: bytes, status: int) -> dict[str, Any]:
    r = api.post(f"/api/v1/nodes/{node.pk}/cordon/", body, content_type="application/json")
    assert r.status_code == status, r.content
    if status >= 400:
        assert state_of(node) == NodeState.ACTIVE
        assert not Drain.objects.exists() and not NodeCommand.objects.exists()
        assert not AuditEvent.objects.filter(action__startswith="node.").exists()
    return r.json()


@pytest.mark.parametrize("when", ["1970-01-01T00:00:00Z", "0001-01-01T00:00:00Z"])
def test_a_resume_time_far_in_the_past(ops_fleet: OpsFleet, operator_api: APIClient, when: str) -> None:  # noqa: F811
    node = ops_fleet.node("n-1")
    # well formed, as the schema types it; the clock refuses it: the operation's documented 409
    data = cordon(operator_api, node, encode({"reason": "x", "resume_after": when}), 409)
    assert list(data["errors"]) == ["resume_after"] and "must be in the future" in data["errors"]["resume_after"][0]


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59Z", "2999-01-01T00:00:00Z"])
def test_a_resume_time_far_in_the_future(ops_fleet: OpsFleet, operator_api: APIClient, when: str) -> None:  # noqa: F811
    node = ops_fleet.node("n-1")
    # well formed, as the schema types it; the clock refuses it: the operation's documented 409
    data = cordon(operator_api, node, encode({"reason": "x", "resume_after": when}), 409)
    assert data["errors"] == {"resume_after": ["must be at most 90 days ahead"]}


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_resume_time_outside_the_years_in_utc(ops_fleet: OpsFleet, operator_api: APIClient,  # noqa: F811
                                               when: str) -> None:
    node = ops_fleet.node("n-1")
    data = cordon(operator_api, node, encode({"reason": "x", "resume_after": when}), 400)
    assert list(data["errors"]) == ["resume_after"]


def test_a_resume_time_within_the_window_is_taken(ops_fleet: OpsFleet, operator_api: APIClient) -> None:  # noqa: F811
    node = ops_fleet.node("n-1")
    when = (timezone.now() + dt.timedelta(days=3)).isoformat()
    cordon(operator_api, node, encode({"reason": "x", "resume_after": when}), 200)
    assert state_of(node) == NodeState.CORDONED


def test_duplicated_keys_in_an_action_the_last_wins(ops_fleet: OpsFleet, operator_api: APIClient) -> None:  # noqa: F811
    node = ops_fleet.node("n-1")
    body = duplicate_key(encode({"reason": "first", "override": False}), "reason", b'"first"', b'"second"')
    cordon(operator_api, node, body, 200)
    assert AuditEvent.objects.get(action="node.cordon").reason == "second"
