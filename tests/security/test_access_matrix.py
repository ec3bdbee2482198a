"""Every route × method × caller against the declared policy (controlplane/access_policy.py).

The URL conf is walked; a route missing from the policy, or a method the route serves that the
policy does not name (or names but the route does not serve), fails. Each call is made as each
kind of caller; an allowed caller must not get 401/403 (or a redirect to a login page), a refused
one must. Object ids that do not exist are used where a route names one (a permission is checked
before the object is looked up), except a command ack, which names a command of node A. Websocket
paths: refused callers are closed before any frame."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.authtoken.models import Token

from apps.accounts.choices import ScopeKind
from apps.accounts.models import ServiceToken
from apps.accounts.services import scope_set, service_account_create, service_token_issue, user_ensure
from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue, agent_token_revoke, node_command_send
from apps.common.roles import ROLES
from apps.inventory.choices import TierKind
from apps.inventory.models import Node
from controlplane.access_policy import CALLERS, NODE_OWNER, POLICY, SCOPED, WEBSOCKETS
from tests.telemetry.conftest import Fleet

ABSENT = "999999"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
LOGIN_PATHS = ("/login/", "/admin/login/")
# The scoped callers: operators whose scope is one tier (the fleet's nodes are in the hybrid tier).
SCOPES = {"scoped_operator": TierKind.HYBRID_INFERENCE, "other_scope_operator": TierKind.ACCESS_LOGIC}


def _routes() -> Iterator[tuple[str, Any]]:
    def walk(resolver: URLResolver, prefix: str) -> Iterator[tuple[str, Any]]:
        for p in resolver.url_patterns:
            if isinstance(p, URLResolver):
                yield from walk(p, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern), p.callback

    yield from walk(get_resolver(), "")


def _normal(route: str) -> str | None:
    """The policy's spelling of a URL conf route; None for a format-suffix twin (same view)."""
    if "(?P<format>" in route:
        return None
    return route.replace("(?P<pk>[^/.]+)", "<pk>").replace("^", "").replace("$", "")


def _methods(callback: Any) -> set[str]:
    actions = getattr(callback, "actions", None)
    if actions:  # DRF adds "head" beside "get" once the route has been called: HEAD follows GET
        return {m.upper() for m in actions} & set(METHODS)
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if cls is None:
        return {"GET"}  # function views
    names = getattr(cls, "http_method_names", ())
    return {m.upper() for m in ("get", "post", "put", "patch", "delete") if m in names and hasattr(cls, m)}


def _policy_row(route: str) -> dict[str, frozenset[str]] | None:
    if route.startswith("admin/"):
        return POLICY.get("admin/*")
    return POLICY.get(route)


