"""The whole API fuzzed from its OpenAPI schema (schemathesis): every operation, at least 25
generated requests as an admin and 8 each as an operator and as a viewer. No answer is a server
error, and every answer is one the schema documents: its status code, its content type and its body
(error answers in the one error shape, ``apps.common.openapi``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.accounts.services import user_ensure
from tests.inventory.test_api_nodes import make_fleet

pytestmark = pytest.mark.heavy
EXAMPLES = 25
# A viewer's writes stop at the permission check before any body is read, and its reads answer as the
# admin's do: fewer examples find the same answers, and keep the suite inside CI's time box. An
# operator's writes pass the role check where an operator may act, so they reach the body: the same
# few examples, beside the admin's many.
VIEWER_EXAMPLES = 8
OPERATOR_EXAMPLES = 8


def _schema() -> Any:
    """The schema the API serves at /api/schema/, generated in-process (no request, no database),
    called through Django's WSGI handler in the test's transaction."""
    raw = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(raw)))
    loaded.app = get_wsgi_application()
    return loaded


schema = _schema()


@pytest.fixture(autouse=True)
def _fleet(db: Any) -> Iterator[None]:
    make_fleet()  # a rack, tiers, module types and a node, so ids in paths can exist
    # As Django's test client does: a request must not close the connection holding the test's
    # transaction.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def _auth(role: str) -> str:
    user, _ = user_ensure(username=f"fuzz-{role}", password=f"fuzz-{role}-pw-1", role=role)
    return f"Token {Token.objects.get_or_create(user=user)[0].key}"


@pytest.fixture
def admin_auth(db: Any) -> str:
    return _auth("admin")


@pytest.fixture
def operator_auth(db: Any) -> str:
    return _auth("operator")


@pytest.fixture
def viewer_auth(db: Any) -> str:
    return _auth("viewer")


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# A failure reports the first failing request (derandomized: it reproduces); no shrinking, which costs
# minutes per failing operation.
FUZZ = settings(max_examples=EXAMPLES, phases=[Phase.explicit, Phase.generate], deadline=None, derandomize=True,
                database=None, suppress_health_check=list(HealthCheck))
VIEWER_FUZZ = settings(FUZZ, max_examples=VIEWER_EXAMPLES)
OPERATOR_FUZZ = settings(FUZZ, max_examples=OPERATOR_EXAMPLES)


@schema.parametrize()
@FUZZ
def test_every_operation_answers_an_admin_as_documented(case: Any, admin_auth: str) -> None:
    case.call_and_validate(headers={"Authorization": admin_auth}, checks=CHECKS)


@schema.parametrize()
@OPERATOR_FUZZ
def test_every_operation_answers_an_operator_as_documented(case: Any, operator_auth: str) -> None:
    case.call_and_validate(headers={"Authorization": operator_auth}, checks=CHECKS)


@schema.parametrize()
@VIEWER_FUZZ
def test_every_operation_answers_a_viewer_as_documented(case: Any, viewer_auth: str) -> None:
    case.call_and_validate(headers={"Authorization": viewer_auth}, checks=CHECKS)
