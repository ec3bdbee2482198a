"""Switching faults at run time: API (operators write, viewers and the gateway read) and command."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from apps.agents.services import agent_token_issue
from apps.audit.models import AuditEvent
from apps.inventory.choices import TierKind
from apps.simulator.models import Fault
from tests.agent.fleet import make_node

URL = "/api/v1/simulator/faults/"


def _agent(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")
    return client


@pytest.mark.django_db
def test_it_lets_operators_switch_a_fault_and_records_who(operator_api: APIClient, viewer_api: APIClient) -> None:
    make_node("n-f-01", modules=2)
    denied = viewer_api.post(URL, {"kind": "pcie_degraded", "node": "n-f-01"}, format="json")
    assert denied.status_code == 403
    assert not Fault.objects.exists()

    on = operator_api.post(URL, {"kind": "pcie_degraded", "node": "n-f-01", "params": {"slot": 1},
                                 "reason": "demo"}, format="json")
    assert on.status_code == 201, on.json()
    body = on.json()
    assert body["enabled"] is True and body["node"] == "n-f-01"
    assert body["params"]["slot"] == 1 and body["params"]["width_factor"] == 0.5  # defaults filled in
    event = AuditEvent.objects.get(action="fault.enable")
    assert event.actor_name == "test-operator" and event.reason == "demo" and event.target_id == str(body["id"])

    listed = viewer_api.get(URL).json()
    assert [f["kind"] for f in listed["results"]] == ["pcie_degraded"]

    off = operator_api.patch(f"{URL}{body['id']}/", {"enabled": False}, format="json")
    assert off.status_code == 200 and off.json()["enabled"] is False
    assert AuditEvent.objects.filter(action="fault.disable", target_id=str(body["id"])).count() == 1
    assert viewer_api.patch(f"{URL}{body['id']}/", {"enabled": True}, format="json").status_code == 403


@pytest.mark.django_db
def test_it_names_what_is_wrong_with_a_fault(operator_api: APIClient) -> None:
    make_node("n-f-02", modules=1)
    bad = operator_api.post(URL, {"kind": "bad_combination", "node": "n-f-02"}, format="json")
    assert bad.status_code == 400 and "node" in bad.json()["errors"]
    bad = operator_api.post(URL, {"kind": "meteor_strike"}, format="json")
    assert bad.status_code == 400 and "kind" in bad.json()["errors"]
    ok = operator_api.post(URL, {"kind": "bad_combination",
                                 "params": {"operator": "Gelu", "driver": "2.4.0", "framework": "1.19.0"}},
                           format="json")
    assert ok.status_code == 201 and ok.json()["params"]["operator"] == "Gelu"


@pytest.mark.django_db
def test_the_gateway_key_reads_faults_and_a_node_key_does_not(operator_api: APIClient, anon_api: APIClient) -> None:
    node = make_node("n-f-03", modules=1)
    operator_api.post(URL, {"kind": "ecc_rising", "node": "n-f-03"}, format="json")
    _, gateway = agent_token_issue(kind="gateway", node=None, actor="test")
    _, node_key = agent_token_issue(kind="node", node=node, actor="test")
    assert _agent(gateway).get(URL).json()["results"][0]["kind"] == "ecc_rising"
    assert _agent(gateway).post(URL, {"kind": "node_crash", "node": "n-f-03"}, format="json").status_code == 403
    assert _agent(node_key).get(URL).status_code == 403
    assert anon_api.get(URL).status_code in (401, 403)


@pytest.mark.django_db
def test_the_fault_command_switches_faults_on_and_off(capsys: Any) -> None:
    make_node("n-f-04", modules=1)
    make_node("n-f-05", tier=TierKind.ACCESS_LOGIC, modules=0, slot=2)
    call_command("fault", "runaway_parsing")  # no node named: an active access & logic node
    fault = Fault.objects.get(kind="runaway_parsing")
    assert fault.enabled and fault.node is not None and fault.node.hostname == "n-f-05"
    call_command("fault", "node_crash", "--node", "n-f-04")
    call_command("fault", "runaway_parsing", "--off")
    fault.refresh_from_db()
    assert not fault.enabled
    assert Fault.objects.get(kind="node_crash").enabled
    call_command("fault", "all", "--off")
    assert not Fault.objects.filter(enabled=True).exists()
    assert AuditEvent.objects.filter(action__startswith="fault.", actor_name="manage.py fault").count() == 4
    with pytest.raises(CommandError, match="no node"):
        call_command("fault", "ecc_rising", "--node", "nope")
