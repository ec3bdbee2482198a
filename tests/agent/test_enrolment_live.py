"""Real agents join the live stack with a bootstrap token: three join with one token, a hard admission
rule refuses one, one bulk action approves the other two, and their reports arrive under the keys they
were given; an agent whose state was deleted joins again and keeps its node; a token past its uses is
refused."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from django.utils import timezone
from rest_framework.authtoken.models import Token

from apps.accounts.services import user_ensure
from apps.agents.models import AgentToken, Enrolment
from apps.inventory.choices import FormFactor
from apps.inventory.models import Module, ModuleType, Node, Rack
from apps.telemetry.models import IngestBatch, NodeStatus
from tests.agent.fleet import tiers
from tests.live.stack import AgentProc, LiveStack, wait_for

FACTS = {"cpu_model": "EPYC 4564P", "cpu_cores": 16, "cpu_clock_ghz": 4.5, "memory_gb": 128, "memory_channels": 8,
         "ecc_memory": True, "nic_speed_gbps": 100, "pcie_lanes": 16, "cpu_power_w": 65, "power_budget_w": 150}


def _admin(stack: LiveStack) -> httpx.Client:
    user, _ = user_ensure(username="live-admin", password="pw-live-admin", role="admin")
    token, _ = Token.objects.get_or_create(user=user)
    return httpx.Client(base_url=stack.url, headers={"Authorization": f"Token {token.key}"}, timeout=15)


def _bootstrap_token(api: httpx.Client, uses: int) -> str:
    r = api.post("/api/v1/bootstrap-tokens/", json={
        "scope": {"tier": "hybrid_inference", "racks": ["r-live"]}, "uses": uses, "reason": "rack r-live delivery",
        "expires_at": (timezone.now() + dt.timedelta(hours=1)).isoformat()})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def _host_files(tmp: Path, host: str, *, ecc: bool) -> tuple[str, str]:
    """The host's --facts file and a vendor tool that lists its two modules (--discover)."""
    facts = tmp / f"{host}-facts.json"
    facts.write_text(json.dumps({**FACTS, "ecc_memory": ecc}))
    listing = tmp / f"{host}-modules.json"
    listing.write_text(json.dumps([{"serial": f"{host}-m{i}", "vendor": "Axon", "model": "AX-40", "slot": i,
                                    "pcie_lanes": 4, "firmware_version": "7.1", "driver_version": "2.3.1",
                                    "framework_version": "1.18.0"} for i in range(2)]))
    return str(facts), f"command:cat {listing}"


def _join(stack: LiveStack, tmp: Path, host: str, token: str, slot: int, *, ecc: bool = True) -> AgentProc:
    facts, discover = _host_files(tmp, host, ecc=ecc)
    return stack.joining_agent(host, "--machine-id", f"machine-{host}-0001", "--facts", facts, "--discover", discover,
                               "--location", f"r-live/{slot}", "--backend", "simulated", "--send-interval", "1",
                               bootstrap_token=token)


def _pending(api: httpx.Client, count: int) -> list[dict[str, Any]]:
    def seen() -> list[dict[str, Any]]:
        found = list(api.get("/api/v1/enrolments/", params={"state": "pending"}).json()["results"])
        return found if len(found) == count else []
    return wait_for(seen, timeout=60, what=f"{count} pending enrolments")


def _reports_with_its_key(node: Node, *, since: dt.datetime) -> AgentToken:
    """The node's key handed over by its latest enrolment, once a batch sent with it is stored and the node's
    status is newer than ``since``."""
    def reported() -> AgentToken | None:
        key = AgentToken.objects.filter(node=node, enrolment__isnull=False, revoked_at__isnull=True).first()
        status = NodeStatus.objects.filter(node=node).first()
        if key is None or status is None or status.time < since:
            return None
        stored = IngestBatch.objects.filter(scope=f"node:{node.pk}", token=key, stored_at__isnull=False).exists()
        return key if stored else None
    key = wait_for(reported, timeout=90, what=f"{node.hostname}'s reports under its new key")
    assert key is not None
    return key


