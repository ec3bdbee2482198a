"""The query parameters each API operation takes, read from the operation's own schema (what the
OpenAPI document says it takes), so that a parameter it does not take is refused by name rather than
ignored: a script that sends ``?stat=active`` for ``?state=active`` gets a 400 naming ``stat``, not
the whole unfiltered list it would otherwise act on.

Worked out once per view and method in each process, on the first request that carries a query
string (a few milliseconds: the view's schema, not the whole document)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from drf_spectacular.generators import EndpointEnumerator, SchemaGenerator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry
from drf_spectacular.settings import spectacular_settings

# DRF's own override of the answer's format (the browsable API's ``?format=json``): every view reads it.
ALWAYS = frozenset({"format"})

_lock = threading.Lock()
_endpoints: list[tuple[str, str, str, Callable[..., Any]]] | None = None
_taken: dict[tuple[Callable[..., Any], str], frozenset[str] | None] = {}


def _all_endpoints() -> list[tuple[str, str, str, Callable[..., Any]]]:
    global _endpoints
    if _endpoints is None:
        _endpoints = list(EndpointEnumerator().get_api_endpoints())
    return _endpoints


def _operation_parameters(callback: Callable[..., Any], method: str) -> frozenset[str] | None:
    for path, path_regex, endpoint_method, endpoint in _all_endpoints():
        if endpoint is not callback or endpoint_method != method:
            continue
        generator = SchemaGenerator()
        view = generator.create_view(callback, method)
        if not isinstance(view.schema, AutoSchema) or view.schema.is_excluded():
            return None  # left out of the schema (the schema's own view): not judged
        view.request = spectacular_settings.GET_MOCK_REQUEST(method, path, view, None)
        operation = view.schema.get_operation(path, path_regex, "", method, ComponentRegistry())
        if not operation:
            return None
        return frozenset(p["name"] for p in operation.get("parameters", []) if p["in"] == "query") | ALWAYS
    return None  # not an operation of the schema (the schema's own views, the docs page): not judged


def taken(callback: Callable[..., Any], method: str) -> frozenset[str] | None:
    """The query parameters the operation behind ``callback`` and ``method`` takes; None when the
    schema has no such operation."""
    method = "GET" if method == "HEAD" else method
    key = (callback, method)
    if key not in _taken:
        with _lock:
            if key not in _taken:
                _taken[key] = _operation_parameters(callback, method)
    return _taken[key]


def unknown(callback: Callable[..., Any], method: str, names: list[str]) -> tuple[list[str], frozenset[str]]:
    """The names among ``names`` the operation does not take (sorted), and what it takes."""
    allowed = taken(callback, method)
    if allowed is None:
        return [], frozenset()
    return sorted(set(names) - allowed), allowed - ALWAYS
