"""In Chromium: "Sign in with SSO" on the login page, the test provider's own login page (a real OpenID
Connect provider in a second process), back signed in with the mapped role and scope; the scoped
operator drains a node of its tier and is refused on another tier's; a user whose groups map to nothing
sees the 403 page that says why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from apps.accounts import oidc
from apps.inventory.choices import NodeState, TierKind
from apps.inventory.models import Node, Rack, Tier
from tests.browser.conftest import browser_page, chromium_browser  # noqa: F401  (browser fixtures)
from tests.oidc_provider import process
from tests.oidc_provider.process import CLIENT_ID, CLIENT_SECRET, USERS

pytestmark = [pytest.mark.browser]


@pytest.fixture
def sso(live_server: Any, settings: Any) -> Iterator[process.Provider]:
    provider = process.start([f"{live_server.url}/sso/callback/"])
    settings.OIDC_ISSUER, settings.OIDC_DISCOVERY_URL = provider.issuer, ""
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.OIDC_GROUP_MAP = "team-hybrid=operator:tiers:hybrid_inference,fleet-admins=admin"
    oidc.forget()
    try:
        yield provider
    finally:
        oidc.forget()
        process.stop(provider)


def _sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    with page.expect_navigation():
        page.click("#sso-login")
    assert "/accounts/login/" in page.url, page.url  # the provider's own page
    page.fill("#provider-username", username)
    page.fill("#provider-password", USERS[username][0])
    page.click("#provider-submit")
    page.wait_for_url(f"{base}/**")


def _post(page: Any, base: str, path: str, body: dict[str, Any]) -> Any:
    csrf = next(c["value"] for c in page.context.cookies(base) if c["name"] == "csrftoken")
    return page.request.post(f"{base}{path}", data=json.dumps(body),
                             headers={"Content-Type": "application/json", "X-CSRFToken": csrf, "Referer": base})


def test_a_scoped_operator_signs_in_with_sso_and_acts_only_within_its_tier(
        sso: Any, live_server: Any, browser_page: Any) -> None:  # noqa: F811
    Tier.objects.update(min_active_nodes=0)
    rack = Rack.objects.create(name="r-sso")
    mine = Node.objects.create(hostname="hybrid-1", rack=rack, slot=1, state=NodeState.ACTIVE,
                               tier=Tier.objects.get(kind=TierKind.HYBRID_INFERENCE))
    theirs = Node.objects.create(hostname="access-1", rack=rack, slot=2, state=NodeState.ACTIVE,
                                 tier=Tier.objects.get(kind=TierKind.ACCESS_LOGIC))
    page, base = browser_page, live_server.url
    _sign_in(page, base, "hanna")
    assert page.locator(".role").inner_text() == "hanna · operator"
    me = page.request.get(f"{base}/api/v1/me/").json()
    assert me["role"] == "operator" and me["scope"] == {"kind": "tiers", "values": ["hybrid_inference"]}
    drained = _post(page, base, f"/api/v1/nodes/{mine.pk}/drain/", {"reason": "sso test"})
    assert drained.status == 202, drained.text()
    refused = _post(page, base, f"/api/v1/nodes/{theirs.pk}/drain/", {"reason": "sso test"})
    assert refused.status == 403
    assert refused.json()["detail"] == "node access-1 outside your scope (tiers hybrid_inference)"
    assert Node.objects.get(pk=theirs.pk).state == NodeState.ACTIVE


def test_a_user_whose_groups_map_to_nothing_sees_why(sso: Any, live_server: Any,
                                                     browser_page: Any) -> None:  # noqa: F811
    page, base = browser_page, live_server.url
    page.goto(f"{base}/login/")
    with page.expect_navigation():
        page.click("#sso-login")
    page.fill("#provider-username", "nobody")
    page.fill("#provider-password", USERS["nobody"][0])
    with page.expect_navigation(url=f"{base}/sso/callback/**"):
        page.click("#provider-submit")
    assert page.locator("#sso-error-title").inner_text() == "Signed in, but no access here"
    assert "none of your groups (marketing) is mapped" in page.locator("#sso-error").inner_text()
    page.goto(f"{base}/")
    assert "/login/" in page.url  # no session
