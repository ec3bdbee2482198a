"""Shared pieces of the browser pages."""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

import plotly
from django.contrib.auth.mixins import LoginRequiredMixin, UserPassesTestMixin
from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, QueryDict
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found

from apps.common.roles import VIEWER, has_role

# plotly.min.js is served from the installed plotly package (no CDN); pages name its version.
PLOTLY_VERSION = plotly.__version__
PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


class ViewerRequiredMixin(LoginRequiredMixin, UserPassesTestMixin):
    """Pages need the viewer role or above: anonymous users go to the login page,
    logged-in users without a role get 403."""

    required_role = VIEWER

    def test_func(self) -> bool:
        return has_role(self.request.user, self.required_role)  # type: ignore[attr-defined]


def filter_data(query: QueryDict) -> QueryDict | None:
    """A filter form's query without its empty fields and the page number, or None when nothing
    is left. Browsers send every field of a GET form, and an empty ``state=`` must mean "any"
    rather than an invalid choice."""
    data = QueryDict(mutable=True)
    for key, values in query.lists():
        kept = [v for v in values if v.strip()]
        if kept and key != "page":
            data.setlist(key, kept)
    return data or None


def not_found(request: HttpRequest, exception: Exception) -> HttpResponseBase:
    """404 (``handler404``): under /api/ in the API's error shape, as JSON (a path no route matches,
    e.g. an id that is not a number); elsewhere the page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "not found: no API route matches this path"}, status=404)
    return page_not_found(request, exception)


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers and probes: the process answers. No database, no login."""
    return JsonResponse({"status": "ok"})


# Set once every migration this code knows is applied: from then on the probe skips reading them.
_all_migrated = False


def unapplied_migrations() -> list[str]:
    """The migrations this code has that the database lacks ("app.name"), in the order they would
    run; empty once the migrate job is done. Read from the migration files and django_migrations
    until the first empty answer, then remembered (a running process's migrations do not change)."""
    global _all_migrated
    if _all_migrated:
        return []
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    _all_migrated = not plan
    return [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: PostgreSQL and Redis answer and every migration is applied (a new release's pods
    take no traffic before its migrate job is done). 503 naming what is not ready."""
    problems: dict[str, str] = {}
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        pending = unapplied_migrations()
        if pending:
            problems["migrations"] = f"{len(pending)} unapplied, first {pending[0]}"
    except Exception as exc:  # any failure means not ready; say which
        problems["database"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        cache.get("readyz")
    except Exception as exc:
        problems["redis"] = f"{type(exc).__name__}: {exc}"[:300]
    if problems:
        return JsonResponse({"status": "unavailable", "problems": problems}, status=503)
    return JsonResponse({"status": "ok"})


@functools.cache
def _plotly_js_gzipped() -> bytes:
    return gzip.compress(PLOTLY_JS.read_bytes(), compresslevel=6)


@require_GET
def plotly_js(request: HttpRequest) -> HttpResponseBase:
    """plotly.min.js from the installed package (gzipped when the client takes it); the URL carries
    the version (?v=), so browsers may cache it for a year."""
    response: HttpResponseBase
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(_plotly_js_gzipped(), content_type="text/javascript; charset=utf-8")
        response["Content-Encoding"] = "gzip"
    else:
        response = FileResponse(PLOTLY_JS.open("rb"), content_type="text/javascript; charset=utf-8")
    response["Vary"] = "Accept-Encoding"
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    return response