class Callers:
    """One client per kind of caller, and the objects the calls name."""

    def __init__(self) -> None:
        self.fleet = Fleet()
        self.command = node_command_send(node=self.fleet.node_a, kind="ping", args={}, actor="test")
        self.tokens = {}
        self.users = {}
        self.sessions: dict[str, Client] = {}
        for role in ("viewer", "operator", "admin", *SCOPES):
            user, _ = user_ensure(username=f"matrix-{role}", password="pw", role=role if role in ROLES else "operator")
            if role in SCOPES:
                scope_set(user=user, kind=ScopeKind.TIERS, values=[SCOPES[role]])
            self.users[role] = user
            self.tokens[role] = Token.objects.get_or_create(user=user)[0].key
            client = Client()
            client.force_login(user)
            self.sessions[role] = client
        expired = Client()
        expired.force_login(user_ensure(username="matrix-expired", password="pw", role="viewer")[0])
        Session.objects.filter(session_key=expired.session.session_key).update(
            expire_date=timezone.now() - dt.timedelta(seconds=1))
        self.sessions["expired_session"] = expired
        revoked, self.revoked_key = agent_token_issue(kind=AgentKind.NODE, node=self.fleet.node_b, actor="test")
        agent_token_revoke(token=revoked, actor="test")
        account = service_account_create(name="matrix-pipeline", role="operator", owner=self.users["admin"],
                                         actor=self.users["admin"])
        _live, live_key = service_token_issue(account=account, actor=self.users["admin"])
        expiring, expired_key = service_token_issue(account=account, actor=self.users["admin"],
                                                    expires_at=timezone.now() + dt.timedelta(hours=1))
        ServiceToken.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
        self.service_tokens = {"service_account": live_key, "expired_service_token": expired_key}
        self.agent_keys = {"node_key": self.fleet.key_a, "other_node_key": self.fleet.key_b,
                           "gateway_key": self.fleet.key_gw, "revoked_key": self.revoked_key}

    def call(self, caller: str, method: str, path: str) -> Any:
        headers: dict[str, str] = {}
        client = Client()
        if caller in self.users:
            if path.startswith("/api/"):
                headers["Authorization"] = f"Token {self.tokens[caller]}"
            elif path.endswith("/logout/"):  # a session of its own: logging out ends it
                client.force_login(self.users[caller])
            else:
                client = self.sessions[caller]
        elif caller == "expired_session":
            client = self.sessions[caller]
        elif caller in self.agent_keys:
            headers["Authorization"] = f"Agent {self.agent_keys[caller]}"
        elif caller in self.service_tokens:  # on every path: pages and the admin must not take it
            headers["Authorization"] = f"Bearer {self.service_tokens[caller]}"
        kwargs: dict[str, Any] = {"headers": headers}
        if method in ("POST", "PUT", "PATCH"):
            kwargs.update(data=b"{}", content_type="application/json")
        return getattr(client, method.lower())(path, **kwargs)

    def path(self, route: str) -> str:
        if route == "api/v1/agent/commands/<int:pk>/ack/":
            return f"/api/v1/agent/commands/{self.command.pk}/ack/"
        concrete = re.sub(r"<(?:[a-z]+:)?[a-z_]+>", ABSENT, route)
        concrete = re.sub(r"\(\?P<[a-z_]+>[^)]*\)", ABSENT, concrete)
        return "/" + concrete.replace("^", "").replace("$", "").replace("\\", "")


def _refused(response: Any, row_callers: frozenset[str], path: str = "") -> bool:
    if response.status_code in (401, 403):
        return True
    if path.endswith("/logout/"):  # logging out sends everyone to the login page
        return False
    if response.status_code == 302 and response["Location"].split("?")[0].endswith(LOGIN_PATHS):
        return True
    return row_callers == NODE_OWNER and response.status_code == 404  # another node's object: not found


@pytest.mark.django_db
def test_every_route_has_a_row_for_each_method_it_serves() -> None:
    missing, extra = [], []
    for raw, callback in _routes():
        route = _normal(raw)
        if route is None or route.startswith("admin/"):
            continue
        row = POLICY.get(route)
        if row is None:
            missing.append(f"{route} (no row)")
            continue
        served = _methods(callback)
        missing += [f"{route} {m}" for m in sorted(served - set(row))]
        extra += [f"{route} {m}" for m in sorted(set(row) - served)]
    assert not missing, f"routes or methods the policy does not name: {missing}"
    assert not extra, f"methods the policy names that the routes do not serve: {extra}"
    known = {_normal(r) for r, _ in _routes()}
    stale = sorted(r for r in POLICY if r != "admin/*" and r not in known)
    assert not stale, f"policy rows for routes that no longer exist: {stale}"


@pytest.mark.heavy
@pytest.mark.django_db
def test_every_route_answers_each_caller_as_the_policy_says() -> None:
    callers = Callers()
    wrong = []
    checked = 0
    for raw, _callback in _routes():
        route = _normal(raw)
        if route is None or route.startswith("admin/"):
            continue
        path = callers.path(route)
        for method, allowed in POLICY[route].items():
            for caller in CALLERS:
                response = callers.call(caller, method, path)
                checked += 1
                refused = _refused(response, allowed, path)
                if (caller in allowed) == refused:
                    wrong.append(f"{method} {path} as {caller}: {response.status_code} "
                                 f"({'should be allowed' if caller in allowed else 'should be refused'})")
    assert not wrong, "\n".join(wrong)
    assert checked > 500


