"""The processes holding the node's modules, read from a hook (``--holders-from command:CMD``): a
JSON list of {pid, name, module}; a read that fails sends no list (the server keeps the last one),
never an empty one made up; samples with a list speak contract 4."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agent.cp_agent.backends import NoModules
from agent.cp_agent.client import ApiClient
from agent.cp_agent.holders import CommandHolders, NoHolders, make_holders
from agent.cp_agent.inflight import NoInFlight
from agent.cp_agent.runner import Agent
from agent.cp_agent.spool import Spool


def test_it_reads_the_hooks_list_and_maps_device_aliases_to_serials(tmp_path: Path) -> None:
    listing = tmp_path / "holders.json"
    listing.write_text(json.dumps([{"pid": 4242, "name": "vllm", "module": "/dev/ax0"},
                                   {"pid": 17, "name": "python", "module": "AX-2"}]))
    source = make_holders(f"command:cat {listing}", aliases={"/dev/ax0": "AX-1"})
    assert isinstance(source, CommandHolders)
    assert source.read() == [{"pid": 4242, "name": "vllm", "module": "AX-1"},
                             {"pid": 17, "name": "python", "module": "AX-2"}]
    listing.write_text("[]")
    assert source.read() == []


@pytest.mark.parametrize("output", ["not json", '{"pid": 1}', '[{"pid": "1", "name": "x", "module": "A"}]',
                                    '[{"pid": 1, "module": "A"}]'])
def test_a_listing_it_cannot_read_sends_no_list_and_is_logged_once(
        tmp_path: Path, output: str, caplog: pytest.LogCaptureFixture) -> None:
    listing = tmp_path / "holders.out"
    listing.write_text(output)
    source = make_holders(f"command:cat {listing}")
    with caplog.at_level(logging.WARNING, logger="cp_agent.holders"):
        assert source.read() is None
        assert source.read() is None
    assert len([r for r in caplog.records if "holders read" in r.getMessage()]) == 1
    assert make_holders("command:exit 3").read() is None


def test_none_is_the_default_and_a_bad_spec_is_refused() -> None:
    assert isinstance(make_holders("none"), NoHolders) and make_holders("none").read() is None
    with pytest.raises(ValueError, match="expected command:CMD | none"):
        make_holders("fuser:/dev/ax0")


def test_samples_with_a_list_speak_contract_4(tmp_path: Path) -> None:
    listing = tmp_path / "holders.json"
    listing.write_text(json.dumps([{"pid": 4242, "name": "vllm", "module": "AX-1"}]))
    agent = Agent(client=ApiClient("http://127.0.0.1:9", "k"), node="n-a", spool=Spool(tmp_path / "spool"),
                  backend=NoModules(), in_flight=NoInFlight(), interval=1, send_interval=1, poll_commands=False,
                  holders=make_holders(f"command:cat {listing}"))
    agent.sample_once()
    (batch,) = agent.spool.peek(1)
    assert batch.payload["contract"] == 4
    assert batch.payload["node_samples"][0]["holders"] == [{"pid": 4242, "name": "vllm", "module": "AX-1"}]
    agent.client.close()
