"""The schema documents each operation's error answers, each with the one error shape
(``apps.common.openapi``): what the view declares decides which. And the API answers in that
shape where Django would answer a page (a path no API route matches)."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

# The error shape and the ones that extend it (a conflict's numbers, a refused telemetry batch).
ERROR_SHAPES = {"Error", "Conflict", "RolloutConflict", "TelemetryRejection"}
METHODS = ("get", "post", "put", "patch", "delete")


@cache
def _schema() -> dict[str, Any]:
    raw = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(raw))  # type: ignore[no-any-return]


def _op(path: str, method: str) -> dict[str, Any]:
    return _schema()["paths"][path][method]  # type: ignore[no-any-return]


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(p, m, op) for p, item in _schema()["paths"].items() for m, op in item.items() if m in METHODS]


def test_every_error_answer_is_a_code_with_the_error_shape() -> None:
    schemas = _schema()["components"]["schemas"]
    assert schemas["Error"]["required"] == ["detail"]
    for name in ERROR_SHAPES:
        assert "detail" in schemas[name]["properties"], name
    for path, method, op in _operations():
        for code, response in op["responses"].items():
            assert code.isdigit(), (method, path, code)  # no 4XX ranges
            if int(code) >= 400:
                assert "content" in response, (method, path, code)
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.rsplit("/", 1)[1] in ERROR_SHAPES, (method, path, code, ref)


def test_every_operation_documents_credentials_roles_and_accept() -> None:
    """Every operation but the two a joining agent calls before it holds any key (it proves itself in
    the body: the bootstrap token, then its enrolment's secret), which read no credentials: no 401
    can come from them, their schema says anyone may call (``security: [{}]``) and 403 refuses."""
    anonymous = {("post", "/api/v1/enrolments/"), ("post", "/api/v1/enrolments/{id}/claim/")}
    for path, method, op in _operations():
        assert {"403", "406"} <= set(op["responses"]), (method, path)
        if (method, path) in anonymous:
            assert "401" not in op["responses"] and op["security"] == [{}], (method, path)
        else:
            assert "401" in op["responses"], (method, path)


def test_paths_with_an_id_document_404_and_every_operation_400() -> None:
    assert "404" in _op("/api/v1/nodes/{id}/", "get")["responses"]
    assert "404" not in _op("/api/v1/nodes/", "get")["responses"]
    assert "400" in _op("/api/v1/nodes/", "get")["responses"]  # filters and offset are validated
    # A query parameter an operation does not take is refused by name, whatever the operation.
    assert "400" in _op("/api/v1/nodes/{id}/", "get")["responses"]
    assert "400" in _op("/api/v1/me/", "get")["responses"]
    assert {"400", "413", "415"} <= set(_op("/api/v1/racks/", "post")["responses"])


def test_bodies_that_name_objects_document_404() -> None:
    assert "404" in _op("/api/v1/nodes/", "post")["responses"]  # rack and tier are references
    assert "404" in _op("/api/v1/nodes/actions/", "post")["responses"]  # node ids (the view says so)
    assert "404" not in _op("/api/v1/racks/", "post")["responses"]  # no reference in a rack's body
    assert "body names" in _op("/api/v1/nodes/{id}/", "patch")["responses"]["404"]["description"]


def test_request_bodies_state_what_the_server_enforces() -> None:
    schemas = _schema()["components"]["schemas"]
    # a decimal: at least one digit, no sign below its minimum of 0.10
    clock = re.compile(schemas["NodeRequest"]["properties"]["cpu_clock_ghz"]["pattern"])
    assert [t for t in ("3", "0.1", ".5", "99.99", "0", "0.09", "-1", "", ".", "100") if clock.match(t)] == \
        ["3", "0.1", ".5", "99.99"]
    # a list of objects: its bounds
    items = schemas["NodeBulkRequest"]["properties"]["items"]
    assert (items["minItems"], items["maxItems"]) == (1, 1000)
    # text that DRF trims and refuses blank, and NUL characters anywhere
    reason = re.compile(schemas["FreezeRequest"]["properties"]["reason"]["pattern"])
    assert reason.match("x") and not reason.match("  ") and not reason.match("a\x00")
    # rules between fields (a serializer's schema_rules), in requests only
    assert "anyOf" in schemas["WhatIfInputRequest"] and "anyOf" not in schemas.get("WhatIfInput", {})
    assert "anyOf" in schemas["AgentTokenIssueRequest"] and "anyOf" in schemas["BootstrapScopeRequest"]


def test_writes_document_the_write_limit_with_retry_after() -> None:
    limited = _op("/api/v1/racks/{id}/", "delete")["responses"]["429"]
    assert "Retry-After" in limited["headers"]
    assert "429" not in _op("/api/v1/racks/", "get")["responses"]  # reads are not limited


def test_conflicts_come_from_the_view_or_from_protected_references() -> None:
    # declared by the view
    assert "409" in _op("/api/v1/version-combinations/{id}/set-state/", "post")["responses"]
    assert "409" in _op("/api/v1/vector-runs/{id}/cancel/", "post")["responses"]
    assert "409" not in _op("/api/v1/version-combinations/{id}/", "patch")["responses"]
    # a rack that nodes are in cannot be deleted; nothing refers to an external endpoint
    assert "409" in _op("/api/v1/racks/{id}/", "delete")["responses"]
    assert "409" not in _op("/api/v1/external-endpoints/{id}/", "delete")["responses"]
    # a rule the schema cannot type: a time that must be in the future, an end after its start
    assert "409" in _op("/api/v1/health/silences/", "post")["responses"]
    assert "409" in _op("/api/v1/freezes/", "post")["responses"]
    # the view's own 409 (with the capacity numbers) is kept
    cordon = _op("/api/v1/nodes/{id}/cordon/", "post")["responses"]["409"]
    assert cordon["content"]["application/json"]["schema"]["$ref"].endswith("/Conflict")


def test_idempotent_actions_document_a_reused_key() -> None:
    assert "422" in _op("/api/v1/nodes/{id}/drain/", "post")["responses"]
    assert "422" not in _op("/api/v1/nodes/{id}/gray/", "post")["responses"]


@pytest.mark.django_db
def test_a_path_no_api_route_matches_is_a_404_in_the_error_shape(viewer_api: Any) -> None:
    # <int:pk> routes do not match "abc"; router routes do not match an id with a dot
    for url in ("/api/v1/live/nodes/abc/", "/api/v1/agent-tokens/0.5/", "/api/v1/no-such-thing/"):
        r = viewer_api.get(url)
        assert r.status_code == 404, url
        assert r["Content-Type"] == "application/json", url
        assert r.json() == {"detail": "not found: no API route matches this path"}, url


@pytest.mark.django_db
def test_a_page_path_no_route_matches_is_still_the_page(viewer_api: Any) -> None:
    r = viewer_api.get("/no-such-page/")
    assert r.status_code == 404
    assert r["Content-Type"].startswith("text/html")
