"""The agent's latency log: '<stage> <ms>' lines become log-bucket histograms (contract 3) that the
control plane takes and merges."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pytest

from agent.cp_agent.backends import NoModules
from agent.cp_agent.client import ApiClient
from agent.cp_agent.inflight import NoInFlight
from agent.cp_agent.latency import LatencyLog
from agent.cp_agent.runner import Agent
from agent.cp_agent.sketch import histogram
from agent.cp_agent.spool import Spool
from tests.telemetry.conftest import Fleet, stored


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return Fleet()


def _append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def test_it_reads_the_lines_added_since_the_last_sample(tmp_path: Path) -> None:
    path = tmp_path / "latency.log"
    assert LatencyLog(path).read() is None  # no log: nothing
    _append(path, "intent 40\n")
    source = LatencyLog(path)
    assert source.read() is None  # lines from before the agent's start are not this run's
    _append(path, "intent 41.5\nintent 900\nperception 3.2\nplanning\nwarp 3\nintent -1\ngeneration 12")
    assert source.read() == {"intent": histogram([41.5, 900]), "perception": histogram([3.2])}
    assert source.skipped == 3  # no value, unknown stage, negative
    _append(path, "0.5\n")  # the unfinished line ends now
    assert source.read() == {"generation": histogram([120.5])}
    assert source.read() is None
    path.rename(tmp_path / "latency.log.1")  # rotated: the new file is read from its start
    _append(path, "tool_call 7\n")
    assert source.read() == {"tool_call": histogram([7.0])}
    path.write_text("")  # truncated
    _append(path, "intent 5\n")
    assert source.read() == {"intent": histogram([5.0])}


def _agent(tmp_path: Path, latency: LatencyLog | None) -> Agent:
    return Agent(client=ApiClient("http://127.0.0.1:9", "k"), node="n-a", spool=Spool(tmp_path / "spool"),
                 backend=NoModules(), in_flight=NoInFlight(), interval=1, send_interval=1, poll_commands=False,
                 latency=latency)


def test_its_samples_carry_histograms_as_contract_3_which_the_server_takes(tmp_path: Path, fleet: Fleet) -> None:
    from apps.telemetry.models import LatencySample

    path = tmp_path / "latency.log"
    path.write_text("")
    agent = _agent(tmp_path, LatencyLog(path))
    plain = _agent(tmp_path / "plain", None)
    try:
        latencies = [math.exp(0.1 * i) for i in range(60)]
        _append(path, "".join(f"intent {x}\n" for x in latencies))
        agent.sample_once()
        plain.sample_once()
        (batch,) = agent.spool.peek(1)
        (sample,) = batch.payload["node_samples"]
        assert batch.payload["contract"] == 3 and sample["latency"] == {"intent": histogram(latencies)}
        (other,) = plain.spool.peek(1)
        assert other.payload["contract"] == 2 and "latency" not in other.payload["node_samples"][0]
        # What the agent spooled, the control plane accepts as it is.
        sample["time"] = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=2)).isoformat()
        r = fleet.client(fleet.key_a).post("/api/v1/telemetry/", batch.payload, format="json")
        assert r.status_code == 202, r.content
        stored()
        (row,) = LatencySample.objects.all()
        assert (row.stage, row.count, row.hist_offset) == ("intent", 60, (histogram(latencies) or {})["offset"])
    finally:
        agent.client.close()
        plain.client.close()
