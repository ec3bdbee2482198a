"""The API's schema class (``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]``): every operation documents the
error answers it can give, each with the one error shape (``apps.common.serializers.ErrorSerializer``,
written by ``apps.common.errors.exception_handler``), derived from what the view declares:

- 400: any operation (a query parameter it does not take is refused by name, ``apps.common.query``),
  and a request body or query or header parameters it validates (all but ``ordering`` and ``search``);
- 401: the view's first authenticator names a scheme (``WWW-Authenticate``); 403: a permission check
  (a role, or a node agent's key);
- 404: a path parameter (the object it names may not exist), or a request body that names objects
  (related fields, or the view's ``body_references``): an id or key no object has
  (``apps.common.errors.MISSING``);
- 406: any operation (an ``Accept`` header with no media type the API answers in);
- 409: what the view declares in ``conflicts`` (action or method → when), and deletes of objects
  other rows still refer to (``on_delete=PROTECT``: ``ProtectedError`` is a 409);
- 413, 415: a request body (over ``MAX_BODY_BYTES``; a ``Content-Type`` the operation does not read);
- 422: the ``Idempotency-Key`` header (the key reused for another request);
- 429 with ``Retry-After``: writes on views throttled by ``WriteThrottle``.

Request bodies state what the server enforces beyond drf-spectacular's mapping: a serializer's
``schema_rules`` (JSON Schema keywords, e.g. ``anyOf``: the rule its ``validate`` enforces between
fields), a list's bounds (``many=True``), a decimal's digits, and text that must hold a non-blank
character (DRF trims it) and no NUL character.

A status the view documents itself (``extend_schema(responses=...)``, e.g. a 409 with the numbers of a
refusal) is kept; one it documents without a body gets the error shape.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.validators import RegexValidator
from django.db import models
from drf_spectacular import openapi
from drf_spectacular.plumbing import force_instance, get_view_model
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.relations import ManyRelatedField, RelatedField

from apps.common.serializers import ErrorSerializer
from apps.common.throttling import WriteThrottle

IDEMPOTENCY_HEADER = "Idempotency-Key"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

DESCRIPTIONS = {
    400: ("Bad input (a field, or a query parameter the operation does not take): `detail` says what, `errors` "
          "names each field (e.g. `items[3].slot`) with its messages"),
    401: "No credentials, or credentials the API does not recognise (unknown, revoked or expired)",
    403: "Credentials recognised, but not allowed to do this: `detail` names the role it needs",
    404: "No such object",
    406: "The Accept header names no media type the API answers in",
    409: "Conflicts with the current state: `detail` says what",
    413: "Request body over the size limit (MAX_BODY_BYTES)",
    415: "A Content-Type the operation does not read",
    422: "The Idempotency-Key was used for another request",
    429: "Over the write limit (API_WRITE_RATE); Retry-After says when to send again",
}
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer", "minimum": 0},
                               "description": "Seconds until the limit lets the request through"}}


def _names_objects(field: Any) -> bool:
    """Whether a request serializer (or one of its fields) takes references to other objects."""
    if isinstance(field, serializers.ListSerializer):
        return _names_objects(field.child)
    if isinstance(field, serializers.Serializer):
        return any(_names_objects(f) for f in field.fields.values() if not f.read_only)
    if isinstance(field, serializers.ListField | serializers.DictField):
        return _names_objects(field.child)
    return isinstance(field, RelatedField | ManyRelatedField)


def _decimal_pattern(field: serializers.DecimalField) -> str | None:
    """The pattern of a decimal sent as a string, as the server reads it: at least one digit (drf-spectacular's
    own pattern allows "", "-" and "."), the field's whole and decimal digits, no sign when its minimum is
    0 or more, and, for a minimum of 0.1 (or 0.01, ...), a non-zero digit at or before that place. None for
    a minimum the pattern cannot state (the schema keeps drf-spectacular's)."""
    whole, places = field.max_whole_digits, field.decimal_places
    if whole is None or places is None or whole < 1:
        return None
    fraction = rf"(?:\.\d{{0,{places}}})?" if places else ""
    low = field.min_value
    if low is None or low < 0:
        return rf"^-?(?:\d{{1,{whole}}}{fraction}|\.\d{{1,{places}}})$" if places else rf"^-?\d{{1,{whole}}}$"
    if low == 0:
        return rf"^(?:\d{{1,{whole}}}{fraction}|\.\d{{1,{places}}})$" if places else rf"^\d{{1,{whole}}}$"
    exponent = Decimal(low).log10()
    if exponent != exponent.to_integral_value() or not -places <= exponent <= 0:
        return None
    k = -int(exponent)  # the value has a non-zero digit in its whole part or in its first k decimals
    nonzero_whole = rf"[1-9]\d{{0,{whole - 1}}}{fraction}"
    nonzero_fraction = [rf"0?\.\d{{{j}}}[1-9]\d{{0,{places - j - 1}}}" for j in range(k)]
    return "^(?:" + "|".join([nonzero_whole, *nonzero_fraction]) + ")$"


def _protected(model: type[models.Model] | None) -> bool:
    """Whether other rows may refer to a ``model`` row in a way that refuses its delete."""
    if model is None:
        return False
    return any(getattr(rel, "on_delete", None) in (models.PROTECT, models.RESTRICT)
               for rel in model._meta.related_objects)


class AutoSchema(openapi.AutoSchema):
    def get_operation(self, path: str, path_regex: str, path_prefix: str, method: str,
                      registry: Any) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        responses: dict[str, Any] = operation["responses"]
        for code, description in self.error_statuses(operation).items():
            responses.setdefault(str(code), self._error_response(code, description))
        for key, response in responses.items():
            if key.isdigit() and int(key) >= 400 and "content" not in response:  # documented without a body
                responses[key] = {**self._error_response(int(key), response.get("description") or ""),
                                  **{k: v for k, v in response.items() if k == "headers"}}
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.DecimalField) and "pattern" in schema:
            schema["pattern"] = _decimal_pattern(field) or schema["pattern"]
        if (isinstance(field, serializers.CharField) and direction == "request" and schema.get("type") == "string"
                and not {"pattern", "format", "enum"} & schema.keys()
                and not any(isinstance(v, RegexValidator) for v in field.validators)):  # its own pattern
            # DRF refuses NUL characters, and trims the text before refusing a blank one
            blank = field.allow_blank or not field.trim_whitespace
            schema["pattern"] = r"^[^\x00]*$" if blank else r"^[^\x00]*[^\s\x00][^\x00]*$"
        if isinstance(field, serializers.ListField) and not field.allow_empty and schema.get("type") == "array":
            schema["minItems"] = max(1, schema.get("minItems", 0))
        if isinstance(field, serializers.ListSerializer) and schema.get("type") == "array":
            # drf-spectacular leaves out the bounds of a list of objects (``many=True``) the server enforces
            low, high = getattr(field, "min_length", None), getattr(field, "max_length", None)
            if not field.allow_empty:
                schema["minItems"] = max(1, low or 0)
            elif low is not None:
                schema["minItems"] = low
            if high is not None:
                schema["maxItems"] = high
        return schema

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        rules = getattr(serializer, "schema_rules", None)
        return {**schema, **rules} if rules and direction == "request" else schema

    def _error_response(self, code: int, description: str) -> dict[str, Any]:
        response: dict[str, Any] = self._get_response_for_code(OpenApiResponse(ErrorSerializer, description),
                                                               str(code))
        if code == 429:
            response["headers"] = {**RETRY_AFTER, **response.get("headers", {})}
        return response

    def _action(self) -> str:
        return getattr(self.view, "action", None) or self.method.lower()

    def error_statuses(self, operation: dict[str, Any]) -> dict[int, str]:
        """The error answers of this operation, by status, with what each means here."""
        view, method = self.view, self.method
        parameters = operation.get("parameters", [])
        has_body = "requestBody" in operation
        out: dict[int, str] = {}
        out[400] = DESCRIPTIONS[400]  # at least a query parameter the operation does not take
        authenticators = view.get_authenticators()
        if authenticators and authenticators[0].authenticate_header(None):  # type: ignore[arg-type]
            out[401] = DESCRIPTIONS[401]
        if any(not isinstance(p, AllowAny) for p in view.get_permissions()):
            out[403] = DESCRIPTIONS[403]
        refers = has_body and (getattr(view, "body_references", None)
                               or _names_objects(force_instance(self.get_request_serializer())))
        if any(p["in"] == "path" for p in parameters):
            out[404] = DESCRIPTIONS[404] + ("; or an object the body names (`errors` names the field)" if refers
                                            else "")
        elif refers:
            out[404] = "An object the body names does not exist: `errors` names the field"
        out[406] = DESCRIPTIONS[406]
        conflicts: dict[str, str] = getattr(view, "conflicts", {})
        if self._action() in conflicts:
            out[409] = conflicts[self._action()]
        elif method == "DELETE" and _protected(get_view_model(view, emit_warnings=False)):
            out[409] = "Other objects still refer to this one: `detail` says how many"
        if has_body:
            out[413] = DESCRIPTIONS[413]
            out[415] = DESCRIPTIONS[415]
        if any(p["in"] == "header" and p["name"] == IDEMPOTENCY_HEADER for p in parameters):
            out[422] = DESCRIPTIONS[422]
        if method in WRITES and any(isinstance(t, WriteThrottle) for t in view.get_throttles()):
            out[429] = DESCRIPTIONS[429]
        return out
