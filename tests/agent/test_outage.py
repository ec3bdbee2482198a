"""The agent against a real API server that is killed and restarted mid-run:
every sample it produced is stored exactly once."""

from __future__ import annotations

from pathlib import Path

from django.db.models import Count, Sum

from agent.cp_agent.backends import SimulatedBackend
from agent.cp_agent.client import ApiClient
from agent.cp_agent.inflight import NoInFlight
from agent.cp_agent.runner import Agent
from agent.cp_agent.spool import Spool
from apps.agents.models import NodeCommand
from apps.agents.services import agent_token_issue, node_command_send
from apps.telemetry.models import IngestBatch, ModuleSample, NodeSample
from tests.agent.fleet import make_node
from tests.live.stack import LiveStack, wait_for


def test_it_loses_and_duplicates_nothing_across_an_api_outage(live_stack: LiveStack, tmp_path: Path) -> None:
    web = live_stack.web()
    node = make_node("n-outage-01", modules=1)
    _, key = agent_token_issue(kind="node", node=node, actor="test")
    agent = Agent(
        client=ApiClient(live_stack.url, key, timeout=2.0),
        node=node.hostname,
        spool=Spool(tmp_path / "spool", prefix=node.hostname),
        backend=SimulatedBackend(serials=["n-outage-01-m0"], seed=3), in_flight=NoInFlight(),
        interval=0.2, send_interval=0.4, backoff_base=0.1, backoff_cap=0.5, poll_commands=False,
    )
    agent.start()
    try:
        wait_for(lambda: agent.stats.batches_stored >= 5, timeout=20, what="the first batches to be stored")
        web.kill()
        wait_for(lambda: len(agent.spool) >= 5, timeout=20, what="the agent to spool during the outage")
        assert agent.stats.send_failures > 0
        spooled_during_outage = len(agent.spool)
        live_stack.start_web()
        wait_for(lambda: agent.stats.batches_stored >= 5 + spooled_during_outage, timeout=30,
                 what="the spool to be resent after the restart")
        agent.stop_sampling()
        assert agent.wait_drained(20), f"{len(agent.spool)} batch(es) still spooled"
    finally:
        agent.stop()

    produced = agent.stats.samples_produced
    live_stack.wait_stored()
    assert produced >= 15
    assert agent.stats.outages >= 1 and agent.stats.batches_rejected == 0
    stored = NodeSample.objects.filter(node=node)
    assert stored.count() == produced
    assert not stored.values("time").annotate(n=Count("id")).filter(n__gt=1).exists(), "a sample was stored twice"
    assert ModuleSample.objects.filter(node=node).count() == produced
    batches = IngestBatch.objects.filter(scope=f"node:{node.pk}")
    assert batches.aggregate(n=Sum("node_samples"))["n"] == produced
    assert batches.count() <= produced // 2 + 2, "samples were not batched (two per send interval)"
    assert not stored.filter(in_flight__isnull=False).exists(), "in_flight without a source must be null"


def test_it_acknowledges_commands_and_answers_unknown_kinds(live_stack: LiveStack, tmp_path: Path) -> None:
    live_stack.web()
    node = make_node("n-cmd-01", modules=0, state="standby")
    _, key = agent_token_issue(kind="node", node=node, actor="test")
    unknown = node_command_send(node=node, kind="install_driver", args={"version": "2.4.0"}, actor="test")
    ping = node_command_send(node=node, kind="ping", args={"n": 1}, actor="test")
    agent = Agent(client=ApiClient(live_stack.url, key), node=node.hostname, spool=Spool(tmp_path / "s"),
                  backend=SimulatedBackend(serials=[]), in_flight=NoInFlight(), interval=60, poll_commands=False)
    try:
        assert agent.handle_commands(wait=0) == 2
        assert agent.handle_commands(wait=0) == 0  # delivered once
    finally:
        agent.client.close()
    unknown.refresh_from_db()
    ping.refresh_from_db()
    assert unknown.state == "unknown"
    assert "unknown command 'install_driver'" in unknown.result["message"]
    assert ping.state == "succeeded" and ping.result["echo"] == {"n": 1}
    assert NodeCommand.objects.filter(node=node, state="pending").count() == 0


def test_its_entry_point_reports_a_node_to_the_api(live_stack: LiveStack, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from controlplane.engines import BASE_DIR

    live_stack.web()
    node = make_node("n-main-01", modules=1)
    _, key = agent_token_issue(kind="node", node=node, actor="test")
    stats_file = tmp_path / "stats.json"
    done = subprocess.run(
        [sys.executable, "-m", "agent.cp_agent", "--node", node.hostname, "--interval", "0.5",
         "--send-interval", "1", "--in-flight-from", "none",
         "--backend", "reference", "--module", "n-main-01-m0", "--buffer-dir", str(tmp_path / "spool"),
         "--duration", "3", "--command-wait", "1", "--stats-file", str(stats_file)],
        cwd=BASE_DIR, env={"PATH": "/usr/bin:/bin", "CP_API_URL": live_stack.url, "CP_AGENT_TOKEN": key},
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    stats = json.loads(stats_file.read_text())
    assert stats["samples_produced"] >= 4 and stats["spooled"] == 0
    live_stack.wait_stored()
    assert NodeSample.objects.filter(node=node).count() == stats["samples_produced"]
    module = ModuleSample.objects.filter(node=node).order_by("-time").first()
    assert module is not None and module.util is not None and 0 < module.util <= 1  # real INT8 inferences
