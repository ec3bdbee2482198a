"""The action dialog in a real browser, as an operator on the demo fleet: it shows the
controls of the action at hand and no others."""

from __future__ import annotations

from typing import Any

import pytest

from apps.inventory.models import Node
from tests.browser.conftest import login_by_cookie, screenshot

pytestmark = pytest.mark.browser

OPERATOR = ("dialog-operator", "dialog-operator-pw-1")


@pytest.fixture
def operator(demo_fleet: dict[str, Any]) -> tuple[str, str]:
    from apps.accounts.services import user_ensure

    user_ensure(username=OPERATOR[0], password=OPERATOR[1], role="operator")
    return OPERATOR


def test_a_drain_dialog_shows_no_active_nodes_input_and_a_scale_dialog_does(
        browser_page: Any, live_server: Any, operator: tuple[str, str]) -> None:
    page = browser_page
    node = Node.objects.get(hostname="n-r1-07")
    login_by_cookie(page, live_server, operator[0], next_url=f"/nodes/{node.pk}/")
    page.click("#node-actions button[data-action=drain]")
    page.locator("#action-reason").wait_for()
    assert page.locator("#action-desired-row").get_attribute("hidden") is not None
    assert not page.locator("#action-desired").is_visible()
    assert not page.locator("#action-desired-row").is_visible()
    screenshot(page, "dialog-drain", full_page=False)
    page.click("#action-cancel")

    page.goto(f"{live_server.url}/")
    page.locator("button.act[data-action=scale]").first.click()
    page.locator("#action-desired").wait_for()
    assert page.locator("#action-desired").is_visible()
    page.click("#action-cancel")
    page.locator("button.act[data-action=autoscaler]").first.click()
    page.locator("#action-reason").wait_for()
    assert not page.locator("#action-desired").is_visible()


CONTRAST = """() => {
  const lum = (rgb) => { const c = rgb.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map(v => v / 255)
      .map(v => v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4));
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]; };
  return [...document.querySelectorAll('button.act:not(:disabled)')].filter(b => b.offsetParent).map(b => {
    const s = getComputedStyle(b), a = lum(s.color), c = lum(s.backgroundColor);
    return [b.innerText.trim(), Math.round(100 * (Math.max(a, c) + 0.05) / (Math.min(a, c) + 0.05)) / 100];
  }); }"""


def test_action_buttons_meet_wcag_aa_contrast(browser_page: Any, live_server: Any,
                                             operator: tuple[str, str]) -> None:
    page = browser_page
    node = Node.objects.get(hostname="n-r1-07")
    login_by_cookie(page, live_server, operator[0], next_url=f"/nodes/{node.pk}/")
    buttons = page.evaluate(CONTRAST)
    assert {"Drain", "Quarantine"} <= {name for name, _ in buttons}
    low = [(name, ratio) for name, ratio in buttons if ratio < 4.5]
    assert not low, f"action buttons under WCAG AA (4.5:1): {low}"


def test_an_operator_edits_an_autoscaler_policy_and_turns_dry_run_off(browser_page: Any, live_server: Any,
                                                                     operator: tuple[str, str]) -> None:
    from apps.operations.models import AutoscalerPolicy

    page = browser_page
    policy = AutoscalerPolicy.objects.get(tier__kind="hybrid_inference")
    assert policy.enabled and policy.dry_run
    login_by_cookie(page, live_server, operator[0], next_url="/")
    button = page.locator("section.tier[data-tier=hybrid_inference] button.act[data-action=autoscaler]")
    assert button.inner_text().strip() == "Autoscaler: on (dry run)"
    button.click()
    # the dialog shows the policy as it is
    page.wait_for_function("() => document.querySelector('#policy-target').value !== ''")
    assert page.is_checked("#policy-enabled") and page.is_checked("#policy-dry-run")
    assert float(page.input_value("#policy-target")) == policy.target_queue_per_node
    assert not page.locator("#action-desired").is_visible()
    page.uncheck("#policy-dry-run")
    page.fill("#policy-target", "5")
    page.fill("#policy-cooldown", "120")
    page.fill("#action-reason", "scale for real (browser test)")
    screenshot(page, "dialog-autoscaler", full_page=False)
    page.click("#action-confirm")
    page.wait_for_function("() => !document.querySelector('#action-dialog').open"
                           " || !document.querySelector('#action-error').hidden")
    assert page.locator("#action-error").is_hidden(), page.inner_text("#action-error")
    assert button.inner_text().strip() == "Autoscaler: on"
    policy.refresh_from_db()
    assert (policy.enabled, policy.dry_run, policy.target_queue_per_node, policy.cooldown_s) == (True, False, 5.0, 120)