@pytest.mark.django_db
def test_scoped_routes_refuse_objects_outside_the_callers_scope() -> None:
    """Each route acting on a node, a module or a tier, with a real one of the hybrid tier: the operator of
    another tier is refused (403 naming its scope), nothing changed; the hybrid tier's operator is not."""
    callers = Callers()
    fleet = callers.fleet
    ids = {"node": fleet.node_a.pk, "module": fleet.mod_a[0].pk, "tier": fleet.node_a.tier_id}
    bodies = {"nodes": {"action": "cordon", "nodes": [fleet.node_a.pk], "reason": "matrix"},
              "node_body": {"node": fleet.node_a.pk, "kind": "ping", "args": {}},
              "tier": {"desired": 1, "reason": "matrix"},
              "tier_body": {"tier": fleet.node_a.tier_id, "target_queue_per_node": 8, "min_nodes": 0, "max_nodes": 6}}
    assert set(SCOPED) <= set(POLICY)
    wrong = []
    for route, kind in SCOPED.items():
        path = "/" + route.replace("<int:pk>", str(ids.get(kind, "")))
        body = bodies.get(kind, {"reason": "matrix"})
        for caller, refused in (("other_scope_operator", True), ("scoped_operator", False)):
            client = Client()
            response = client.post(path, body, content_type="application/json",
                                   headers={"Authorization": f"Token {callers.tokens[caller]}"})
            if refused and (response.status_code != 403 or "access_logic" not in response.json()["detail"]):
                wrong.append(f"POST {path} as {caller}: {response.status_code} {response.content[:200]!r}")
            if not refused and response.status_code in (401, 403):
                wrong.append(f"POST {path} as {caller}: {response.status_code} {response.content[:200]!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.heavy
@pytest.mark.django_db
def test_every_admin_page_is_for_admins_only() -> None:
    """Admins reach every admin page (a read-only model's add and delete pages answer 403 to everyone:
    that is the model's rule, not the caller's); everyone else is sent to the admin's login."""
    callers = Callers()
    wrong = []
    for raw, _callback in _routes():
        route = _normal(raw)
        if route is None or not route.startswith("admin/"):
            continue
        row = POLICY.get(route, POLICY["admin/*"])
        path = callers.path(route)
        for caller in CALLERS:
            response = callers.call(caller, "GET", path)
            where = response["Location"].split("?")[0] if response.status_code == 302 else ""
            if caller in row["GET"]:  # admins: a missing object sends them to the index, which is theirs
                ok = not where.endswith(LOGIN_PATHS) and (response.status_code != 403 or caller == "admin")
            else:  # the others: to a login page, or to the index, which sends them there
                ok = where.endswith(LOGIN_PATHS) or where == "/admin/" or response.status_code in (401, 403)
            if not ok:
                wrong.append(f"GET {path} as {caller}: {response.status_code}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.django_db(transaction=True)
@pytest.mark.anyio
async def test_websockets_close_refused_callers_before_any_frame() -> None:
    from channels.db import database_sync_to_async

    from controlplane.asgi import application

    callers = await database_sync_to_async(Callers)()
    node_id = await database_sync_to_async(lambda: Node.objects.values_list("pk", flat=True).first())()
    tier_id = await database_sync_to_async(lambda: callers.fleet.tier.pk)()
    for route, allowed in WEBSOCKETS.items():
        path = "/" + route.replace("<int:tier_id>", str(tier_id)).replace("<int:node_id>", str(node_id))
        for caller in CALLERS:
            headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
            client = callers.sessions.get(caller)
            if client is not None:
                headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
            elif caller in callers.agent_keys:
                headers.append((b"authorization", f"Agent {callers.agent_keys[caller]}".encode()))
            elif caller in callers.service_tokens:
                headers.append((b"authorization", f"Bearer {callers.service_tokens[caller]}".encode()))
            comm = WebsocketCommunicator(application, path, headers=headers)
            connected, _code = await comm.connect(timeout=5)
            assert connected == (caller in allowed), (path, caller)
            if not connected:
                assert await comm.receive_nothing(timeout=0.1), (path, caller)
            await comm.disconnect()
