"""Self-enrolment through the API: an admin issues a bootstrap token; agents join with it (staged pending,
with the admission rules' verdicts); an admin approves (the node and modules exist) or rejects; the agent
polls with its own secret and receives its node key once. Bad input is a clear 4xx with nothing created."""

from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from apps.agents.models import AgentToken, BootstrapToken, Enrolment
from apps.audit.models import AuditEvent
from apps.inventory.choices import FormFactor, NodeState, TierKind
from apps.inventory.models import Module, ModuleType, Node, Rack, Tier

pytestmark = pytest.mark.django_db


@pytest.fixture
def inventory(db: Any) -> dict[str, Any]:
    for level, kind in enumerate(TierKind, 1):
        Tier.objects.get_or_create(kind=kind, defaults={"name": kind.label, "level": level})
    return {"rack": Rack.objects.create(name="r-enrol"), "rack2": Rack.objects.create(name="r-other"),
            "type": ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor=FormFactor.M2,
                                              int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)}


def _issue(api: APIClient, **body: Any) -> Any:
    body = {"scope": {"tier": "hybrid_inference"}, "uses": 3, "reason": "rack r-enrol delivery",
            "expires_at": (timezone.now() + dt.timedelta(hours=1)).isoformat(), **body}
    return api.post("/api/v1/bootstrap-tokens/", body, format="json")


def _token(api: APIClient, **body: Any) -> str:
    r = _issue(api, **body)
    assert r.status_code == 201, r.json()
    return str(r.json()["token"])


def join_body(token: str, host: str, *, machine: str = "", ecc: bool | None = True, modules: int = 1,
              location: str = "", **extra: Any) -> dict[str, Any]:
    return {"bootstrap_token": token, "hostname": host, "machine_id": machine or f"machine-{host}",
            "agent_version": "0.9.0", "location_hint": location,
            "facts": {"cpu_model": "EPYC 4564P", "cpu_cores": 16, "cpu_clock_ghz": 4.5, "memory_gb": 128,
                      "memory_channels": 8, "ecc_memory": ecc, "nic_speed_gbps": 100, "pcie_lanes": 16,
                      "cpu_power_w": 65, "power_budget_w": 150, "l3_cache_mb": 64},
            "modules": [{"serial": f"{host}-m{i}", "vendor": "Axon", "model": "AX-40", "slot": i,
                         "driver_version": "2.3.1", "framework_version": "1.18.0", "firmware_version": "7.1"}
                        for i in range(modules)],
            **extra}


def _join(anon: APIClient, token: str, host: str, **kw: Any) -> Any:
    return anon.post("/api/v1/enrolments/", join_body(token, host, **kw), format="json")


def _claim(anon: APIClient, joined: dict[str, Any]) -> Any:
    return anon.post(f"/api/v1/enrolments/{joined['enrolment']['id']}/claim/", {"secret": joined["secret"]},
                     format="json")


