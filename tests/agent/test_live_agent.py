"""The real agent (a subprocess) on the live stack, as on a node: it reads the serving
process's in-flight gauge, runs the operator's hooks, and maps an exporter's series;
operators see the outcome through the API."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from django.utils import timezone

from apps.agents.models import NodeCommand
from apps.audit.models import AuditEvent
from apps.inventory.models import Module, Node
from apps.operations import controllers as operations
from apps.operations.models import Drain
from apps.telemetry.models import IngestBatch, NodeHolders, NodeSample, NodeStatus
from tests.agent.fleet import make_node
from tests.agent.promserver import PromServer, in_flight_gauge
from tests.live.stack import LiveStack, api_client, wait_for

FIXTURE = Path(__file__).with_name("fixtures") / "dcgm-exporter-4gpu.prom"
GAUGE = "nv_inference_pending_request_count"
INTERVAL = 0.5  # a sample every 0.5 s
SEND = 1.0  # a batch every second: the report interval
TICK = 0.5  # the drain controller, run by the test on its own clock



def _status(node: Node) -> NodeStatus | None:
    return NodeStatus.objects.filter(node=node).first()


def _command_when(api: httpx.Client, command_id: int, *states: str, what: str) -> dict[str, Any]:
    """The command as the API shows it, once its state is one of ``states``."""
    def seen() -> dict[str, Any]:
        body = dict(api.get(f"/api/v1/node-commands/{command_id}/").json())
        return body if body["state"] in states else {}
    return wait_for(seen, timeout=30, what=what)


ANSWERED = ("succeeded", "failed", "unknown")


def _drain(api: httpx.Client, node: Node, **body: Any) -> dict[str, Any]:
    r = api.post(f"/api/v1/nodes/{node.pk}/drain/", json={"reason": "swap the DIMM in slot 3", **body})
    assert r.status_code == 202, r.text
    return dict(r.json()["drain"])


def test_it_keeps_a_drain_waiting_until_the_serving_process_is_empty(live_stack: LiveStack,
                                                                      prom_server: PromServer) -> None:
    live_stack.web()
    node = make_node("n-live-drain", modules=0)
    prom_server.serve(in_flight_gauge({"intent-1b": 2, "generation-7b": 1}))  # 3 across two label sets
    live_stack.agent(node, "--in-flight-from", f"prometheus:{prom_server.url}#{GAUGE}", "--backend", "none",
                     "--send-interval", str(SEND), interval=INTERVAL)
    wait_for(lambda: (s := _status(node)) is not None and s.in_flight == 3, timeout=30,
             what="the agent to report 3 in flight")
    api = api_client(live_stack, timeout=10)
    drain = _drain(api, node, deadline_s=600)
    started = Drain.objects.get(pk=drain["id"]).started_at
    wait_for(lambda: (s := _status(node)) is not None and s.time >= started, timeout=30,
             what="a report newer than the drain's start")

    # Work in flight: the drain waits, tick after tick, and says for what.
    for _ in range(4):
        assert operations.drain_advance(drain_id=drain["id"]) == "waiting"
        time.sleep(TICK)
    shown = api.get(f"/api/v1/drains/{drain['id']}/").json()
    assert shown["state"] == "draining"
    assert shown["waiting_for"].startswith("waiting for 3 in-flight requests; deadline in ")

    # The serving process finishes its work.
    prom_server.serve(in_flight_gauge({"intent-1b": 0, "generation-7b": 0}))
    dropped, dropped_at = time.monotonic(), timezone.now()  # every sample taken from now on reads 0
    ticks: list[tuple[float, bool, str]] = []  # (when, a zero report was visible before the tick, outcome)
    while not ticks or ticks[-1][2] != "drained":
        assert time.monotonic() - dropped < 60, f"not drained 60 s after the gauge fell to 0: {ticks}"
        status = _status(node)
        zero_seen = status is not None and status.in_flight == 0
        ticks.append((time.monotonic() - dropped, zero_seen, operations.drain_advance(drain_id=drain["id"])))
        if ticks[-1][2] != "drained":
            time.sleep(TICK)
    took = ticks[-1][0]
    print(f"drained {took:.2f} s after the gauge fell to 0 (report interval {SEND} s, tick {TICK} s): {ticks}")
    # Until then the drain waited; the first controller tick that could see the zero report (it was
    # committed before the tick began) finished the drain: no tick more. The tick that drained may
    # have seen a report this test had not read yet.
    assert [outcome for _, _, outcome in ticks[:-1]] == ["waiting"] * (len(ticks) - 1), ticks
    assert not any(seen for _, seen, _ in ticks[:-1]), ticks
    # ... and not before: a zero report newer than the drain's start was stored when it drained.
    completed = AuditEvent.objects.get(action="drain.completed", related_id=str(drain["id"])).time
    zeros = NodeSample.objects.filter(node=node, in_flight=0, time__gte=started).values_list("time", flat=True)
    stored = IngestBatch.objects.filter(scope=f"node:{node.pk}", stored_at__lte=completed)
    assert any(stored.filter(min_time__lte=t, max_time__gte=t).exists() for t in zeros), (completed, list(zeros))
    # The zero came from the serving process as the agent read it: every sample taken after the gauge
    # fell reads 0 (or null, where a read timed out on a busy machine), none an old 3.
    def since_dropped() -> list[int | None]:
        got = list(NodeSample.objects.filter(node=node, time__gte=dropped_at).order_by("time")
                   .values_list("in_flight", flat=True))
        return got if 0 in got else []

    after = wait_for(since_dropped, timeout=30, what="a sample taken after the gauge fell to be stored")
    assert set(after) <= {0, None}, after
    shown = api.get(f"/api/v1/drains/{drain['id']}/").json()
    assert shown["state"] == "drained" and shown["node_state"] == "drained" and not shown["forced"]
    command = NodeCommand.objects.get(node=node, kind="drain")
    assert command.state == "succeeded" and command.result["hook"] is None  # no hook: the gateway routes


def test_it_waits_for_the_deadline_when_the_agent_cannot_count_in_flight(live_stack: LiveStack) -> None:
    live_stack.web()
    node = make_node("n-live-blind", modules=0)
    live_stack.agent(node, "--in-flight-from", "none", "--backend", "none", "--send-interval", str(SEND),
                     interval=INTERVAL)
    wait_for(lambda: _status(node) is not None, timeout=30, what="the agent's first report")
    assert _status(node).in_flight is None  # type: ignore[union-attr]
    api = api_client(live_stack, timeout=10)
    drain = _drain(api, node, deadline_s=4)
    row = Drain.objects.get(pk=drain["id"])
    wait_for(lambda: (s := _status(node)) is not None and s.time >= row.started_at, timeout=30,
             what="a report newer than the drain's start")
    assert operations.drain_advance(drain_id=drain["id"]) == "waiting"
    shown = api.get(f"/api/v1/drains/{drain['id']}/").json()
    assert shown["waiting_for"].startswith("in-flight work unknown: the node's agent reports no in-flight count, "
                                           "so the drain cannot see it empty and waits for its deadline; deadline in")
    wait_for(lambda: operations.drain_advance(drain_id=drain["id"]) == "alerted", timeout=30,
             what="the deadline to pass", interval=TICK)
    shown = api.get(f"/api/v1/drains/{drain['id']}/").json()
    assert shown["state"] == "draining" and shown["node_state"] == "draining" and shown["alerted_at"]
    assert "deadline passed" in shown["waiting_for"] and "staying draining and alerting" in shown["waiting_for"]


def test_it_runs_the_operators_hooks_and_shows_their_outcome(live_stack: LiveStack, tmp_path: Path) -> None:
    live_stack.web()
    node = make_node("n-live-hooks", modules=1)
    serial = Module.objects.get(node=node).serial
    trace = tmp_path / "hook-trace"
    live_stack.agent(
        node, "--in-flight-from", "none", "--backend", "none", "--progress-after", "0.5",
        "--on-drain", f'echo "drain $CP_ARG_DRAIN of $CP_NODE by $CP_ARG_OWNER" | tee -a {trace}; '
                      f'sleep 3; echo "removed $CP_NODE from the pool"',
        "--on-quarantine-module", 'echo "no card $CP_ARG_SERIAL in this chassis" >&2; exit 4',
        "--on-uncordon", "echo re-adding; sleep 60",
        "--hook-timeout", "uncordon=1",
    )
    api = api_client(live_stack, timeout=10)
    drain = _drain(api, node, deadline_s=600)
    command = NodeCommand.objects.get(node=node, kind="drain")

    # A slow hook: in progress first (not redelivered), then its outcome.
    running = _command_when(api, command.pk, "in_progress", what="the drain hook to be acknowledged in_progress")
    assert running["result"]["hook"]["command"].startswith('echo "drain $CP_ARG_DRAIN')
    done = _command_when(api, command.pk, *ANSWERED, what="the drain hook to finish")
    assert done["state"] == "succeeded", done
    hook = done["result"]["hook"]
    assert hook["exit_code"] == 0 and not hook["timed_out"] and hook["duration_s"] >= 3
    assert hook["output_tail"] == (f"drain {drain['id']} of n-live-hooks by operator\n"
                                   "removed n-live-hooks from the pool\n")
    assert trace.read_text() == f"drain {drain['id']} of n-live-hooks by operator\n"  # ran once

    r = api.post(f"/api/v1/modules/{Module.objects.get(node=node).pk}/quarantine/", json={"reason": "ECC"})
    assert r.status_code in (200, 201, 202), r.text
    quarantine = NodeCommand.objects.get(node=node, kind="quarantine_module")
    failed = _command_when(api, quarantine.pk, *ANSWERED, what="the quarantine hook's answer")
    assert failed["state"] == "failed"
    assert failed["result"]["hook"]["exit_code"] == 4
    assert failed["result"]["hook"]["output_tail"] == f"no card {serial} in this chassis\n"
    assert failed["result"]["message"] == "quarantine_module hook failed with exit code 4"

    r = api.post(f"/api/v1/nodes/{node.pk}/uncordon/", json={"reason": "back to work"})
    assert r.status_code in (200, 202), r.text
    uncordon = NodeCommand.objects.get(node=node, kind="uncordon")
    timed_out = _command_when(api, uncordon.pk, *ANSWERED, what="the uncordon hook to time out")
    assert timed_out["state"] == "failed"
    assert timed_out["result"]["hook"]["timed_out"] and timed_out["result"]["hook"]["exit_code"] is None
    assert timed_out["result"]["hook"]["output_tail"] == "re-adding\n"
    assert timed_out["result"]["message"].startswith("uncordon hook timed out after 1 s")


def test_it_keeps_a_missing_exporter_series_null_through_to_the_api(live_stack: LiveStack,
                                                                     prom_server: PromServer) -> None:
    live_stack.web()
    node = make_node("n-live-gpu", modules=4)
    serials = list(Module.objects.filter(node=node).order_by("slot").values_list("serial", flat=True))
    uuids = [line.split('UUID="')[1].split('"')[0] for line in FIXTURE.read_text().splitlines()
             if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    text = "".join(line for line in FIXTURE.read_text().splitlines(keepends=True)
                   if not (line.startswith("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{") and 'gpu="1"' in line))
    prom_server.serve(text)
    aliases = [a for uuid, s in zip(uuids, serials, strict=True) for a in ("--module-alias", f"{uuid}={s}")]
    live_stack.agent(node, "--in-flight-from", "none", "--backend", f"exporter:{prom_server.url}",
                     "--mapping", "dcgm-exporter", *aliases, "--send-interval", str(SEND), interval=INTERVAL)
    viewer = api_client(live_stack, "viewer", timeout=10)

    def reported() -> dict[str, Any]:
        body = dict(viewer.get(f"/api/v1/fleet/nodes/{node.pk}/history/").json())
        return body if body["latest"] and all(m["latest"] for m in body["modules"]) else {}

    body = wait_for(reported, timeout=30, what="the four modules' first samples")
    modules = {m["serial"]: m["latest"] for m in body["modules"]}
    assert len(modules) == 4
    assert modules[serials[1]]["ecc_uncorrected"] is None  # the series the exporter lacks: missing
    assert modules[serials[1]]["ecc_corrected"] == 3
    assert [modules[s]["ecc_uncorrected"] for s in (serials[0], serials[2], serials[3])] == [0, 0, 1]
    assert modules[serials[0]]["util"] == 0.87 and modules[serials[0]]["power_w"] == 63.412
    assert modules[serials[2]]["link_width"] == 8 and modules[serials[2]]["link_width_expected"] == 16
    assert body["latest"]["in_flight"] is None


def test_a_drain_waits_on_a_process_the_holders_hook_reports_and_names_it(live_stack: LiveStack,
                                                                         tmp_path: Path) -> None:
    live_stack.web()
    node = make_node("n-live-held", modules=1)
    listing = tmp_path / "holders.json"
    # The hook lists a process with the module's device open, by its device file (mapped to the serial).
    listing.write_text('[{"pid": 4242, "name": "vllm", "module": "/dev/ax0"}]')
    live_stack.agent(node, "--in-flight-from", "command:echo 0", "--backend", "none",
                     "--holders-from", f"command:cat {listing}", "--module-alias", "/dev/ax0=n-live-held-m0",
                     "--send-interval", str(SEND), interval=INTERVAL)
    wait_for(lambda: NodeHolders.objects.filter(node=node).exclude(holders=[]).exists(), timeout=30,
             what="the agent to list the process holding its module")
    api = api_client(live_stack, timeout=10)
    drain = _drain(api, node, deadline_s=600)
    started = Drain.objects.get(pk=drain["id"]).started_at
    wait_for(lambda: NodeHolders.objects.filter(node=node, time__gte=started).exists(), timeout=30,
             what="a list newer than the drain's start")
    # Zero in flight, but vllm still holds the module: the drain waits and names it.
    for _ in range(3):
        assert operations.drain_advance(drain_id=drain["id"]) == "waiting"
        time.sleep(TICK)
    shown = api.get(f"/api/v1/drains/{drain['id']}/").json()
    assert shown["state"] == "draining"
    assert "waiting for 1 process(es) holding its modules: pid 4242 vllm on n-live-held-m0" in shown["waiting_for"]

    listing.write_text("[]")  # the process let go of the device
    wait_for(lambda: operations.drain_advance(drain_id=drain["id"]) == "drained", timeout=60, interval=TICK,
             what="the drain to end once the hook lists no holder")
    assert api.get(f"/api/v1/drains/{drain['id']}/").json()["state"] == "drained"