def test_three_agents_join_with_one_token_and_two_are_approved_at_once(live_stack: LiveStack,
                                                                        tmp_path: Path) -> None:
    tiers()
    Rack.objects.create(name="r-live")
    ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor=FormFactor.M2, int8_tops=Decimal("40"),
                              power_w=10, pcie_lanes=4)
    live_stack.web()
    api = _admin(live_stack)
    token = _bootstrap_token(api, uses=3)
    agents = {host: _join(live_stack, tmp_path, host, token, slot, ecc=host != "n-join-c")
              for slot, host in enumerate(("n-join-a", "n-join-b", "n-join-c"), 1)}

    pending = {e["hostname"]: e for e in _pending(api, 3)}
    assert not Node.objects.exists()  # staged only
    assert pending["n-join-a"]["passes_hard_rules"] and pending["n-join-b"]["passes_hard_rules"]
    refused = pending["n-join-c"]
    assert not refused["passes_hard_rules"] and "no ECC memory" in refused["verdicts"]["errors"]["ecc_memory"][0]
    assert (pending["n-join-b"]["rack"], pending["n-join-b"]["slot"]) == ("r-live", 2)  # from the hint

    # One bulk action approves the two that pass; the hard rule keeps the third out of any bulk action.
    r = api.post("/api/v1/enrolments/approve/", json={"items": [{"enrolment": refused["id"]}]})
    assert r.status_code == 400 and "fails a hard admission rule" in r.json()["errors"]["items[0]"][0]
    started = timezone.now()
    r = api.post("/api/v1/enrolments/approve/", json={
        "items": [{"enrolment": pending[h]["id"]} for h in ("n-join-a", "n-join-b")], "reason": "rack r-live"})
    assert r.status_code == 200, r.text
    nodes = {h: Node.objects.get(hostname=h) for h in ("n-join-a", "n-join-b")}
    assert sorted(Module.objects.filter(node__in=nodes.values()).values_list("serial", flat=True)) == [
        "n-join-a-m0", "n-join-a-m1", "n-join-b-m0", "n-join-b-m1"]
    for host, node in nodes.items():
        key = _reports_with_its_key(node, since=started)
        assert key.enrolment.hostname == host  # type: ignore[union-attr]
        key_file = live_stack.dir / f"spool-{host}" / "node.key"
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        assert AgentToken.objects.filter(node=node).count() == 1  # the bootstrap token fetched none
    r = api.post(f"/api/v1/enrolments/{refused['id']}/reject/", json={"reason": "no ECC memory: not for serving"})
    assert r.status_code == 200
    wait_for(lambda: not agents["n-join-c"].alive(), timeout=30, what="the rejected agent to stop")
    assert agents["n-join-c"].popen.returncode == 3  # type: ignore[union-attr]
    assert "was rejected: no ECC memory: not for serving" in agents["n-join-c"].log()
    assert not (live_stack.dir / "spool-n-join-c" / "enrolment.json").exists()  # the next start joins anew

    # A token past its uses is refused: the agent says why and stops.
    late = _join(live_stack, tmp_path, "n-join-d", token, 4)
    wait_for(lambda: not late.alive(), timeout=30, what="the fourth agent to be refused")
    assert late.popen.returncode == 2 and "used up (3 of 3 joins)" in late.log()  # type: ignore[union-attr]
    assert not Enrolment.objects.filter(hostname="n-join-d").exists()

    # Reinstalled: the agent's state is gone; it joins again (same machine id and modules) and keeps its node.
    node = nodes["n-join-a"]
    first_key = AgentToken.objects.get(node=node)
    agents["n-join-a"].stop()
    shutil.rmtree(live_stack.dir / "spool-n-join-a")
    again = _join(live_stack, tmp_path, "n-join-a", _bootstrap_token(api, uses=1), 1)
    rejoin = _pending(api, 1)[0]
    assert rejoin["rejoin"] and rejoin["node"] == node.pk and rejoin["verdicts"]["warnings"] == []
    restarted = timezone.now()
    assert api.post(f"/api/v1/enrolments/{rejoin['id']}/approve/", json={}).status_code == 200
    second_key = _reports_with_its_key(node, since=restarted)
    assert second_key.pk != first_key.pk
    first_key.refresh_from_db()
    assert first_key.revoked_at is not None
    assert Node.objects.filter(hostname__startswith="n-join-").count() == 2 and Module.objects.count() == 4
    assert again.alive()
