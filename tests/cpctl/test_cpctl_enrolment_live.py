"""cpctl for nodes that joined, against a live web process: ``get enrolments`` is the API's list,
``approve`` places and approves two at once by the hostnames they joined as, a hard admission rule's
refusal ends 1 with the server's words and approves nothing, ``reject`` tells the reason."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from apps.accounts.services import user_ensure
from apps.inventory.choices import FormFactor
from apps.inventory.models import ModuleType, Node, Rack
from tests.agent.fleet import tiers
from tests.agents.test_enrolment import join_body
from tests.cpctl.test_cpctl_live import cpctl, cpctl_env
from tests.live.stack import LiveStack

pytestmark = pytest.mark.live


def test_cpctl_lists_approves_and_rejects_joins(live_stack: LiveStack, tmp_path: Path) -> None:
    tiers()
    Rack.objects.create(name="r-cli")
    ModuleType.objects.create(vendor="Axon", model="AX-40", form_factor=FormFactor.M2, int8_tops=Decimal("40"),
                              power_w=10, pcie_lanes=4)
    live_stack.web()
    user, _ = user_ensure(username="live-cli-admin", password="pw-live-cli-admin", role="admin")
    key = Token.objects.get_or_create(user=user)[0].key
    api = httpx.Client(base_url=live_stack.url, headers={"Authorization": f"Token {key}"}, timeout=10)
    token = api.post("/api/v1/bootstrap-tokens/", json={
        "scope": {"tier": "hybrid_inference"}, "uses": 3, "reason": "rack r-cli",
        "expires_at": (timezone.now() + dt.timedelta(hours=1)).isoformat()}).json()["token"]
    for i, (host, ecc) in enumerate((("n-cli-1", True), ("n-cli-2", True), ("n-cli-3", None)), 1):
        r = httpx.post(f"{live_stack.url}/api/v1/enrolments/",
                       json=join_body(token, host, ecc=ecc, location=f"r-cli/{i}"), timeout=10)
        assert r.status_code == 201, r.text
    env = cpctl_env(tmp_path)
    assert cpctl(env, "config", "set-context", "live", "--server", live_stack.url, "--token", key).returncode == 0

    done = cpctl(env, "get", "enrolments", "--state", "pending", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == api.get("/api/v1/enrolments/",
                                              params={"state": "pending", "limit": 1000}).json()["results"]
    table = cpctl(env, "get", "enrolments").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "STATE", "RACK", "SLOT", "MODULES", "HARD", "RULES"]
    assert "could not tell whether its memory is ECC" in next(line for line in table if "n-cli-3" in line)

    done = cpctl(env, "approve", "n-cli-3", "n-cli-1", "--reason", "rack r-cli")
    assert done.returncode == 1 and "fails a hard admission rule: ecc_memory" in done.stderr, done.stderr
    assert not Node.objects.exists()  # all or none
    done = cpctl(env, "approve", "n-cli-1", "--rack", "r-cli", "--slot", "7", "--reason", "rack r-cli")
    assert done.returncode == 0, done.stderr
    first = api.get("/api/v1/enrolments/", params={"hostname": "n-cli-1"}).json()["results"][0]["id"]
    assert done.stdout == (f"enrolment/{first} n-cli-1 approved: node/n-cli-1 in r-cli slot 7; its agent receives "
                           "its key at its next poll\n")
    assert cpctl(env, "approve", "n-cli-1", "n-cli-2", "--slot", "3").returncode == 2  # one slot, two nodes
    done = cpctl(env, "approve", "n-cli-2")
    assert done.returncode == 0 and "node/n-cli-2 in r-cli slot 2" in done.stdout  # the hint's place
    done = cpctl(env, "reject", "n-cli-3", "--reason", "no ECC memory")
    assert done.returncode == 0 and "n-cli-3 rejected" in done.stdout
    assert sorted(Node.objects.values_list("hostname", "slot")) == [("n-cli-1", 7), ("n-cli-2", 2)]