def test_it_stages_a_join_pending_and_hands_the_key_over_once_approved(
        inventory: dict[str, Any], admin_api: APIClient, anon_api: APIClient) -> None:
    issued = _issue(admin_api)
    assert issued.status_code == 201
    key = issued.json()["token"]
    stored = BootstrapToken.objects.get()
    assert key not in (stored.key_hash, stored.key_prefix) and issued.json()["scope"] == {
        "tier": "hybrid_inference", "racks": []}
    assert "token" not in admin_api.get(f"/api/v1/bootstrap-tokens/{stored.pk}/").json()

    r = _join(anon_api, key, "n-join-1", location="r-enrol/7", modules=2)
    assert r.status_code == 201, r.json()
    joined = r.json()
    e = joined["enrolment"]
    assert e["state"] == "pending" and e["rack"] == "r-enrol" and e["slot"] == 7 and e["tier"] == "hybrid_inference"
    assert e["passes_hard_rules"] and e["verdicts"]["errors"] == {}
    assert not Node.objects.filter(hostname="n-join-1").exists()  # staged, not created
    assert BootstrapToken.objects.get().used == 1
    pending = admin_api.get("/api/v1/enrolments/?state=pending").json()
    assert [p["hostname"] for p in pending["results"]] == ["n-join-1"]

    assert _claim(anon_api, joined).json() | {"key": None} == {
        "enrolment": e["id"], "state": "pending", "node": None, "hostname": "n-join-1", "reason": "", "key": None}
    wrong = anon_api.post(f"/api/v1/enrolments/{e['id']}/claim/", {"secret": key}, format="json")
    assert wrong.status_code == 403  # the shared bootstrap token never fetches a key

    r = admin_api.post(f"/api/v1/enrolments/{e['id']}/approve/", {}, format="json")  # the prefilled place
    assert r.status_code == 200, r.json()
    node = Node.objects.get(hostname="n-join-1")
    assert (node.rack.name, node.slot, node.state, node.tier.kind) == ("r-enrol", 7, NodeState.STANDBY,
                                                                       "hybrid_inference")
    assert (node.cpu_clock_ghz, node.memory_gb, node.ecc_memory, node.cpu_model) == (Decimal("4.50"), 128, True,
                                                                                      "EPYC 4564P")
    assert sorted(Module.objects.filter(node=node).values_list("serial", "slot", "firmware_version")) == [
        ("n-join-1-m0", 0, "7.1"), ("n-join-1-m1", 1, "7.1")]
    again = admin_api.post(f"/api/v1/enrolments/{e['id']}/approve/", {}, format="json")
    assert again.status_code == 200 and Node.objects.filter(hostname="n-join-1").count() == 1  # idempotent

    got = _claim(anon_api, joined).json()
    assert got["state"] == "approved" and got["node"] == node.pk and got["key"]
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Agent {got['key']}")
    assert agent.get("/api/v1/agent/self/").json()["node"]["hostname"] == "n-join-1"
    # The answer was lost before the agent used the key: a new poll revokes it and hands over another.
    AgentToken.objects.filter(enrolment=Enrolment.objects.get()).update(last_used_at=None)
    second = _claim(anon_api, joined).json()
    assert second["key"] and second["key"] != got["key"]
    assert AgentToken.objects.filter(node=node, revoked_at__isnull=True).count() == 1
    AgentToken.objects.filter(node=node, revoked_at__isnull=True).update(last_used_at=timezone.now())
    assert _claim(anon_api, joined).status_code == 409  # in use: not handed over a third time

    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert {"bootstrap_token.issue", "enrolment.join", "enrolment.approve", "node.create", "module.create",
            "agent_token.issue"} <= set(actions)
    assert actions.count("enrolment.approve") == 1


def test_it_refuses_bad_tokens_with_nothing_created(inventory: dict[str, Any], admin_api: APIClient,
                                                    anon_api: APIClient) -> None:
    r = _join(anon_api, "forged-" + "x" * 40, "n-forged")
    assert r.status_code == 403 and "not a token this control plane issued" in r.json()["detail"]
    once = _token(admin_api, uses=1)
    assert _join(anon_api, once, "n-first").status_code == 201
    r = _join(anon_api, once, "n-second")
    assert r.status_code == 403 and "used up (1 of 1 joins)" in r.json()["detail"]
    expired = _token(admin_api)
    BootstrapToken.objects.filter(key_prefix=expired[:8]).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    r = _join(anon_api, expired, "n-late")
    assert r.status_code == 403 and "expired at" in r.json()["detail"]
    revoked = _token(admin_api)
    pk = BootstrapToken.objects.get(key_prefix=revoked[:8]).pk
    assert admin_api.post(f"/api/v1/bootstrap-tokens/{pk}/revoke/", {"reason": "lost"}, format="json").json()[
        "revoked_at"]
    r = _join(anon_api, revoked, "n-revoked")
    assert r.status_code == 403 and "was revoked at" in r.json()["detail"]
    assert list(Enrolment.objects.values_list("hostname", flat=True)) == ["n-first"]


