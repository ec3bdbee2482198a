"""The agent's side of a join, without a server: what it reads of the host, what a vendor tool's listing
must hold, and what a --facts file may say; each refusal names the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cp_agent import enrol


def test_it_reads_the_host_and_leaves_what_it_cannot_tell_unknown() -> None:
    facts = enrol.host_facts()
    assert set(facts) == set(enrol.FACT_NAMES)
    assert facts["cpu_cores"] >= 1 and facts["memory_gb"] >= 1
    assert facts["memory_channels"] is None and facts["pcie_lanes"] is None  # not guessed
    assert facts["ecc_memory"] in (True, None)  # never False on a guess


def test_it_takes_the_modules_a_vendor_tool_lists(tmp_path: Path) -> None:
    listing = tmp_path / "modules.json"
    listing.write_text(json.dumps([{"serial": "S1", "vendor": "Axon", "model": "AX-40", "slot": 0, "extra": 1,
                                    "driver_version": None}]))
    assert enrol.discover_modules(f"command:cat {listing}") == [
        {"serial": "S1", "vendor": "Axon", "model": "AX-40", "slot": 0}]
    assert enrol.discover_modules("none") == []


@pytest.mark.parametrize(("spec", "says"), [
    ("lspci", "expected command:CMD, exporter or none"),
    ("command:exit 5", "failed with exit code 5"),
    ("command:echo not-json", "printed no JSON list"),
    ("command:echo '{\"serial\": \"S1\"}'", "must print a JSON list of module objects"),
    ("command:echo '[{\"serial\": \"S1\", \"vendor\": \"Axon\"}]'", "module 0 has no model"),
])
def test_it_refuses_a_listing_it_cannot_use(spec: str, says: str) -> None:
    with pytest.raises(enrol.EnrolError, match=says):
        enrol.discover_modules(spec)


def test_a_facts_file_names_only_known_facts(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"ecc_memory": True, "memory_channels": 8}))
    assert enrol.load_facts_file(str(good)) == {"ecc_memory": True, "memory_channels": 8}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ecc": True}))
    with pytest.raises(enrol.EnrolError, match="unknown fact ecc"):
        enrol.load_facts_file(str(bad))


def test_the_node_key_it_keeps_is_readable_by_its_user_only(tmp_path: Path) -> None:
    enrol._write_private(tmp_path / enrol.KEY_FILE, "k3y")
    (tmp_path / enrol.NODE_FILE).write_text(json.dumps({"hostname": "n-1", "node": 4}))
    assert (tmp_path / enrol.KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert enrol.stored_identity(tmp_path) == enrol.Identity(key="k3y", hostname="n-1", node=4)
    assert enrol.stored_identity(tmp_path / "empty") is None
