"""cpctl as an operator runs it: a subprocess against a live web process, with a context set
through cpctl itself. Its JSON is the API's list; ``drain --wait`` shows the node's in-flight
count while it waits and ends 0 once the node is drained; a drain the capacity guard refuses
ends 1 with the server's text as the API words it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from rest_framework.authtoken.models import Token

from agent.cp_agent import __version__ as agent_version
from agent.cp_agent.client import CONTRACT_HOLDERS
from apps.accounts.services import user_ensure
from apps.inventory.choices import TierKind
from apps.inventory.models import Node, Tier
from apps.operations import controllers as operations
from apps.operations.models import Drain
from apps.telemetry.models import NodeStatus
from controlplane.engines import BASE_DIR
from tests.agent.fleet import make_node
from tests.agent.promserver import PromServer, in_flight_gauge
from tests.live.stack import LiveStack, wait_for

pytestmark = pytest.mark.live

GAUGE = "nv_inference_pending_request_count"


def cpctl_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CPCTL_")}
    return {**env, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def cpctl(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cpctl", *args], cwd=BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_cpctl_lists_the_fleet_drains_a_node_with_wait_and_prints_the_capacity_guards_refusal(
        live_stack: LiveStack, prom_server: PromServer, tmp_path: Path) -> None:
    live_stack.web()
    serving = make_node("n-cli-a", modules=0, slot=1)
    last = make_node("n-cli-b", modules=0, slot=2)
    Tier.objects.filter(kind=TierKind.HYBRID_INFERENCE).update(min_active_nodes=1)  # the floor: one serving node
    user, _ = user_ensure(username="live-cli-operator", password="pw-live-cli", role="operator")
    key = Token.objects.get_or_create(user=user)[0].key
    api = httpx.Client(base_url=live_stack.url, headers={"Authorization": f"Token {key}"}, timeout=10)
    env = cpctl_env(tmp_path)

    done = cpctl(env, "config", "set-context", "live", "--server", live_stack.url, "--token", key)
    assert done.returncode == 0, done.stderr
    # The list as JSON is the API's own list, object for object.
    done = cpctl(env, "get", "nodes", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == api.get("/api/v1/nodes/", params={"limit": 1000}).json()["results"]
    assert [n["hostname"] for n in json.loads(done.stdout)] == ["n-cli-a", "n-cli-b"]

    # n-cli-a serves 2 requests; its agent reads them from the serving process's gauge.
    prom_server.serve(in_flight_gauge({"intent-1b": 2}))
    live_stack.agent(serving, "--in-flight-from", f"prometheus:{prom_server.url}#{GAUGE}", "--backend", "none",
                     "--send-interval", "1", interval=0.5)
    wait_for(lambda: (s := NodeStatus.objects.filter(node=serving).first()) is not None and s.in_flight == 2,
             timeout=30, what="the agent to report 2 in flight")
    # the agent said which agent it is (its requests' headers); -o wide shows it
    wait_for(lambda: Node.objects.filter(pk=serving.pk, agent_version=agent_version,
                                         agent_contract=CONTRACT_HOLDERS).exists(),
             timeout=30, what="the node to keep its agent's version and contract")
    wide = cpctl(env, "get", "nodes", "n-cli-a", "-o", "wide")
    assert wide.stdout.splitlines()[0].split()[-2:] == ["AGENT", "ACTIONS"], wide.stdout
    assert f" {agent_version}/c{CONTRACT_HOLDERS} " in wide.stdout.splitlines()[1], wide.stdout
    err_path = tmp_path / "drain.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "cpctl", "drain", "n-cli-a", "--reason", "swap DIMM 3",
                                 "--deadline", "10m", "--wait", "--timeout", "3m"], cwd=BASE_DIR, env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            # While it waits it says the node's count and what the drain waits for, from the API.
            wait_for(lambda: "node/n-cli-a draining, in flight 2: waiting for 2 in-flight requests; deadline in "
                     in err_path.read_text(), timeout=60, what="cpctl to show the drain waiting for 2 requests")
            drain = Drain.objects.get(node=serving, state="draining")
            prom_server.serve(in_flight_gauge({"intent-1b": 0}))  # the serving process finishes its work

            def finished() -> int | None:  # the drain controller, ticked by the test on its own clock
                operations.drain_advance(drain_id=drain.pk)
                return proc.poll()
            wait_for(lambda: finished() is not None, timeout=60, what="cpctl to end once drained", interval=0.5)
            out = proc.stdout.read() if proc.stdout else ""
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err_path.read_text()
    assert out.splitlines()[0].startswith("node/n-cli-a drain started (state draining)")
    assert out.splitlines()[-1].startswith("node/n-cli-a drained after ")
    assert Drain.objects.get(pk=drain.pk).state == "drained"

    # The last serving node: the capacity guard refuses, and cpctl prints its words as sent.
    done = cpctl(env, "drain", "n-cli-b", "--reason", "swap DIMM 3", "--wait")
    refusal = api.post(f"/api/v1/nodes/{last.pk}/drain/", json={"reason": "swap DIMM 3"}).json()
    assert done.returncode == 1, done.stdout + done.stderr
    assert refusal["capacity"]["floor"] == 1 and refusal["capacity"]["after"] == 0
    assert done.stderr == f"node/n-cli-b drain: refused (HTTP 409):\n{refusal['detail']}\n"
    assert done.stdout == ""
    assert json.loads(cpctl(env, "get", "nodes", "n-cli-b", "-o", "json").stdout)[0]["state"] == "active"
