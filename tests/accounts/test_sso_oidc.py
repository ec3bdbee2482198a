"""Single sign-on against a real OpenID Connect provider (django-oauth-toolkit in a second process on
loopback, tests/oidc_provider): the whole authorization code flow with PKCE through the provider's own
login form, real ID tokens, and the bad ones a provider can send."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

import pytest
import requests
from django.contrib.auth.models import User
from django.test import Client

from apps.accounts import oidc
from apps.accounts.models import ExternalIdentity
from apps.accounts.sso import Grant, parse_group_map, resolve
from apps.audit.models import AuditEvent
from apps.common.roles import role_of
from tests.oidc_provider import process
from tests.oidc_provider.process import CLIENT_ID, CLIENT_SECRET, USERS, Provider

CALLBACK = "http://testserver/sso/callback/"
GROUP_MAP = "team-hybrid=operator:tiers:hybrid_inference,fleet-admins=admin"


@pytest.fixture(scope="module")
def provider(django_db_blocker: Any, django_db_setup: Any) -> Iterator[Provider]:
    with django_db_blocker.unblock():
        started = process.start([CALLBACK])
        try:
            yield started
        finally:
            process.stop(started)


@pytest.fixture
def sso_settings(settings: Any, provider: Provider) -> Any:
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_DISCOVERY_URL = ""
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.OIDC_GROUP_MAP = GROUP_MAP
    settings.BREAK_GLASS_USERS = ["glass"]
    oidc.forget()
    yield settings
    oidc.forget()


def _through_provider(client: Client, username: str) -> str:
    """Start at the control plane, sign in on the provider's own login page; the callback path (with code
    and state) the provider sends the browser back to."""
    start = client.get("/sso/login/")
    assert start.status_code == 302, start.content[:500]
    authorize = start["Location"]
    assert "code_challenge=" in authorize and "code_challenge_method=S256" in authorize
    assert "nonce=" in authorize and "state=" in authorize
    browser = requests.Session()
    to_login = browser.get(authorize, allow_redirects=False, timeout=30)
    login_url = urljoin(authorize, to_login.headers["Location"])
    page = browser.get(login_url, timeout=30)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf, page.text[:500]
    nxt = re.search(r'name="next" value="([^"]*)"', page.text)
    signed_in = browser.post(login_url, data={"username": username, "password": USERS[username][0],
                                              "csrfmiddlewaretoken": csrf.group(1),
                                              "next": nxt.group(1).replace("&amp;", "&") if nxt else ""},
                             headers={"Referer": login_url}, allow_redirects=False, timeout=30)
    assert signed_in.status_code == 302, signed_in.text[:500]
    back = browser.get(urljoin(login_url, signed_in.headers["Location"]), allow_redirects=False, timeout=30)
    callback = back.headers["Location"]
    assert callback.startswith(CALLBACK), callback
    return callback[len("http://testserver"):]


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.django_db
def test_it_signs_in_with_the_mapped_role_and_scope(sso_settings: Any) -> None:
    client = Client()
    response = client.get(_through_provider(client, "hanna"))
    assert response.status_code == 302 and response["Location"] == "/"
    assert _signed_in(client)
    user = User.objects.get(username="hanna")
    assert not user.has_usable_password()
    assert role_of(user) == "operator"
    me = client.get("/api/v1/me/").json()
    assert me["scope"] == {"kind": "tiers", "values": ["hybrid_inference"]}
    identity = ExternalIdentity.objects.get(user=user)
    assert identity.issuer == sso_settings.OIDC_ISSUER and identity.groups == ["team-hybrid"]
    assert AuditEvent.objects.filter(action="login.sso", actor_name="hanna").count() == 1


@pytest.mark.django_db
def test_logging_out_ends_the_providers_session_too(sso_settings: Any) -> None:
    client = Client()
    client.get(_through_provider(client, "hanna"))
    response = client.post("/logout/")
    assert not _signed_in(client)
    assert response.status_code == 302
    end = response["Location"]
    assert end.startswith(f"{sso_settings.OIDC_ISSUER}/logout/") and "id_token_hint=" in end
    answer = requests.get(end, allow_redirects=False, timeout=30)  # the provider takes the hint
    assert answer.status_code == 302 and answer.headers["Location"] == "http://testserver/login/"


@pytest.mark.django_db
def test_roles_and_scope_are_re_read_at_each_sign_in(sso_settings: Any) -> None:
    client = Client()
    client.get(_through_provider(client, "ada"))
    ada = User.objects.get(username="ada")
    assert role_of(ada) == "admin" and ada.is_staff
    assert client.get("/api/v1/me/").json()["scope"]["kind"] == "fleet"
    sso_settings.OIDC_GROUP_MAP = "team-hybrid=viewer:racks:r01"
    again = Client()
    again.get(_through_provider(again, "ada"))
    ada = User.objects.get(username="ada")
    assert role_of(ada) == "viewer" and not ada.is_staff
    assert again.get("/api/v1/me/").json()["scope"] == {"kind": "racks", "values": ["r01"]}


@pytest.mark.django_db
def test_a_user_whose_groups_map_to_nothing_gets_the_403_page(sso_settings: Any) -> None:
    client = Client()
    response = client.get(_through_provider(client, "nobody"))
    assert response.status_code == 403
    assert b"none of your groups (marketing) is mapped" in response.content
    assert not _signed_in(client)
    assert not User.objects.filter(username="nobody").exists()
    assert AuditEvent.objects.filter(action="login.sso_refused", target_repr="nobody").exists()
    assert client.get("/").status_code == 302  # no session: every page sends it to the login


@pytest.mark.django_db
@pytest.mark.parametrize(("username", "why"), [
    ("mallory-issuer", b"failed a check"),
    ("mallory-expired", b"expired"),
    ("mallory-signature", b"signature"),
])
def test_a_bad_id_token_is_refused_with_a_page_and_an_audit_record(sso_settings: Any, username: str,
                                                                   why: bytes) -> None:
    client = Client()
    users_before = User.objects.count()
    response = client.get(_through_provider(client, username))
    assert response.status_code == 400, response.content[:500]
    assert b"could not be verified" in response.content and why in response.content
    assert not _signed_in(client)
    assert User.objects.count() == users_before  # nothing written but the audit record
    assert AuditEvent.objects.filter(action="login.sso_failed").count() == 1


@pytest.mark.django_db
def test_a_replayed_state_is_refused(sso_settings: Any) -> None:
    client = Client()
    callback = _through_provider(client, "hanna")
    assert client.get(callback).status_code == 302
    for replay in (Client(), client):  # another browser, and the same one again
        response = replay.get(callback)
        assert response.status_code == 400
        assert b"state is unknown or was used already" in response.content
    assert AuditEvent.objects.filter(action="login.sso_failed").count() == 2


@pytest.mark.django_db
def test_a_provider_that_is_down_gives_a_clear_page(sso_settings: Any) -> None:
    sso_settings.OIDC_ISSUER = "http://127.0.0.1:9/o"  # the discard port: nothing listens
    client = Client()
    response = client.get("/sso/login/")
    assert response.status_code == 502
    assert b"did not answer" in response.content
    assert not _signed_in(client)
    assert AuditEvent.objects.filter(action="login.sso_failed").count() == 1


@pytest.mark.django_db
def test_password_logins_are_for_break_glass_accounts_only(sso_settings: Any) -> None:
    User.objects.create_user("glass", password="glass-pw")
    User.objects.create_user("someone", password="someone-pw")
    page = Client().get("/login/")
    assert b'id="sso-login"' in page.content
    refused = Client()
    response = refused.post("/login/", {"username": "someone", "password": "someone-pw"})
    assert response.status_code == 200 and b"break-glass accounts only" in response.content
    assert not _signed_in(refused)
    glass = Client()
    assert glass.post("/login/", {"username": "glass", "password": "glass-pw"}).status_code == 302
    assert _signed_in(glass) and glass.session["break_glass"] is True
    assert AuditEvent.objects.filter(action="login.break_glass", actor_name="glass").count() == 1


def test_the_group_map_is_read_from_its_setting() -> None:
    parsed = parse_group_map("team-hybrid=operator:tiers:hybrid_inference, fleet-admins=admin,"
                             "crew=operator:racks:r01+r02")
    assert parsed["team-hybrid"] == Grant("operator", "tiers", ("hybrid_inference",))
    assert parsed["fleet-admins"] == Grant("admin")
    assert parsed["crew"].scope_values == ("r01", "r02")
    with pytest.raises(ValueError, match="bogus"):
        parse_group_map("bogus")
    both = resolve(["team-hybrid", "crew"], parsed)
    assert both.role is None and "tiers and of racks" in both.refusal
    admin = resolve(["team-hybrid", "fleet-admins"], parsed)
    assert admin.role == "admin" and admin.scope_kind == "fleet"