def test_it_refuses_bad_facts_naming_what_and_where(inventory: dict[str, Any], admin_api: APIClient,
                                                    anon_api: APIClient) -> None:
    key = _token(admin_api)
    body = join_body(key, "n-bad", modules=2)
    body["modules"][1]["model"] = "AX-999"
    r = anon_api.post("/api/v1/enrolments/", body, format="json")
    assert r.status_code == 404 and "unknown module type Axon AX-999" in r.json()["errors"]["modules[1].model"][0]
    body = join_body(key, "n-bad")
    body["facts"]["cpu_clock_ghz"] = "fast"
    assert list(anon_api.post("/api/v1/enrolments/", body, format="json").json()["errors"]) == ["facts.cpu_clock_ghz"]
    body = join_body(key, "n-bad")
    body["facts"]["cpu_model"] = "x" * (70 * 1024)
    r = anon_api.post("/api/v1/enrolments/", body, format="json")
    assert r.status_code == 413 and "at most 65536 bytes" in r.json()["detail"]
    assert not Enrolment.objects.exists() and BootstrapToken.objects.get().used == 0

    # A module already in another node: refused, both nodes named.
    approved = _join(anon_api, key, "n-owner").json()
    admin_api.post(f"/api/v1/enrolments/{approved['enrolment']['id']}/approve/",
                   {"rack": "r-enrol", "slot": 1}, format="json")
    body = join_body(key, "n-thief")
    body["modules"][0]["serial"] = "n-owner-m0"
    r = anon_api.post("/api/v1/enrolments/", body, format="json")
    owner = Node.objects.get(hostname="n-owner").pk
    assert r.status_code == 409
    assert r.json()["detail"] == f"module n-owner-m0 is in node n-owner (#{owner}), not in n-thief"
    assert not Enrolment.objects.filter(hostname="n-thief").exists()


