"""One error shape for the API: {"detail": str, "errors": {field: [msg]}}.

Model validation (Django ValidationError) becomes 400 with field messages,
state conflicts 409, oversized bodies 413. Bad input never becomes a 500.
A request whose only fault is that it names objects that do not exist (an id or a
natural key no object has: the code ``does_not_exist`` of DRF's related fields)
is well formed, as the schema types it: 404, with ``errors`` naming each field.
One refused only by a rule the schema cannot state (a time that must be in the
future, an end after its start, numbers telemetry has not given yet: the code
``conflict``) is a 409 with ``errors``, which the operation documents
(``conflicts`` on its view).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    """409. ``extra`` (JSON-safe) goes into the response beside ``detail``, e.g. the numbers of a refusal."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "the request conflicts with the current state"
    default_code = "conflict"

    def __init__(self, detail: Any = None, code: str | None = None, *, extra: dict[str, Any] | None = None) -> None:
        super().__init__(detail, code)
        self.extra = extra or {}


# The code of an error that says an id or natural key names no object (DRF's related fields give it;
# ``ValidationError(..., code=MISSING)`` for a lookup a view makes itself).
MISSING = "does_not_exist"
# The code of an error about a well-formed value that a rule the schema cannot state refuses: its
# relation to the present (a time already past) or to another value (an end not after its start), or
# the current state (no telemetry to read yet). The view names it in ``conflicts`` (its 409).
CONFLICT = "conflict"


def _codes(codes: Any) -> list[str]:
    if isinstance(codes, dict):
        return [c for v in codes.values() for c in _codes(v)]
    if isinstance(codes, list):
        return [c for v in codes for c in _codes(v)]
    return [str(codes)]


def _status(exc: exceptions.ValidationError) -> int:
    """400; 404 when every error says that an object the request names does not exist; 409 when every
    error is that, or a conflict (``CONFLICT``)."""
    codes = set(_codes(exc.get_codes()))
    if codes == {MISSING}:
        return status.HTTP_404_NOT_FOUND
    if CONFLICT in codes and codes <= {MISSING, CONFLICT}:
        return status.HTTP_409_CONFLICT
    return status.HTTP_400_BAD_REQUEST


def _drf_detail(exc: DjangoValidationError) -> dict[str, list[exceptions.ErrorDetail]]:
    """A Django ValidationError's messages by field, each keeping its code."""
    def details(errors: list[DjangoValidationError]) -> list[exceptions.ErrorDetail]:
        return [exceptions.ErrorDetail(str(m), code=e.code or "invalid") for e in errors for m in e.messages]
    if hasattr(exc, "error_dict"):
        return {k: details(v) for k, v in exc.error_dict.items()}
    return {"non_field_errors": details(exc.error_list)}


def django_errors(exc: DjangoValidationError) -> dict[str, list[str]]:
    if hasattr(exc, "error_dict"):
        return {k: [str(m) for e in v for m in e.messages] for k, v in exc.error_dict.items()}
    return {"non_field_errors": [str(m) for m in exc.messages]}


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as flat paths: ``items[3].slot``. List items and
    index-keyed dicts (a ListField's child errors) both become ``[i]``; a nested
    object's own errors are reported on its path."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int) or str(key).isdigit():
                name = f"{prefix}[{key}]"
            elif key == "non_field_errors" and prefix:
                name = prefix
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            for k, v in _flatten(value, name).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(detail, list):
        if all(not isinstance(d, (dict, list)) for d in detail):
            out[prefix or "non_field_errors"] = [str(d) for d in detail]
        else:
            for i, value in enumerate(detail):
                if value:
                    for k, v in _flatten(value, f"{prefix}[{i}]").items():
                        out.setdefault(k, []).extend(v)
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def _summary(errors: dict[str, list[str]]) -> str:
    parts = []
    for field, messages in errors.items():
        for m in messages:
            parts.append(m if field == "non_field_errors" else f"{field}: {m}")
    return "; ".join(parts[:5]) + (f" (and {len(parts) - 5} more)" if len(parts) > 5 else "")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(_drf_detail(exc))
    elif isinstance(exc, ProtectedError):
        exc = Conflict(f"cannot delete: still referenced by {len(exc.protected_objects)} object(s)")
    elif isinstance(exc, IntegrityError):
        exc = Conflict(f"conflicts with existing data: {str(exc).splitlines()[0]}")
    elif isinstance(exc, RequestDataTooBig):
        return Response({"detail": "request body too large"}, status=413)
    elif isinstance(exc, TooManyFieldsSent):  # a form body with more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS
        return Response({"detail": f"too many form fields: {exc}; send a JSON body"}, status=400)

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        response.data = {"detail": _summary(errors), "errors": errors}
        response.status_code = _status(exc)
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"detail": str(response.data["detail"]), **getattr(exc, "extra", {})}
    return response
