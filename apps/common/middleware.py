"""Health probes answered first, request ids for the audit trail and the logs, the API's version on
its answers, request timings for /metrics, unknown query parameters refused (400), the request body
limit (413), file streams that ASGI can serve without reading them whole first, and the
Content-Security-Policy."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from csp.middleware import CSPMiddleware, PolicyParts
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import resolve

from apps.common import query
from apps.common.logs import current_request_id
from apps.common.metrics import REQUEST_SECONDS

__all__ = ["current_request_id"]  # the audit trail reads the request id from here

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class ProbeMiddleware:
    """``GET`` of ``settings.PROBE_PATHS`` (``/healthz``, ``/readyz``, ``/metrics``) answered before
    the host check: orchestrators and Prometheus call them by the pod's address, not an allowed
    host (SECURE_REDIRECT_EXEMPT keeps them off the HTTPS redirect too). They need no session, user
    or CSP. Goes after RequestIdMiddleware and RequestMetricsMiddleware (they are timed by route)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info in settings.PROBE_PATHS and request.method in ("GET", "HEAD"):
            match = resolve(request.path_info)
            request.resolver_match = match
            return match.func(request, *match.args, **match.kwargs)
        return self.get_response(request)


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


class ApiVersionMiddleware:
    """Every answer under ``/api/`` says which version of the API the server speaks
    (``X-API-Version: 1.0.0``, ``settings.API_VERSION``, the schema's version too), so a client
    can refuse a server it does not speak before it acts on an answer it misreads."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path_info.startswith("/api/"):
            response["X-API-Version"] = settings.API_VERSION
        return response


class RequestMetricsMiddleware:
    """Time every request, labelled by its route template (never the raw path: ids would make a
    series each) and method, for /metrics."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None and match.route else "unmatched"
        REQUEST_SECONDS.labels(route=route, method=request.method or "").observe(time.perf_counter() - started)
        return response


class QueryParameterMiddleware:
    """A query parameter an API operation does not take is a 400 naming it (``apps.common.query``):
    never silently ignored, so a typo in a filter cannot widen what a script reads and acts on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Callable[..., HttpResponse], view_args: Any,
                     view_kwargs: Any) -> HttpResponse | None:
        if not request.GET or not request.path_info.startswith("/api/"):
            return None
        names, allowed = query.unknown(view_func, request.method or "GET", list(request.GET))
        if not names:
            return None
        takes = f"it takes {', '.join(sorted(allowed))}" if allowed else "it takes none"
        return JsonResponse({"detail": f"unknown query parameter{'s' if len(names) > 1 else ''}: {', '.join(names)}",
                             "errors": {n: [f"not a parameter of this operation ({takes})"] for n in names}},
                            status=400)


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


def _next_chunk(content: Iterator[bytes]) -> bytes | None:
    return next(content, None)


async def _chunks(content: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A synchronous stream read chunk by chunk in a worker thread (file reads block)."""
    while (chunk := await sync_to_async(_next_chunk, thread_sensitive=False)(content)) is not None:
        yield chunk


class AsyncStreamMiddleware:
    """Under ASGI, turn a streamed response's synchronous iterator (WhiteNoise's static files,
    FileResponse) into an asynchronous one. Django's ASGI handler would otherwise read the whole
    file into memory first and warn ("StreamingHttpResponse must consume synchronous iterators").
    Under WSGI (tests, management commands) responses pass unchanged. Goes first in MIDDLEWARE."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if isinstance(request, ASGIRequest) and isinstance(response, StreamingHttpResponse) \
                and not response.is_async:
            response.streaming_content = _chunks(iter(response.streaming_content))
        return response


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """``settings.CONTENT_SECURITY_POLICY`` (django-csp), with this host's websocket origins
    (``ws://host`` and ``wss://host``) added to connect-src: the live pages' websocket. CSP
    level 3 lets 'self' match them, older browsers do not."""

    def get_policy_parts(self, request: HttpRequest, response: HttpResponseBase,
                         report_only: bool = False) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if report_only:
            return parts
        try:
            host = request.get_host()
        except DisallowedHost:
            return parts  # answered 400 already; no websocket origin to name
        update = dict(parts.update or {})
        update["connect-src"] = [*update.get("connect-src", []), f"ws://{host}", f"wss://{host}"]
        parts.update = update
        return parts