def test_a_hard_rule_refuses_approval_and_a_bulk_approval_is_all_or_nothing(
        inventory: dict[str, Any], admin_api: APIClient, anon_api: APIClient, viewer_api: APIClient) -> None:
    key = _token(admin_api)
    ids = {}
    for i, (host, ecc) in enumerate((("n-b1", True), ("n-b2", None), ("n-b3", True))):
        r = _join(anon_api, key, host, ecc=ecc, location=f"r-enrol/{10 + i}")
        ids[host] = r.json()["enrolment"]["id"]
    refused = Enrolment.objects.get(pk=ids["n-b2"])
    assert "could not tell whether its memory is ECC" in refused.verdicts["errors"]["ecc_memory"][0]
    r = admin_api.post(f"/api/v1/enrolments/{ids['n-b2']}/approve/", {}, format="json")
    assert r.status_code == 409 and "fails a hard admission rule: ecc_memory" in r.json()["detail"]

    everything = {"items": [{"enrolment": ids[h]} for h in ("n-b1", "n-b2", "n-b3")]}
    assert viewer_api.post("/api/v1/enrolments/approve/", everything, format="json").status_code == 403
    r = admin_api.post("/api/v1/enrolments/approve/", everything, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["items[1]"], r.json()
    assert not Node.objects.exists()  # none approved

    r = admin_api.post("/api/v1/enrolments/approve/", {"items": [
        {"enrolment": ids["n-b1"]}, {"enrolment": ids["n-b3"], "rack": "r-other", "slot": 4}]}, format="json")
    assert r.status_code == 200, r.json()
    assert sorted(Node.objects.values_list("hostname", "rack__name", "slot")) == [
        ("n-b1", "r-enrol", 10), ("n-b3", "r-other", 4)]
    r = admin_api.post(f"/api/v1/enrolments/{ids['n-b2']}/reject/", {"reason": "no ECC: not for serving"},
                       format="json")
    assert r.json()["state"] == "rejected"
    assert admin_api.post(f"/api/v1/enrolments/{ids['n-b1']}/reject/", {"reason": "x"},
                          format="json").status_code == 409


def test_a_rejoin_keeps_the_node_and_revokes_its_old_key(inventory: dict[str, Any], admin_api: APIClient,
                                                        anon_api: APIClient) -> None:
    key = _token(admin_api)
    first = _join(anon_api, key, "n-again", machine="machine-reinstalled", location="r-enrol/3").json()
    admin_api.post(f"/api/v1/enrolments/{first['enrolment']['id']}/approve/", {}, format="json")
    old_key = _claim(anon_api, first).json()["key"]
    node = Node.objects.get(hostname="n-again")

    # Reinstalled: the agent lost its state and joins again, under a new host name even.
    second = _join(anon_api, key, "n-again-reinstalled", machine="machine-reinstalled").json()
    assert second["enrolment"]["rejoin"] and second["enrolment"]["node"] == node.pk
    assert second["enrolment"]["hostname"] == "n-again" and second["enrolment"]["rack"] == "r-enrol"
    r = admin_api.post(f"/api/v1/enrolments/{second['enrolment']['id']}/approve/", {}, format="json")
    assert r.status_code == 200, r.json()
    new_key = _claim(anon_api, second).json()["key"]
    assert Node.objects.count() == 1 and Module.objects.count() == 1
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Agent {old_key}")
    assert agent.get("/api/v1/agent/self/").status_code == 401
    agent.credentials(HTTP_AUTHORIZATION=f"Agent {new_key}")
    assert agent.get("/api/v1/agent/self/").json()["node"]["id"] == node.pk


def test_a_pending_machine_joining_again_is_a_conflict(inventory: dict[str, Any], admin_api: APIClient,
                                                        anon_api: APIClient) -> None:
    key = _token(admin_api)
    assert _join(anon_api, key, "n-twice").status_code == 201
    r = _join(anon_api, key, "n-twice")
    assert r.status_code == 409 and "has a pending enrolment already" in r.json()["detail"]
    assert Enrolment.objects.count() == 1 and BootstrapToken.objects.get().used == 1


@pytest.mark.django_db(transaction=True)
def test_two_joins_racing_stage_one_enrolment(inventory: dict[str, Any], admin_api: APIClient) -> None:
    key = _token(admin_api)
    start = threading.Barrier(2)
    codes: list[int] = []

    def join() -> None:
        try:
            client = APIClient()
            start.wait(10)
            codes.append(_join(client, key, "n-race").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=join) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(codes) == [201, 409]
    assert Enrolment.objects.count() == 1 and BootstrapToken.objects.get().used == 1


def test_a_policy_approves_what_passes_every_hard_rule(inventory: dict[str, Any], admin_api: APIClient,
                                                       anon_api: APIClient) -> None:
    key = _token(admin_api, auto_approve=True, scope={"tier": "hybrid_inference", "racks": ["r-enrol"]})
    ok = _join(anon_api, key, "n-auto", location="r-enrol/20").json()
    assert ok["enrolment"]["state"] == "approved" and _claim(anon_api, ok).json()["key"]
    outside = _join(anon_api, key, "n-outside", location="r-other/20").json()  # a rack outside the scope
    no_ecc = _join(anon_api, key, "n-no-ecc", ecc=False, location="r-enrol/21").json()
    assert outside["enrolment"]["state"] == no_ecc["enrolment"]["state"] == "pending"
    assert outside["enrolment"]["rack"] is None
    assert list(Node.objects.values_list("hostname", flat=True)) == ["n-auto"]
    event = AuditEvent.objects.get(action="enrolment.approve")
    assert event.actor_name.startswith("policy:bootstrap token")


def test_it_is_for_admins_to_issue_and_decide(inventory: dict[str, Any], operator_api: APIClient,
                                             viewer_api: APIClient, admin_api: APIClient,
                                             anon_api: APIClient) -> None:
    assert _issue(operator_api).status_code == 403
    assert viewer_api.get("/api/v1/bootstrap-tokens/").status_code == 403
    key = _token(admin_api)
    e = _join(anon_api, key, "n-roles").json()["enrolment"]
    assert viewer_api.get(f"/api/v1/enrolments/{e['id']}/").json()["hostname"] == "n-roles"
    assert operator_api.post(f"/api/v1/enrolments/{e['id']}/approve/", {}, format="json").status_code == 403
    assert anon_api.get("/api/v1/enrolments/").status_code in (401, 403)
    r = _issue(admin_api, scope={}, uses=0)
    assert r.status_code == 400 and set(r.json()["errors"]) == {"uses"}
    r = _issue(admin_api, scope={})
    assert r.status_code == 400 and "name a tier, racks or both" in r.json()["errors"]["scope"][0]
