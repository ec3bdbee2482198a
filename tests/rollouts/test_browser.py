"""An operator starts a rollout from the versions page (the preview first, then a reason and a
confirmation) and pauses, resumes and aborts it from the rollout page."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.services import user_ensure
from apps.audit.models import AuditEvent
from apps.inventory.choices import CombinationState
from apps.inventory.models import VersionCombination
from apps.rollouts.models import Rollout
from apps.vectors.services import suite_import
from tests.browser.conftest import login_by_cookie, screenshot
from tests.live.stack import wait_for
from tests.rollouts.conftest import small_specs

pytestmark = [pytest.mark.browser]

OPERATOR, PASSWORD = "browser-operator", "browser-operator-pw-1"


def test_an_operator_previews_starts_pauses_resumes_and_aborts_a_rollout(  # type: ignore[no-untyped-def]
        browser_page: Any, live_server: Any, demo_fleet: dict[str, Any]) -> None:
    user_ensure(username=OPERATOR, password=PASSWORD, role="operator")
    suite_import(name="onnx-int8-small", specs=small_specs(), actor="test")
    combination = VersionCombination.objects.filter(state=CombinationState.VALIDATED).first()
    assert combination is not None
    page = browser_page
    reasons = iter(["look at the canary first", "looks fine", "stop here"])
    page.on("dialog", lambda d: d.accept())  # "Start the rollout now?"
    login_by_cookie(page, live_server, OPERATOR, next_url="/combinations/")
    page.click(f"a.rollout-start[href$='combination={combination.pk}']")
    page.select_option("select[name=racks]", label="rack-1")
    page.fill("input[name=bake_s]", "5")
    page.click("#preview-button")
    page.wait_for_selector("#preview:not([hidden])")
    preview = page.inner_text("#preview-body")
    assert "Canary" in preview and "active during" in preview.lower() and "Gates now" in preview
    assert Rollout.objects.count() == 0  # a preview writes nothing
    page.fill("#rollout-reason", "back to the validated driver")
    page.click("#start-button")
    page.wait_for_url("**/rollouts/*/")
    rollout = Rollout.objects.get()
    assert rollout.reason == "back to the validated driver" and rollout.created_by_name == OPERATOR
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
