"""One error shape for the API: {"detail": str, "errors": {field: [msg]}}.

Model validation (Django ValidationError) becomes 400 with field messages,
state conflicts 409, oversized bodies 413. Bad input never becomes a 500.
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
        exc = exceptions.ValidationError(django_errors(exc))
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
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"detail": str(response.data["detail"]), **getattr(exc, "extra", {})}
    return response
