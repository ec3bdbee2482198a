"""The read-only pages in a real browser, on the demo fleet. Screenshots go to artifacts/."""

from __future__ import annotations

from typing import Any

import pytest

from apps.inventory.models import Node
from tests.browser.conftest import BROWSER_PASSWORD, BROWSER_USER, login, login_by_cookie, screenshot

pytestmark = pytest.mark.browser


def test_it_logs_in_through_the_form_and_shows_the_fleet(browser_page: Any, live_server: Any,
                                                         demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    page.goto(f"{live_server.url}/nodes/")
    assert "/login/?next=/nodes/" in page.url
    # The stylesheet is served locally by the live server (no CDN): the top bar is dark.
    assert page.eval_on_selector(".topbar", "e => getComputedStyle(e).backgroundColor") == "rgb(28, 34, 48)"
    screenshot(page, "login", full_page=False)

    login(page, live_server, BROWSER_USER, BROWSER_PASSWORD, next_url="/")  # the form is what this test is about
    assert page.url == f"{live_server.url}/"
    tiers = page.locator("section.tier")
    assert tiers.count() == 3
    hybrid = page.locator("section.tier[data-tier=hybrid_inference]")
    assert hybrid.locator(".stat b").first.inner_text() == "42"
    assert "n-r1-08" in page.locator("#warned-nodes").inner_text()
    assert "modules need 16 PCIe lanes; node n-r1-08 provides 8" in page.inner_text("#warned-nodes")
    assert "off the pinned versions" in page.inner_text("#drift-link")
    screenshot(page, "fleet-overview")


def test_it_filters_the_inventory(browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/nodes/")
    assert page.locator("#node-table tbody tr").count() == 50
    assert "page 1 of 2" in page.inner_text(".pagination")
    screenshot(page, "nodes")

    page.select_option("#node-filters select[name=state]", "standby")
    page.fill("#node-filters input[name=label]", "rack=r3")
    with page.expect_navigation():
        page.click("#node-filters button[type=submit]")
    assert "state=standby" in page.url
    rows = page.locator("#node-table tbody tr")
    assert rows.count() == 3
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(3)] == ["n-r3-18", "n-r3-19", "n-r3-20"]
    assert "no ECC" in rows.nth(2).inner_text()
    screenshot(page, "nodes-filtered")


def test_it_opens_a_node_with_a_warning_and_its_modules(browser_page: Any, live_server: Any,
                                                        demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    with page.expect_navigation():
        page.click("#warned-nodes >> text=n-r1-08")
    node = Node.objects.get(hostname="n-r1-08")
    assert page.url == f"{live_server.url}/nodes/{node.pk}/"
    assert "modules need 16 PCIe lanes" in page.inner_text("#node-warnings")
    modules = page.locator("#node-modules tbody tr")
    assert modules.count() == 4
    assert page.locator("#node-modules .badge", has_text="on pin").count() == 4
    assert "node.create" in page.inner_text("#audit-table")
    screenshot(page, "node-detail")

    drifted = Node.objects.get(hostname="n-r2-12")
    page.goto(f"{live_server.url}/nodes/{drifted.pk}/")
    assert page.locator("#node-modules tr.row-drift").count() == drifted.modules.count()
    screenshot(page, "node-detail-drift")


def test_it_shows_combinations_and_drift(browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/combinations/")
    axon = page.locator("section.combo-type", has_text="Axon AX-40")
    assert "driver 2.3.1 + axon-runtime 1.18.0" in axon.locator(".section-head").inner_text()
    assert axon.locator("tr.row-pinned").count() == 1
    assert axon.locator(".badge", has_text="Candidate").count() == 1
    screenshot(page, "combinations")

    with page.expect_navigation():
        page.click("nav.mainnav >> text=Drift")
    rows = page.locator("#drift-table tbody tr")
    assert rows.count() > 0
    first = rows.first.inner_text()
    assert "2.2.9" in first and "2.3.1" in first and "n-r2-1" in first
    back = page.locator("#back-to-pin li", has_text="Axon AX-40")
    assert "2.3.1" in back.inner_text() and back.locator("a").count() == 0  # a viewer reads, no action
    screenshot(page, "drift")

    # An operator rolls the pin out to the drifted nodes only, previewed first like any rollout.
    from apps.accounts.services import user_ensure

    user_ensure(username="drift-operator", password="drift-operator-pw-1", role="operator")
    login_by_cookie(page, live_server, "drift-operator", next_url="/drift/")
    drifted = sorted(set(Node.objects.filter(modules__driver_version="2.2.9", modules__module_type__model="AX-40")
                         .values_list("hostname", flat=True)))
    with page.expect_navigation():
        page.click("#back-to-pin li:has-text('Axon AX-40') a")
    assert page.inner_text("#only-nodes").startswith("Only these nodes: " + ", ".join(drifted))
    page.click("#preview-button")
    page.wait_for_function("() => !document.querySelector('#preview').hidden")
    planned = {row.split("(")[0].strip() for row in page.eval_on_selector_all(
        "#preview-body table.list tbody tr td:first-child", "els => els.map(e => e.textContent)")
        if row.startswith("n-")}
    assert planned and planned <= set(drifted), (planned, drifted)


def test_it_filters_the_audit_log(browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/audit/")
    assert page.locator("#audit-table > tbody > tr").count() == 50
    page.select_option("#audit-filters select[name=action]", "versioncombination.pinned")
    with page.expect_navigation():
        page.click("#audit-filters button[type=submit]")
    rows = page.locator("#audit-table > tbody > tr")
    assert rows.count() == 2
    assert "demo: fleet default" in rows.first.inner_text()
    page.locator("#audit-table details summary").first.click()
    assert "pinned" in page.locator("#audit-table table.diff").first.inner_text()
    screenshot(page, "audit")


def test_it_fits_every_page_in_a_narrow_window(browser_page: Any, live_server: Any,
                                               demo_fleet: dict[str, Any]) -> None:
    page = browser_page
    page.set_viewport_size({"width": 1024, "height": 768})
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    node = Node.objects.get(hostname="n-r1-08")
    for name, url in [("fleet", "/"), ("nodes", "/nodes/"), ("node", f"/nodes/{node.pk}/"),
                      ("combinations", "/combinations/"), ("drift", "/drift/"), ("audit", "/audit/")]:
        page.goto(f"{live_server.url}{url}")
        # Wide tables scroll inside their card; the page itself never scrolls sideways.
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 0:
            screenshot(page, f"narrow-{name}", full_page=False)
        assert overflow <= 0, f"{url} is {overflow}px wider than a 1024px window"
    screenshot(page, "narrow-audit", full_page=False)


def test_every_nav_link_lands_on_the_page_its_label_names(browser_page: Any, live_server: Any,
                                                          demo_fleet: dict[str, Any]) -> None:
    """The nav's words and the pages' headings agree: "Vectors" opens the vector runs at /vectors/,
    "Combinations" the version combinations (the nav once said "Versions" for /combinations/ and
    "Vectors" for /versions/)."""
    page = browser_page
    login_by_cookie(page, live_server, BROWSER_USER, next_url="/")
    links = page.eval_on_selector_all(
        "nav.mainnav a", "as => as.map(a => [a.textContent.trim(), a.getAttribute('href')])")
    assert len(links) >= 10
    for label, href in links:
        if href.startswith("/api/") or href.startswith("/admin/"):
            continue  # Swagger UI and Django's admin name themselves
        page.goto(f"{live_server.url}{href}")
        assert page.url == f"{live_server.url}{href}", f"{label}: {href} redirected to {page.url}"
        word = label.lower().rstrip("s")
        heading = page.inner_text("h1").lower()
        assert word in heading or word in href, f"nav {label!r} ({href}) opens a page headed {heading!r}"
        assert word in href.strip("/").replace("-", " ") or href == "/", f"nav {label!r} goes to {href}"
    page.goto(f"{live_server.url}/versions/")  # the vector page's first address still answers
    assert page.url == f"{live_server.url}/vectors/"
