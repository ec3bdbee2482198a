"""cpctl apply/diff -f: a fleet file is checked whole, naming the path in it, and applying it
twice changes nothing the second time (a fake server keeps the state between the two)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from cpctl.cli import main
from cpctl.fleetfile import validate

FILE = """\
tiers:
  hybrid_inference: {min_active_nodes: 12, max_active_nodes: 42}
pins:
  Axon AX-40: {driver: 2.2.9, framework: axon-runtime 1.18.0}
"""


@pytest.fixture(autouse=True)
def context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("CPCTL_SERVER", "http://cp.test")
    monkeypatch.setenv("CPCTL_TOKEN", "0123456789abcdef0123456789abcdef01234567")


class FakeServer:
    def __init__(self) -> None:
        self.tiers = [{"id": 2, "kind": "hybrid_inference", "min_active_nodes": 10, "max_active_nodes": 42}]
        self.types = [{"id": 1, "vendor": "Axon", "model": "AX-40"}]
        self.combos = [
            {"id": 1, "module_type": 1, "driver_version": "2.2.9", "framework_name": "axon-runtime",
             "framework_version": "1.18.0", "state": "validated"},
            {"id": 2, "module_type": 1, "driver_version": "2.3.1", "framework_name": "axon-runtime",
             "framework_version": "1.18.0", "state": "pinned"}]
        self.racks = [{"id": 5, "name": "rack-1"}]
        self.windows: list[dict[str, Any]] = []
        self.writes: list[tuple[str, str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET":
            rows = {"/api/v1/tiers/": self.tiers, "/api/v1/module-types/": self.types,
                    "/api/v1/version-combinations/": self.combos, "/api/v1/racks/": self.racks,
                    "/api/v1/change-windows/": self.windows}[path]
            return self.answer(200, {"count": len(rows), "next": None, "results": rows})
        body = json.loads(request.content)
        self.writes.append((request.method, path, body))
        if path == "/api/v1/tiers/2/":
            self.tiers[0].update(body)
            return self.answer(200, self.tiers[0])
        fields = {k: v for k, v in body.items() if k != "reason"}
        if path == "/api/v1/change-windows/":
            self.windows.append({"id": len(self.windows) + 1, **fields})
            return self.answer(201, self.windows[-1])
        window = next((w for w in self.windows if path == f"/api/v1/change-windows/{w['id']}/"), None)
        if window is not None:
            window.update(fields)
            return self.answer(200, window)
        combo = next(c for c in self.combos if path == f"/api/v1/version-combinations/{c['id']}/set-state/")
        for c in self.combos:
            c["state"] = "validated" if c["state"] == "pinned" else c["state"]
        combo["state"] = "pinned"
        return self.answer(200, combo)

    @staticmethod
    def answer(status: int, body: Any) -> httpx.Response:
        return httpx.Response(status, json=body, headers={"X-API-Version": "1.0.0"})


def run(argv: list[str], server: FakeServer) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, transport=httpx.MockTransport(server))
    return code, out.getvalue(), err.getvalue()


def test_diff_then_apply_twice_changes_only_what_differs_and_then_nothing(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FILE)
    server = FakeServer()
    code, out, _ = run(["diff", "-f", str(tmp_path / "fleet.yaml")], server)
    assert code == 0 and server.writes == []
    assert out.splitlines() == [
        "tiers.hybrid_inference: min_active_nodes 10 -> min_active_nodes 12",
        "pins.Axon AX-40: 2.3.1 + axon-runtime 1.18.0 -> 2.2.9 + axon-runtime 1.18.0 (validated now)"]
    code, out, _ = run(["apply", "-f", str(tmp_path / "fleet.yaml"), "--reason", "back to 2.2.9"], server)
    assert code == 0 and out.count(": applied") == 2
    assert server.writes == [("PATCH", "/api/v1/tiers/2/", {"min_active_nodes": 12}),
                             ("POST", "/api/v1/version-combinations/1/set-state/",
                              {"state": "pinned", "reason": "back to 2.2.9"})]
    code, out, _ = run(["apply", "-f", str(tmp_path / "fleet.yaml"), "--reason", "again"], server)
    assert code == 0 and out == "no changes: the server is as the file says\n"
    assert len(server.writes) == 2


def test_a_name_the_server_does_not_have_fails_the_whole_file_before_any_write(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(FILE.replace("Axon AX-40", "AX-99"))
    server = FakeServer()
    code, _, err = run(["apply", "-f", str(tmp_path / "fleet.yaml"), "--reason", "r"], server)
    assert code == 2 and server.writes == []
    assert "pins.AX-99: no module type is named so" in err


def test_validation_names_each_path_in_the_file() -> None:
    assert validate({"tiers": {"hybrid_inference": {"min_active_nodes": 50, "max_active_nodes": 42, "max": 1}},
                     "pins": {"AX-40": {"driver": "2.2.9", "framework": "axon"}, "AX-41": {"driver": "1"}},
                     "racks": {}}) == [
        "racks: unknown key (expected tiers, pins, windows)",
        "tiers.hybrid_inference.max: unknown key (expected min_active_nodes, max_active_nodes)",
        "tiers.hybrid_inference: min_active_nodes 50 is above max_active_nodes 42",
        "pins.AX-40.framework: name and version, e.g. 'axon-runtime 1.19.0' (got 'axon')",
        "pins.AX-41.framework: missing (a name and version, e.g. axon-runtime 1.19.0)"]
    assert validate({"tiers": {"access_logic": {"min_active_nodes": True}}}) == [
        "tiers.access_logic.min_active_nodes: must be a whole number, 0 or more (got True)"]


WINDOWS = """\
windows:
  weeknights: {cron: "0 22 * * mon-fri", duration_minutes: 240, time_zone: Europe/Berlin,
               actors: [scale_down, rollouts], tiers: [hybrid_inference], racks: [rack-1]}
