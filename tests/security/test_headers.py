"""Response headers of every page: no framing, no MIME sniffing, a same-origin referrer, and a
Content-Security-Policy with no inline or foreign script; no template holds an inline script."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from apps.accounts.services import user_ensure
from apps.inventory.models import Node, Tier
from apps.simulator.demo import seed_demo

pytestmark = pytest.mark.django_db

# Not pages: the API (JSON), probes and the metrics scrape (answered before the page middleware),
# the schema and plotly's script file.
NOT_PAGES = ("api/v1/", "api/schema/", "healthz", "readyz", "metrics", "static-pkg/")
# How to fill each page route's arguments.
ARGS: dict[str, Any] = {
    "tiers/<int:pk>/": lambda: {"pk": Tier.objects.order_by("pk").first().pk},  # type: ignore[union-attr]
    "nodes/<int:pk>/": lambda: {"pk": Node.objects.order_by("pk").first().pk},  # type: ignore[union-attr]
    # Pages of objects the demo has none of yet (their templates are scanned below) and a form's target.
    "vector-runs/<int:pk>/": lambda: {"pk": 999999},
    "rollouts/<int:pk>/": lambda: {"pk": 999999},
    "health/findings/<int:pk>/acknowledge/": lambda: {"pk": 999999},
}


def page_routes() -> Iterator[tuple[str, URLPattern]]:
    """Every route of the URL conf outside the API, the admin (walked separately) and the probes."""
    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                if not route.startswith(("admin/", *NOT_PAGES)):
                    yield from walk(p.url_patterns, route)
            elif not route.startswith(NOT_PAGES):
                yield route, p
    yield from walk(get_resolver().url_patterns, "")


def url_of(route: str) -> str:
    if "<" not in route:
        return "/" + route
    if route not in ARGS:
        raise AssertionError(f"page {route!r} has arguments: say how to fill them in ARGS")
    url = route
    for name, value in ARGS[route]().items():
        url = re.sub(rf"<(?:\w+:)?{name}>", str(value), url)
    return "/" + url


class Scripts(HTMLParser):
    """The <script> tags of a page that a browser would execute without a src."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.handlers: list[str] = []
        self._in: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.handlers += [f"<{tag} {k}=...>" for k in a if k.startswith("on")]
        self.handlers += [f"<{tag} {k}={v}>" for k, v in a.items() if (v or "").strip().lower().startswith(
            "javascript:")]
        if tag == "script" and "src" not in a and (a.get("type") or "text/javascript") != "application/json":
            self._in = a

    def handle_data(self, data: str) -> None:
        if self._in is not None and data.strip():
            self.inline.append(data.strip()[:80])

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = None


def assert_headers(r: Any, url: str) -> None:
    assert r.status_code < 500, (url, r.status_code)
    assert r["X-Frame-Options"] == "DENY", url
    assert r["X-Content-Type-Options"] == "nosniff", url
    assert r["Referrer-Policy"] == "same-origin", url
    csp = {d.split()[0]: d.split()[1:] for d in r["Content-Security-Policy"].split("; ")}
    assert csp["script-src"] == ["'self'"], (url, csp)
    assert csp["style-src"] == ["'self'", "'unsafe-inline'"], (url, csp)
    assert csp["default-src"] == ["'self'"] and csp["object-src"] == ["'none'"], (url, csp)
    assert csp["frame-ancestors"] == ["'none'"], (url, csp)
    assert csp["connect-src"] == ["'self'", "ws://testserver", "wss://testserver"], (url, csp)
    if r.get("Content-Type", "").startswith("text/html"):
        scripts = Scripts()
        scripts.feed(r.content.decode())
        assert scripts.inline == [] and scripts.handlers == [], (url, scripts.inline, scripts.handlers)


@pytest.fixture
def demo(db: Any) -> None:
    seed_demo()


def test_every_page_carries_the_headers_and_runs_no_inline_script(demo: None) -> None:
    user_ensure(username="hdr-operator", password="hdr-operator-pw-1", role="operator")
    client = Client()
    assert client.login(username="hdr-operator", password="hdr-operator-pw-1")
    seen = []
    for route, _pattern in page_routes():
        url = url_of(route)
        r = client.get(url)
        assert_headers(r, url)
        seen.append((url, r.status_code))
    pages = dict(seen)
    assert pages["/"] == 200 and pages["/nodes/"] == 200 and pages["/planner/"] == 200, seen
    assert pages["/api/docs/"] == 200, seen
    # Swagger UI's start-up script comes as a file of its own.
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")


def test_the_login_page_and_the_admin_carry_them_too(demo: None) -> None:
    anonymous = Client()
    for url in ("/login/", "/", "/nodes/"):
        assert_headers(anonymous.get(url), url)
    user_ensure(username="hdr-admin", password="hdr-admin-pw-1", role="admin")
    admin = Client()
    assert admin.login(username="hdr-admin", password="hdr-admin-pw-1")
    node = Node.objects.order_by("pk").first()
    assert node is not None
    for url in ("/admin/", "/admin/inventory/node/", f"/admin/inventory/node/{node.pk}/change/"):
        r = admin.get(url)
        assert r.status_code == 200, url
        assert_headers(r, url)


def test_api_answers_carry_them(admin_api: Any) -> None:
    assert_headers(admin_api.get("/api/v1/nodes/"), "/api/v1/nodes/")


def test_no_template_holds_an_inline_script() -> None:
    dirs = [Path(d) for t in settings.TEMPLATES for d in t["DIRS"]]  # type: ignore[attr-defined]
    dirs += [p for p in Path(settings.BASE_DIR, "apps").glob("*/templates")]
    files = [f for d in dirs for f in d.rglob("*.html")]
    assert len(files) > 10
    found = {}
    for f in files:
        scripts = Scripts()
        scripts.feed(re.sub(r"{%.*?%}|{{.*?}}", "", f.read_text(), flags=re.S))
        if scripts.inline or scripts.handlers:
            found[str(f)] = scripts.inline + scripts.handlers
    assert found == {}


def test_the_template_check_finds_an_inline_script() -> None:
    """The check above can fail: it sees inline code, handlers and javascript: links, not data."""
    scripts = Scripts()
    scripts.feed('<script>alert(1)</script><script src="/s.js"></script><script type="application/json">{}</script>'
                 '<button onclick="x()">b</button><a href="javascript:x()">a</a>')
    assert scripts.inline == ["alert(1)"]
    assert scripts.handlers == ["<button onclick=...>", "<a href=javascript:x()>"]
