"""Request ids for the audit trail, and the request body limit (413)."""

from __future__ import annotations

import contextvars
import re
import uuid
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get("X-Request-ID", "")
        rid = given if _SAFE_ID.match(given) else uuid.uuid4().hex
        request.request_id = rid  # type: ignore[attr-defined]
        token = current_request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            current_request_id.reset(token)
        response["X-Request-ID"] = rid
        return response


class BodySizeLimitMiddleware:
    """Reject bodies over MAX_BODY_BYTES before anything reads them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = getattr(settings, "MAX_BODY_BYTES", 0)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if limit and length > limit:
            return JsonResponse(
                {"detail": f"request body of {length} bytes exceeds the limit of {limit} bytes"},
                status=413,
            )
        return self.get_response(request)