"""


def test_a_change_window_is_created_then_changed_field_by_field_then_left_alone(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(WINDOWS)
    server = FakeServer()
    code, out, _ = run(["apply", "-f", str(tmp_path / "fleet.yaml"), "--reason", "agreed windows"], server)
    assert code == 0, out
    assert server.writes == [("POST", "/api/v1/change-windows/", {
        "name": "weeknights", "cron": "0 22 * * mon-fri", "duration_minutes": 240, "time_zone": "Europe/Berlin",
        "actors": ["rollouts", "scale_down"], "tiers": [2], "racks": [5], "reason": "agreed windows"})]
    (tmp_path / "fleet.yaml").write_text(WINDOWS.replace("240", "120"))
    code, out, _ = run(["diff", "-f", str(tmp_path / "fleet.yaml")], server)
    assert out.splitlines() == ["windows.weeknights: duration_minutes 240 -> duration_minutes 120"]
    run(["apply", "-f", str(tmp_path / "fleet.yaml"), "--reason", "shorter"], server)
    assert server.writes[-1] == ("PATCH", "/api/v1/change-windows/1/", {"duration_minutes": 120, "reason": "shorter"})
    code, out, _ = run(["apply", "-f", str(tmp_path / "fleet.yaml"), "--reason", "again"], server)
    assert code == 0 and out == "no changes: the server is as the file says\n" and len(server.writes) == 2


def test_a_window_naming_an_unknown_rack_or_a_bad_shape_fails_the_whole_file(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text(WINDOWS.replace("rack-1", "rack-9"))
    server = FakeServer()
    code, _, err = run(["apply", "-f", str(tmp_path / "fleet.yaml"), "--reason", "r"], server)
    assert code == 2 and server.writes == [] and "windows.weeknights: no rack rack-9 on the server" in err
    assert validate({"windows": {"w": {"cron": "", "duration_minutes": 0, "actors": [], "colour": "red"}}}) == [
        "windows.w.colour: unknown key (expected cron, duration_minutes, time_zone, actors, tiers, racks)",
        "windows.w.cron: missing (five fields, e.g. '0 22 * * mon-fri')",
        "windows.w.duration_minutes: must be a whole number of minutes, 1 or more (got 0)",
        "windows.w.actors: name at least one (rollouts, scale_down, health_actions, vector_runs)"]