def test_an_admin_pins_a_validated_combination_from_the_versions_page(browser_page: Any, live_server: Any,
                                                                     demo_fleet: dict[str, Any]) -> None:
    from apps.accounts.services import user_ensure
    from apps.inventory.models import VersionCombination

    user_ensure(username="dialog-admin", password="dialog-admin-pw-1", role="admin")
    validated = VersionCombination.objects.get(state="validated")
    pinned = VersionCombination.objects.get(state="pinned", module_type=validated.module_type)
    page = browser_page
    login_by_cookie(page, live_server, "dialog-admin", next_url="/combinations/")
    page.evaluate("window.__noReload = 1")
    row = page.locator(f'tr[data-combination="{validated.pk}"]')
    row.locator("button.act[data-action=pin]").click()
    page.fill("#action-reason", "roll the fleet back to the older driver (browser test)")
    page.click("#action-confirm")
    page.wait_for_function("id => document.querySelector(`tr[data-combination='${id}']`).innerText"
                           ".includes('Pinned')", arg=validated.pk)
    assert "Validated" in page.inner_text(f'tr[data-combination="{pinned.pk}"]')
    assert page.evaluate("window.__noReload") == 1
    screenshot(page, "combinations-pinned")
    validated.refresh_from_db()
    pinned.refresh_from_db()
    assert (validated.state, pinned.state) == ("pinned", "validated")


def test_an_operator_cordons_three_nodes_with_one_confirmation_naming_each(browser_page: Any, live_server: Any,
                                                                          operator: tuple[str, str]) -> None:
    page = browser_page
    picked = ["n-r2-05", "n-r2-06", "n-r2-07"]
    nodes = {n.hostname: n for n in Node.objects.filter(hostname__in=picked)}
    assert all(n.state == "active" for n in nodes.values())
    login_by_cookie(page, live_server, operator[0], next_url="/nodes/")
    page.evaluate("window.__noReload = 1")
    assert page.locator("#bulk-cordon").is_disabled()
    for hostname in picked:
        page.check(f'#node-table input.pick[value="{nodes[hostname].pk}"]')
    assert "3 selected" in page.inner_text("#bulk-count")
    page.click("#bulk-cordon")
    page.locator("#action-reason").wait_for()
    assert "Cordon 3 nodes" in page.inner_text("#action-title")
    text = page.inner_text("#action-text")
    assert all(h in text for h in picked), text
    page.fill("#action-reason", "row B power work (browser test)")
    screenshot(page, "nodes-bulk-cordon", full_page=False)
    page.click("#action-confirm")
    page.wait_for_function("() => !document.querySelector('#action-dialog').open"
                           " || !document.querySelector('#action-error').hidden")
    assert page.locator("#action-error").is_hidden(), page.inner_text("#action-error")
    for hostname in picked:
        page.wait_for_function("id => document.querySelector(`#node-table tr[data-node='${id}']`).innerText"
                               ".includes('Cordoned')", arg=nodes[hostname].pk)
    assert {n.state for n in Node.objects.filter(hostname__in=picked)} == {"cordoned"}
    assert page.evaluate("window.__noReload") == 1


def test_a_scoped_operators_bulk_cordon_is_refused_whole_naming_the_node_outside_its_racks(
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    from apps.accounts.choices import ScopeKind
    from apps.accounts.services import scope_set, user_ensure

    user, _ = user_ensure(username="rack2-operator", password="rack2-operator-pw-1", role="operator")
    scope_set(user=user, kind=ScopeKind.RACKS, values=["rack-1", "rack-2"])
    page = browser_page
    picked = {n.hostname: n for n in Node.objects.filter(hostname__in=["n-r2-08", "n-r1-08"])}
    assert {n.state for n in picked.values()} == {"active"}
    login_by_cookie(page, live_server, "rack2-operator", next_url="/nodes/")
    # only nodes within the scope can be picked: rack-3's have no box
    assert page.locator(f'#node-table input.pick[value="{Node.objects.get(hostname="n-r3-01").pk}"]').count() == 0
    page.evaluate("window.__noReload = 1")
    for node in picked.values():
        page.check(f'#node-table input.pick[value="{node.pk}"]')
    # the scope narrows to rack-2 while the page is open: the selection now reaches outside it
    scope_set(user=user, kind=ScopeKind.RACKS, values=["rack-2"])
    page.click("#bulk-cordon")
    page.locator("#action-reason").wait_for()
    page.fill("#action-reason", "row B power work (scoped, browser test)")
    page.click("#action-confirm")
    page.locator("#action-error").wait_for()
    error = page.inner_text("#action-error")
    assert "n-r1-08" in error and "nothing changed" in error.lower(), error
    screenshot(page, "nodes-bulk-cordon-out-of-scope", full_page=False)
    assert {n.state for n in Node.objects.filter(pk__in=[n.pk for n in picked.values()])} == {"active"}
