"""The server refuses what the schema refuses, and takes what it allows: query parameters of lists
and reads are a 400 naming them when the schema would not take their value (never silently the
default), and date-times in every RFC 3339 form are read."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from apps.common.datetimes import parse_rfc3339
from tests.inventory.test_api_nodes import make_fleet

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("query", "name"), [
    ("offset=abc", "offset"), ("offset=-1", "offset"), ("offset=", "offset"),
    ("limit=0", "limit"), ("limit=ten", "limit"),
    ("since=", "since"), ("since=yesterday", "since"), ("until=2026-13-01T00:00:00Z", "until"),
    ("chatter=null", "chatter"), ("chatter=true&chatter=false", "chatter"),
    ("count=AAA", "count"), ("count=", "count"), ("count=exact&count=exact", "count"),
])
def test_a_bad_list_parameter_is_a_400_naming_it(viewer_api: Any, query: str, name: str) -> None:
    r = viewer_api.get(f"/api/v1/audit-events/?{query}")
    assert r.status_code == 400, r.content
    assert list(r.json()["errors"]) == [name], r.json()


@pytest.mark.parametrize(("path", "query", "names"), [
    ("/api/v1/nodes/", "stat=active", ["stat"]),  # a typo of state: not the unfiltered list
    ("/api/v1/nodes/", "state=active&tier_name=x&zz=1", ["tier_name", "zz"]),
    ("/api/v1/me/", "verbose=1", ["verbose"]),  # an operation that takes none
])
def test_a_query_parameter_the_operation_does_not_take_is_a_400_naming_it(
        viewer_api: Any, path: str, query: str, names: list[str]) -> None:
    make_fleet()
    r = viewer_api.get(f"{path}?{query}")
    assert r.status_code == 400, r.content
    assert sorted(r.json()["errors"]) == names, r.json()
    assert "not a parameter of this operation" in r.json()["errors"][names[0]][0]
    assert r["X-API-Version"]


def test_every_parameter_the_schema_names_is_taken(viewer_api: Any) -> None:
    make_fleet()
    for query in ("state=active&tier=1&ordering=hostname&search=n&limit=5&offset=0&count=exact",
                  "format=json"):
        r = viewer_api.get(f"/api/v1/nodes/?{query}")
        assert r.status_code == 200, (query, r.content)


def test_a_limit_past_the_largest_page_gets_the_largest_page(viewer_api: Any) -> None:
    make_fleet()
    r = viewer_api.get("/api/v1/racks/?limit=5000")
    assert r.status_code == 200, r.content
    assert "limit=1000" in (r.json()["next"] or "limit=1000")


def test_an_id_no_object_has_matches_nothing(viewer_api: Any) -> None:
    r = viewer_api.get("/api/v1/quarantines/?module=987654")
    assert r.status_code == 200 and r.json()["count"] == 0, r.content
    r = viewer_api.get("/api/v1/quarantines/?module=abc")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["module"], r.content
    # Any whole number is an id as the schema types it (no bound): past PostgreSQL's bigint too.
    for query in ("/api/v1/quarantines/?module=213777755491054125056", "/api/v1/drains/?node=-7189144492370656256",
                  "/api/v1/enrolments/?hostname=a%00b"):  # and no stored text holds a NUL character
        r = viewer_api.get(query)
        assert r.status_code == 200 and r.json()["count"] == 0, (query, r.content)


def test_a_body_naming_an_object_that_does_not_exist_is_a_404_naming_the_field(admin_api: Any) -> None:
    make_fleet()
    r = admin_api.post("/api/v1/racks/", {"name": "r2", "power_budget_w": 100}, format="json")
    assert r.status_code == 201, r.content
    r = admin_api.post("/api/v1/nodes/", {"hostname": "n-x", "rack": "r404", "slot": 3, "tier": "hybrid_inference"},
                       format="json")
    assert r.status_code == 404 and list(r.json()["errors"]) == ["rack"], r.content
    # With a fault of another kind beside it, the request is malformed: a 400 naming both.
    r = admin_api.post("/api/v1/nodes/", {"hostname": "n-x", "rack": "r404", "slot": -1, "tier": "hybrid_inference"},
                       format="json")
    assert r.status_code == 400 and set(r.json()["errors"]) == {"rack", "slot"}, r.content


def test_the_what_if_query_states_its_bounds_and_refuses_both_traffic_forms_with_a_409(viewer_api: Any) -> None:
    r = viewer_api.get("/api/v1/planner/what-if/?concurrent_users=0")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["concurrent_users"], r.content
    r = viewer_api.get("/api/v1/planner/what-if/?requests_per_s=1&concurrent_users=2&request_interval_s=1")
    assert r.status_code == 409 and list(r.json()["errors"]) == ["requests_per_s"], r.content
    r = viewer_api.post("/api/v1/planner/what-if/", {"requests_per_s": 1, "concurrent_users": 2,
                                                     "request_interval_s": 1}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["requests_per_s"], r.content


@pytest.mark.parametrize(("url", "minutes"), [
    ("/api/v1/live/figures/fleet/", "5"), ("/api/v1/live/figures/fleet/", "abc"), ("/api/v1/live/figures/fleet/", ""),
    ("/api/v1/fleet/snapshot/", "0"), ("/api/v1/fleet/snapshot/", "abc"), ("/api/v1/fleet/snapshot/", ""),
])
def test_a_time_range_outside_the_schema_is_a_400_naming_minutes(viewer_api: Any, url: str, minutes: str) -> None:
    r = viewer_api.get(url, {"minutes": minutes})
    assert r.status_code == 400 and list(r.json()["errors"]) == ["minutes"], r.content


def test_the_snapshot_takes_nodes_true_or_false_only(viewer_api: Any) -> None:
    assert viewer_api.get("/api/v1/fleet/snapshot/?nodes=false").status_code == 200
    r = viewer_api.get("/api/v1/fleet/snapshot/?nodes=yes")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["nodes"], r.content


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-05T10:00:00Z", dt.datetime(2026, 12, 5, 10, tzinfo=dt.UTC)),
    ("2026-12-05t10:00:00z", dt.datetime(2026, 12, 5, 10, tzinfo=dt.UTC)),
    ("2016-12-31T23:59:60Z", dt.datetime(2017, 1, 1, tzinfo=dt.UTC)),
    ("2016-12-31T23:59:60.5+00:00", dt.datetime(2017, 1, 1, tzinfo=dt.UTC)),
    ("2026-12-05T10:00:00.123456789+01:00", dt.datetime(2026, 12, 5, 9, 0, 0, 123456, tzinfo=dt.UTC)),
    ("yesterday", None),
])
def test_rfc_3339_date_times_are_read(text: str, expected: dt.datetime | None) -> None:
    assert parse_rfc3339(text) == expected


def test_a_time_filter_reads_rfc_3339_forms_django_does_not(viewer_api: Any) -> None:
    r = viewer_api.get("/api/v1/audit-events/", {"since": "2016-12-31t23:59:60z"})
    assert r.status_code == 200, r.content
