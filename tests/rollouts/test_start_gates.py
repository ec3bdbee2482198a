"""A rollout starts only when every dry-run gate passes, or past the failing ones an operator names in
``override`` with a reason: a 409 naming the failing gates otherwise, a 400 for overriding a gate
that passes. A downgrade (the target older than the pin) is such a gate; the health gate counts only
the findings the rollout will not fix. A node with an open critical finding is not planned at all:
skipped, the finding named, and its page says so. A preview writes nothing, so a viewer may ask for
one."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.health.models import Finding
from apps.inventory.choices import CombinationState
from apps.inventory.models import DriverRelease, Module, Node, VersionCombination
from apps.rollouts.models import Rollout, RolloutNode
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.django_db


def _body(rfleet: RolloutFleet, **kw: Any) -> dict[str, Any]:
    return {"combination": rfleet.candidate.pk, "module_type": rfleet.mtype.pk, "suite": rfleet.suite.pk,
            "wave_size": 2, "max_unavailable": "2", "bake_s": 0, "reason": "new driver", **kw}


def _fleet(rfleet: RolloutFleet) -> list[Node]:
    return [rfleet.node(f"n-{i}") for i in range(1, 5)]


def _finding(check: str, *, node: Node, module: Module | None = None, severity: str = "") -> Finding:
    """A finding the health gate counts; a warning unless told (a critical one keeps its node out of the
    plan instead)."""
    now = timezone.now()
    return Finding.objects.create(
        check_name=check, subject_kind="module" if module else "node",
        subject_key=f"module:{module.pk}" if module else f"node:{node.pk}", node=node, module=module,
        severity=severity or ("info" if check == "version_drift" else "warning"), summary=f"{check} found",
        first_seen=now, last_seen=now)


def _combination(rfleet: RolloutFleet, driver: str) -> VersionCombination:
    release = DriverRelease.objects.create(vendor="Axon", version=driver)
    return VersionCombination.objects.create(module_type=rfleet.mtype, driver=release, framework=rfleet.framework,
                                             state=CombinationState.VALIDATED)


def test_a_failing_gate_refuses_the_start_with_a_409_naming_it_and_writes_nothing(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    node = _fleet(rfleet)[0]
    _finding("ecc", node=node)
    preview = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet), format="json").json()
    assert preview["failing"] == ["health"] and preview["gates"]["health"]["overridable"] is True, preview["gates"]
    response = operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json")
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["gates"] == ["health"] and body["field"] == "override", body
    assert "health: 1 active finding(s) the rollout will not fix: ecc on n-1" in body["detail"], body
    assert 'override: ["health"]' in body["detail"]
    assert (Rollout.objects.count(), RolloutNode.objects.count()) == (0, 0)


def test_an_override_with_a_reason_starts_it_and_the_audit_record_and_the_rollout_name_it(
        rfleet: RolloutFleet, operator_api: APIClient, viewer_user: User) -> None:
    node = _fleet(rfleet)[0]
    _finding("ecc", node=node)
    response = operator_api.post("/api/v1/rollouts/", _body(rfleet, override=["health"],
                                                            reason="the ECC DIMM is replaced in the canary's drain"),
                                 format="json")
    assert response.status_code == 201, response.json()
    rollout = response.json()
    assert [o["gate"] for o in rollout["overrides"]] == ["health"], rollout
    assert "ecc on n-1" in rollout["overrides"][0]["detail"]
    assert operator_api.get(f"/api/v1/rollouts/{rollout['id']}/").json()["overrides"] == rollout["overrides"]
    event = AuditEvent.objects.get(action="rollout.create", target_id=str(rollout["id"]))
    assert event.reason == "the ECC DIMM is replaced in the canary's drain"
    assert event.changes["overrides"][1][0].startswith("health: 1 active finding(s)"), event.changes
    client = Client()
    client.force_login(viewer_user)
    page = client.get(f"/rollouts/{rollout['id']}/").content.decode()
    assert 'id="rollout-overrides"' in page and "health" in page and "ECC DIMM is replaced" in page


def test_overriding_a_gate_that_passes_or_one_that_cannot_be_overridden_is_a_400(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    _fleet(rfleet)
    response = operator_api.post("/api/v1/rollouts/", _body(rfleet, override=["health"]), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["errors"]["override"] == ["the health gate passes; there is nothing to override"]
    response = operator_api.post("/api/v1/rollouts/", _body(rfleet, override=["one_active_rollout"]), format="json")
    assert response.status_code == 400 and "override[0]" in response.json()["errors"], response.json()
    assert Rollout.objects.count() == 0
    assert operator_api.post("/api/v1/rollouts/", _body(rfleet), format="json").status_code == 201


def test_a_downgrade_is_flagged_in_the_preview_and_needs_its_override(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    _fleet(rfleet)
    older = _combination(rfleet, "2.2.9")
    preview = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet, combination=older.pk), format="json")
    assert preview.status_code == 200, preview.json()
    gate = preview.json()["gates"]["downgrade"]
    assert gate["ok"] is False and gate["detail"] == "downgrade: driver 2.2.9 is older than the pinned 2.3.1", gate
    assert preview.json()["pinned"] == {"driver": "2.3.1", "framework": "1.18.0"}
    refused = operator_api.post("/api/v1/rollouts/", _body(rfleet, combination=older.pk), format="json")
    assert refused.status_code == 409 and refused.json()["gates"] == ["downgrade"], refused.json()
    ecc = _finding("ecc", node=Node.objects.get(hostname="n-2"))
    one_of_two = operator_api.post("/api/v1/rollouts/", _body(rfleet, combination=older.pk, override=["downgrade"]),
                                   format="json")
    assert one_of_two.status_code == 409 and one_of_two.json()["gates"] == ["health"], one_of_two.json()
    ecc.delete()
    started = operator_api.post("/api/v1/rollouts/", _body(rfleet, combination=older.pk, override=["downgrade"],
                                                           reason="2.3.1 loses precision on QLinearMatMul"),
                                format="json")
    assert started.status_code == 201, started.json()
    assert started.json()["overrides"] == [{"gate": "downgrade", "detail": gate["detail"]}]


def test_versions_are_compared_as_versions_not_as_text(rfleet: RolloutFleet, operator_api: APIClient) -> None:
    _fleet(rfleet)
    newer = _combination(rfleet, "2.10.0")  # as text, "2.10.0" < "2.3.1"
    gate = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet, combination=newer.pk),
                             format="json").json()["gates"]["downgrade"]
    assert gate["ok"] is True, gate
    assert operator_api.post("/api/v1/rollouts/", _body(rfleet, combination=newer.pk), format="json").status_code == 201


def test_drift_on_the_nodes_the_rollout_moves_is_expected_and_other_findings_count(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    nodes = _fleet(rfleet)
    module = Module.objects.get(node=nodes[0])
    Module.objects.filter(pk=module.pk).update(driver_version="2.2.9")
    _finding("version_drift", node=nodes[0], module=module)
    gate = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet), format="json").json()["gates"]["health"]
    assert gate["ok"] is True and gate["findings"] == [], gate
    assert [f["subject"] for f in gate["expected"]] == ["module n-1-m0 on n-1"], gate
    assert "1 version-drift finding(s) on nodes it moves to the target are expected" in gate["detail"]
    # A finding the rollout does not fix on the same module counts, named by the module's serial.
    _finding("temperature", node=nodes[0], module=module)
    gate = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet), format="json").json()["gates"]["health"]
    assert gate["ok"] is False and "temperature on module n-1-m0 on n-1" in gate["detail"], gate
    assert "module:" not in gate["detail"]


def test_a_viewer_may_preview_but_not_start(rfleet: RolloutFleet, viewer_api: APIClient) -> None:
    _fleet(rfleet)
    preview = viewer_api.post("/api/v1/rollouts/preview/", _body(rfleet), format="json")
    assert preview.status_code == 200 and preview.json()["failing"] == [], preview.json()
    refused = viewer_api.post("/api/v1/rollouts/", _body(rfleet), format="json")
    assert refused.status_code == 403 and Rollout.objects.count() == 0


def test_a_node_with_an_open_critical_finding_is_skipped_naming_it_and_a_warning_does_not_skip(
        rfleet: RolloutFleet, operator_api: APIClient) -> None:
    nodes = _fleet(rfleet)
    module = Module.objects.get(node=nodes[1])
    ecc = _finding("ecc", node=nodes[1], module=module, severity="critical")
    _finding("temperature", node=nodes[2], module=Module.objects.get(node=nodes[2]))
    preview = operator_api.post("/api/v1/rollouts/preview/", _body(rfleet), format="json").json()
    planned = [n["hostname"] for w in preview["waves"] for n in w["nodes"]]
    assert "n-2" not in planned and "n-3" in planned, preview["waves"]  # the warning does not skip its node
    skipped = {s["hostname"]: s["reason"] for s in preview["skipped"]}
    assert f"critical health finding #{ecc.pk} ECC errors (ecc) on module {module.serial} on n-2 is open: " \
           "ecc found" in skipped["n-2"], skipped
    # Its finding no longer weighs on the health gate (the node is not moved); the warning still does.
    assert preview["failing"] == ["health"] and "temperature on module n-3-m0 on n-3" in \
        preview["gates"]["health"]["detail"] and "ecc" not in preview["gates"]["health"]["detail"], preview["gates"]
    created = operator_api.post("/api/v1/rollouts/", _body(rfleet, override=["health"], reason="fans replaced"),
                                format="json")
    assert created.status_code == 201, created.json()
    rn = RolloutNode.objects.get(rollout_id=created.json()["id"], node=nodes[1])
    assert rn.step == "skipped" and rn.wave is None and f"#{ecc.pk}" in rn.reason
    event = AuditEvent.objects.get(action="rollout.node.skipped", target_id=str(nodes[1].pk))
    assert f"critical health finding #{ecc.pk}" in event.reason and event.related_id == str(created.json()["id"])


def test_the_node_page_says_rollouts_skip_it_while_its_critical_finding_is_open(
        rfleet: RolloutFleet, viewer_user: User) -> None:
    nodes = _fleet(rfleet)
    ecc = _finding("ecc", node=nodes[1], module=Module.objects.get(node=nodes[1]), severity="critical")
    _finding("temperature", node=nodes[2], module=Module.objects.get(node=nodes[2]))
    client = Client()
    client.force_login(viewer_user)
    page = client.get(f"/nodes/{nodes[1].pk}/").content.decode()
    assert f"Rollouts skip this node while its critical finding #{ecc.pk} (ECC errors) is open" in page
    assert 'id="node-rollout-skip"' not in client.get(f"/nodes/{nodes[2].pk}/").content.decode()  # a warning
    ecc.state = "resolved"
    ecc.save(update_fields=["state"])
    assert 'id="node-rollout-skip"' not in client.get(f"/nodes/{nodes[1].pk}/").content.decode()
