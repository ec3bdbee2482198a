"""An operator starts a rollout from the versions page (the preview first, then a reason and a
confirmation) and pauses, resumes and aborts it from the rollout page. The demo's validated
combination is older than the pin: the preview flags the downgrade and a failing health gate, and
Start is offered once both overrides are ticked and a reason given; the rollout page names them."""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone

from apps.accounts.services import user_ensure
from apps.audit.models import AuditEvent
from apps.health.models import Finding
from apps.inventory.choices import CombinationState
from apps.inventory.models import Module, VersionCombination
from apps.rollouts.models import Rollout
from apps.vectors.services import suite_import
from tests.browser.conftest import login_by_cookie, screenshot
from tests.browser.test_axe import blocking
from tests.live.stack import wait_for
from tests.rollouts.conftest import small_specs

pytestmark = [pytest.mark.browser]

OPERATOR, PASSWORD = "browser-operator", "browser-operator-pw-1"


def test_an_operator_previews_a_downgrade_starts_it_past_its_gates_then_pauses_resumes_and_aborts_it(  # type: ignore[no-untyped-def]
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    user_ensure(username=OPERATOR, password=PASSWORD, role="operator")
    suite_import(name="onnx-int8-small", specs=small_specs(), actor="test")
    combination = VersionCombination.objects.filter(state=CombinationState.VALIDATED).select_related(
        "driver", "module_type").first()
    assert combination is not None and combination.driver.version == "2.2.9"  # the pin is 2.3.1
    module = Module.objects.filter(module_type=combination.module_type, node__rack__name="rack-1",
                                   node__state="active", node__gray=False).select_related("node").first()
    assert module is not None and module.node is not None
    now = timezone.now()
    Finding.objects.create(check_name="temperature", subject_kind="module", subject_key=f"module:{module.pk}",
                           node=module.node, module=module, severity="warning", summary="86 °C",
                           first_seen=now, last_seen=now)
    page = browser_page
    reasons = iter(["look at the canary first", "looks fine", "stop here"])
    page.on("dialog", lambda d: d.accept())  # "Start the rollout past the failing gates (...)?"
    login_by_cookie(page, live_server, OPERATOR, next_url="/combinations/")
    page.click(f"a.rollout-start[href$='combination={combination.pk}']")
    page.select_option("select[name=racks]", label="rack-1")
    page.fill("input[name=bake_s]", "5")
    page.click("#preview-button")
    page.wait_for_selector("#preview:not([hidden])")
    preview = page.inner_text("#preview-body")
    assert "Canary" in preview and "active during" in preview.lower() and "Gates now" in preview
    assert module.serial in preview and "module:" not in preview  # modules by serial
    assert page.inner_text("#downgrade-flag") == "downgrade: driver 2.2.9 is older than the pinned 2.3.1"
    assert "fails" in page.inner_text("[data-gate=health]") and f"temperature on module {module.serial}" in \
        page.inner_text("[data-gate=health]")
    assert Rollout.objects.count() == 0  # a preview writes nothing
    start = page.locator("#start-button")
    assert start.is_disabled() and "Tick the override of: Downgrade, Health" in page.inner_text("#start-why")
    page.check("[data-gate=downgrade] .gate-override")
    page.check("[data-gate=health] .gate-override")
    assert start.is_disabled()  # no reason yet
    page.fill("#rollout-reason", "back to the validated driver; the hot module is swapped in its drain")
    assert start.is_enabled()
    assert blocking(Axe(), page, "the new rollout's preview") == []
    screenshot(page, "rollout-preview")
    page.set_viewport_size({"width": 390, "height": 844})  # the preview on a phone: nothing sideways
    page.locator("#preview").scroll_into_view_if_needed()
    screenshot(page, "rollout-preview-390")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1440, "height": 900})
    start.click()
    page.wait_for_url("**/rollouts/*/")
    rollout = Rollout.objects.get()
    assert rollout.reason.startswith("back to the validated driver") and rollout.created_by_name == OPERATOR
    assert [o["gate"] for o in rollout.overrides] == ["downgrade", "health"]
    overrides = page.inner_text("#rollout-overrides")
    assert "downgrade: driver 2.2.9 is older than the pinned 2.3.1" in overrides and "health" in overrides
    assert "the hot module is swapped in its drain" in overrides
    for control, states in (("pause", {"paused"}), ("resume", {"planned", "canary", "waves"}),
                            ("abort", {"aborted"})):
        page.click(f"button[data-control={control}]")
        page.fill("#action-reason", next(reasons))  # the reason dialog
        page.click("#action-confirm")
        wait_for(lambda s=states: Rollout.objects.get(pk=rollout.pk).state in s, timeout=60,  # type: ignore[misc]
                 what=f"the rollout to be {' or '.join(sorted(states))} after {control}")
    page.wait_for_function("() => document.querySelector('#rollout-state').textContent.includes('aborted')")
    actions = set(AuditEvent.objects.filter(target_type="rollout", actor_name=OPERATOR)
                  .values_list("action", flat=True))
    assert {"rollout.create", "rollout.pause", "rollout.resume", "rollout.abort"} <= actions
    screenshot(page, "rollout")
