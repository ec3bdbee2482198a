"""The health API: checks (admins PATCH, 400 naming the field), findings with filters and
the advisor, acknowledge (409 when resolved), silences."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.health.choices import FindingState
from apps.health.models import Finding, HealthCheck, Silence
from tests.health.conftest import HealthFleet, sweeps


def _finding(hfleet: HealthFleet) -> Finding:
    hfleet.node("n-0")
    hfleet.node("n-1")
    hfleet.all_report(modules={"n-1-m1": {"link_width": 2}})
    sweeps(3)
    return Finding.objects.get(check_name="link_width")


def test_it_lists_checks_and_lets_admins_change_parameters(admin_api: APIClient, operator_api: APIClient) -> None:
    checks = admin_api.get("/api/v1/health/checks/").json()
    ecc = next(c for c in checks if c["name"] == "ecc")
    assert ecc["params"] == {"corrected_per_min": 10, "window_min": 3} and ecc["policy"] == "alert"
    assert ecc["capability"] == "ecc" and ecc["raise_n"] == 3 and ecc["raise_m"] == 5 and ecc["clear_k"] == 5

    r = admin_api.patch("/api/v1/health/checks/ecc/", {"params": {"window_min": -2}}, format="json")
    assert r.status_code == 400 and "params.window_min" in r.json()["errors"]
    r = admin_api.patch("/api/v1/health/checks/temperature/", {"params": {"max_c": 900}}, format="json")
    assert r.status_code == 400 and "params.max_c" in r.json()["errors"]
    r = admin_api.patch("/api/v1/health/checks/ecc/", {"raise_n": 6}, format="json")
    assert r.status_code == 400 and "raise_n" in r.json()["errors"]
    assert not HealthCheck.objects.exists()  # nothing half-written

    assert operator_api.patch("/api/v1/health/checks/ecc/", {"policy": "act"}, format="json").status_code == 403
    r = admin_api.patch("/api/v1/health/checks/ecc/", {"params": {"window_min": 5}, "policy": "act"}, format="json")
    assert r.status_code == 200 and r.json()["params"]["window_min"] == 5 and r.json()["policy"] == "act"
    event = AuditEvent.objects.get(action="health.check_update")
    assert event.changes["policy"] == ["alert", "act"]
    assert admin_api.get("/api/v1/health/checks/nope/").status_code == 404


def test_it_filters_findings_and_gives_the_advisors_causes(hfleet: HealthFleet, operator_api: APIClient) -> None:
    f = _finding(hfleet)
    rows = operator_api.get("/api/v1/health/findings/", {"state": "open", "check": "link_width"}).json()["results"]
    [row] = rows
    assert row["id"] == f.pk and row["module_serial"] == "n-1-m1" and row["node_hostname"] == "n-1"
    assert row["evidence"] == {"link_width": 2, "expected": 4}
    assert "lane" in row["advice"][0]["cause"] and row["advice"][0]["confirm"] and row["advice"][0]["remedy"]
    assert row["advice"][0]["link"] == f"/nodes/{f.node_id}/"
    assert operator_api.get("/api/v1/health/findings/", {"node": hfleet.nodes["n-0"].pk}).json()["results"] == []
    later = (timezone.now() + dt.timedelta(minutes=1)).isoformat()
    assert operator_api.get("/api/v1/health/findings/", {"since": later}).json()["results"] == []
    assert operator_api.get("/api/v1/health/findings/", {"state": "nope"}).status_code == 400


def test_it_acknowledges_with_a_reason_and_refuses_a_resolved_finding(hfleet: HealthFleet, operator_api: APIClient,
                                                                     viewer_api: APIClient) -> None:
    f = _finding(hfleet)
    url = f"/api/v1/health/findings/{f.pk}/acknowledge/"
    assert viewer_api.post(url, {"reason": "x"}, format="json").status_code == 403
    r = operator_api.post(url, {}, format="json")
    assert r.status_code == 400 and "reason" in r.json()["errors"]
    r = operator_api.post(url, {"reason": "reseating it at 14:00"}, format="json")
    assert r.status_code == 200 and r.json()["state"] == "acknowledged"
    assert r.json()["acknowledged_by_name"] == "test-operator"
    Finding.objects.filter(pk=f.pk).update(state=FindingState.RESOLVED, resolved_at=timezone.now())
    r = operator_api.post(url, {"reason": "again"}, format="json")
    assert r.status_code == 409 and "resolved" in r.json()["detail"]


def test_it_creates_silences(hfleet: HealthFleet, operator_api: APIClient) -> None:
    node = hfleet.node("n-0")
    until = (timezone.now() + dt.timedelta(hours=2)).isoformat()
    r = operator_api.post("/api/v1/health/silences/", {"check": "ecc", "node": node.pk, "reason": "DIMM swap",
                                                       "expires_at": until}, format="json")
    assert r.status_code == 201 and r.json()["check"] == "ecc"
    assert Silence.objects.get().created_by_name == "test-operator"
    past = (timezone.now() - dt.timedelta(hours=1)).isoformat()
    r = operator_api.post("/api/v1/health/silences/", {"reason": "x", "expires_at": past}, format="json")
    assert r.status_code == 409 and "expires_at" in r.json()["errors"]  # the clock's rule: documented 409
    r = operator_api.post("/api/v1/health/silences/", {"check": "nope", "reason": "x", "expires_at": until},
                          format="json")
    assert r.status_code == 400 and "check" in r.json()["errors"]


def test_a_module_type_declares_its_capabilities(admin_api: APIClient) -> None:
    body = {"vendor": "Axon", "model": "AX-10", "form_factor": "m2", "int8_tops": "10", "power_w": 8,
            "pcie_lanes": 2, "capabilities": ["link_width", "temperature"]}
    r = admin_api.post("/api/v1/module-types/", body, format="json")
    assert r.status_code == 201 and r.json()["capabilities"] == ["link_width", "temperature"]
    r = admin_api.post("/api/v1/module-types/", {**body, "model": "AX-11", "capabilities": ["nvlink"]}, format="json")
    assert r.status_code == 400 and "capabilities[0]" in r.json()["errors"]
    del body["capabilities"]
    r = admin_api.post("/api/v1/module-types/", {**body, "model": "AX-13"}, format="json")
    assert r.status_code == 201 and r.json()["capabilities"] == ["ecc", "link_width", "temperature", "power", "errors"]


def test_it_merges_per_stage_targets_key_by_key(admin_api: APIClient) -> None:
    r = admin_api.patch("/api/v1/health/checks/stage_latency/", {"params": {"p95_ms": {"tool_call": 3000}}},
                        format="json")
    assert r.status_code == 200
    targets = r.json()["params"]["p95_ms"]
    assert targets["tool_call"] == 3000 and targets["perception"] == 400 and targets["generation"] == 2500
