"""The command palette (Ctrl-K): pages, nodes by hostname from the inventory API (asked once typing
pauses), the actions of the page in view (a drain opens the usual confirmation), arrow keys and
Enter, Escape; a combobox owning a listbox, the chosen option named by aria-activedescendant."""

from __future__ import annotations

from typing import Any

import pytest

from apps.inventory.models import Node
from tests.browser.conftest import login_by_cookie, screenshot

pytestmark = pytest.mark.browser

OPEN = "() => document.querySelector('#palette').open"
CLOSED = "() => !document.querySelector('#palette').open"


def options(page: Any) -> list[tuple[str, str]]:
    return [tuple(o) for o in page.eval_on_selector_all(
        "#palette-list [role=option][data-kind]",
        "els => els.map(e => [e.dataset.kind, e.querySelector('.label-text').textContent])")]


def active(page: Any) -> tuple[str, str]:
    """The option the input's aria-activedescendant names, and that it alone is aria-selected."""
    return tuple(page.evaluate("""() => {
        const id = document.querySelector('#palette-input').getAttribute('aria-activedescendant');
        const el = document.getElementById(id);
        const selected = [...document.querySelectorAll('#palette-list [aria-selected=true]')].map(e => e.id);
        if (!el || selected.length !== 1 || selected[0] !== id)
            return ['', 'selected ' + selected.join(',') + ' vs ' + id];
        return [el.dataset.kind, el.querySelector('.label-text').textContent]; }"""))


def test_the_palette_finds_pages_nodes_and_the_actions_of_the_page(browser_page: Any, live_server: Any,
                                                                   demo_fleet: dict[str, Any]) -> None:
    from apps.accounts.services import user_ensure

    user_ensure(username="palette-operator", password="palette-operator-pw-1", role="operator")
    page = browser_page
    node = Node.objects.get(hostname="n-r1-07")
    login_by_cookie(page, live_server, "palette-operator", next_url=f"/nodes/{node.pk}/")
    assert "Ctrl-K" in (page.get_attribute(".keys-hint", "title") or "")

    # Ctrl-K opens it, the focus in its combobox; the page's actions come first.
    page.keyboard.press("Control+k")
    page.wait_for_function(OPEN)
    assert page.evaluate("document.activeElement.id") == "palette-input"
    assert page.get_attribute("#palette-input", "role") == "combobox"
    assert page.get_attribute("#palette-input", "aria-controls") == "palette-list"
    assert page.get_attribute("#palette-list", "role") == "listbox"
    assert page.evaluate("document.querySelector('#palette').getAttribute('role') || "
                         "document.querySelector('#palette').tagName") in ("dialog", "DIALOG")
    first = options(page)
    assert ("action", "Drain n-r1-07") in first and ("page", "Operations") in first
    assert first[0][0] == "action"
    assert active(page) == first[0]

    # "drain" + Enter: the palette closes and the usual confirmation opens.
    page.keyboard.type("drain")
    page.wait_for_function("() => document.querySelector('#palette-opt-0 .label-text').textContent === 'Drain n-r1-07'")
    screenshot(page, "palette-drain", full_page=False)
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#action-dialog').open")
    assert page.evaluate(CLOSED)
    assert page.inner_text("#action-title") == "Drain n-r1-07"
    assert page.evaluate("document.activeElement.id") == "action-reason"
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.querySelector('#action-dialog').open")

    # Escape closes the palette, and so does Ctrl-K again.
    page.keyboard.press("Control+k")
    page.wait_for_function(OPEN)
    page.keyboard.press("Escape")
    page.wait_for_function(CLOSED)
    page.keyboard.press("Control+k")
    page.wait_for_function(OPEN)
    page.keyboard.press("Control+k")
    page.wait_for_function(CLOSED)

    # Typing asks the API once per pause, not once per key: six input events in one task make one request.
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/api/v1/nodes/?" in r.url else None)
    page.keyboard.press("Control+k")
    page.wait_for_function(OPEN)
    page.evaluate("""() => { const box = document.querySelector('#palette-input');
        for (const v of ['n', 'n-', 'n-r', 'n-r2', 'n-r2-', 'n-r2-1']) {
            box.value = v; box.dispatchEvent(new Event('input', {bubbles: true})); } }""")
    page.wait_for_function("() => document.querySelectorAll('#palette-list [data-kind=node]').length > 0")
    nodes = [label for kind, label in options(page) if kind == "node"]
    assert nodes and all(h.startswith("n-r2-1") for h in nodes), nodes
    hints = page.eval_on_selector_all("#palette-list [data-kind=node] .hint", "els => els.map(e => e.textContent)")
    assert hints and all("_" not in h for h in hints), hints  # tiers by their names, not their kinds
    assert len(asked) == 1 and "search=n-r2-1" in asked[0], asked

    # Arrow keys move the choice (and wrap), Enter opens the chosen node.
    page.fill("#palette-input", "n-r2-12")
    page.wait_for_function("""() => [...document.querySelectorAll('#palette-list [data-kind=node] .label-text')]
                                     .some(e => e.textContent === 'n-r2-12')""")
    opts = options(page)
    target = opts.index(("node", "n-r2-12"))
    assert active(page) == opts[0]
    page.keyboard.press("ArrowUp")  # wraps to the last
    assert active(page) == opts[-1]
    page.keyboard.press("ArrowDown")
    for _ in range(target):
        page.keyboard.press("ArrowDown")
    assert active(page) == ("node", "n-r2-12")
    screenshot(page, "palette-nodes", full_page=False)
    drifted = Node.objects.get(hostname="n-r2-12")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == f"{live_server.url}/nodes/{drifted.pk}/"

    # A page, by its name; the top bar's button opens the palette too.
    page.click("#palette-open")
    page.wait_for_function(OPEN)
    page.keyboard.type("operat")
    page.wait_for_function("() => document.querySelector('#palette-opt-0').dataset.kind === 'page'")
    assert active(page) == ("page", "Operations")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.endswith("/operations/")

    # An action by what it does: "scale" finds the tiers' "Set the size of …" on the fleet page.
    page.goto(f"{live_server.url}/")
    page.keyboard.press("Control+k")
    page.wait_for_function(OPEN)
    page.keyboard.type("scale")
    page.wait_for_function("() => document.querySelector('#palette-opt-0').dataset.kind === 'action'")
    found = [label for kind, label in options(page) if kind == "action"]
    assert any(label.startswith("Set the size of") for label in found), found
