"""cpctl without a server: usage errors, output formats, exit codes, the version check, pages
and idempotency keys, against answers given in place of the API (httpx.MockTransport)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml

from controlplane.engines import BASE_DIR
from cpctl.cli import main
from cpctl.client import authorization
from cpctl.durations import seconds

NODES = [{"id": i, "hostname": f"n-{i}", "state": "active", "tier_kind": "hybrid_inference", "rack_name": "rack-1",
          "module_count": 2, "slot": i, "cpu_cores": 16, "cpu_clock_ghz": "3.20", "ecc_memory": True,
          "warnings": [], "allowed_actions": ["cordon", "drain"]} for i in range(1, 4)]


@pytest.fixture(autouse=True)
def context(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("CPCTL_SERVER", "http://cp.test")
    monkeypatch.setenv("CPCTL_TOKEN", "0123456789abcdef0123456789abcdef01234567")


def answer(status: int, body: Any, version: str | None = "1.0.0") -> httpx.Response:
    return httpx.Response(status, json=body, headers={"X-API-Version": version} if version else {})


def run(argv: list[str], handler: Callable[[httpx.Request], httpx.Response] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    transport = httpx.MockTransport(handler or (lambda r: pytest.fail(f"no request expected: {r.url}")))
    code = main(argv, out=out, err=err, transport=transport)
    return code, out.getvalue(), err.getvalue()


def node_pages(request: httpx.Request) -> httpx.Response:
    """Two pages of nodes, the second linked from the first as the server links it."""
    assert request.headers["Authorization"].startswith("Token ")
    offset = int(request.url.params.get("offset", 0))
    rows = NODES[offset:offset + 2]
    nxt = f"http://other-host/api/v1/nodes/?limit=2&offset={offset + 2}" if offset + 2 < len(NODES) else None
    return answer(200, {"count": len(NODES), "next": nxt, "previous": None, "results": rows})


def test_usage_errors_exit_2_before_anything_is_sent(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["get", "racks"], ["drain", "n-1"], ["drain", "n-1", "--reason", "x", "--deadline", "ten"],
                 ["get", "nodes", "-o", "xml"], ["scale", "hybrid_inference", "--reason", "x"], []):
        with pytest.raises(SystemExit) as exited:
            code, _, _ = run(argv)
            raise SystemExit(code)
        assert exited.value.code == 2, argv
    assert "is not a duration" in capsys.readouterr().err


def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["get", "nodes"], ["get", "findings"], ["describe", "node"], ["drain"], ["cordon"], ["uncordon"],
                 ["quarantine"], ["release"], ["scale"], ["config", "set-context"], ["config", "get-contexts"],
                 ["completion"], ["version"], ["rollout", "preview"], ["rollout", "create"], ["rollout", "watch"],
                 ["rollout", "pause"], ["rollout", "rollback"], ["vectors", "run"], []):
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--help"])
        assert exited.value.code == 0
        assert "example:\n  cpctl " in capsys.readouterr().out, argv


def test_get_follows_every_page_and_renders_each_format() -> None:
    code, out, _ = run(["get", "nodes"], node_pages)
    assert code == 0
    assert out.splitlines()[0].split() == ["NAME", "STATE", "TIER", "RACK", "MODULES"]
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["n-1", "n-2", "n-3"]
    assert "ACTIONS" in run(["get", "nodes", "-o", "wide"], node_pages)[1]
    assert json.loads(run(["get", "nodes", "-o", "json"], node_pages)[1]) == NODES
    assert yaml.safe_load(run(["get", "no", "-o", "yaml"], node_pages)[1]) == NODES


def test_filters_go_to_the_api_as_it_takes_them() -> None:
    seen: list[httpx.QueryParams] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.params)
        return answer(200, {"count": 0, "next": None, "previous": None, "results": []})
    code, out, _ = run(["get", "nodes", "--state", "draining", "--state", "cordoned", "--tier", "hybrid_inference",
                        "--rack", "rack-1"], handler)
    assert code == 0 and out == "No resources found.\n"
    assert seen[0].get_list("state") == ["draining", "cordoned"]
    assert (seen[0]["tier"], seen[0]["rack"]) == ("hybrid_inference", "rack-1")


@pytest.mark.parametrize(("version", "says"), [
    ("2.0.0", "speaks API 2.0.0; cpctl 0.1.0 speaks API 1.x only"),
    (None, "did not say which API version it speaks"),
])
def test_a_server_of_another_api_version_is_refused_with_exit_4(version: str | None, says: str) -> None:
    code, out, err = run(["get", "nodes"], lambda r: answer(200, {"results": [], "next": None}, version))
    assert code == 4 and out == ""
    assert says in err


def test_a_refusal_exits_1_with_the_servers_text_as_sent() -> None:
    detail = ("refused: Hybrid inference would fall to 1 serving nodes (from 2), below its floor of 2 = "
              "max(min_active_nodes 2, need 0).")
    keys: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return answer(200, {"count": 1, "next": None, "results": [NODES[0]]})
        keys.append(request.headers["Idempotency-Key"])
        assert json.loads(request.content) == {"reason": "swap DIMM 3", "deadline_s": 600}
        return answer(409, {"detail": detail, "capacity": {"floor": 2}})
    code, out, err = run(["drain", "n-1", "--reason", "swap DIMM 3", "--deadline", "10m", "--wait"], handler)
    assert code == 1 and out == ""
    assert err == f"node/n-1 drain: refused (HTTP 409):\n{detail}\n"
    assert len(keys) == 1 and len(keys[0]) == 32


def test_a_lost_answer_is_asked_again_with_the_same_idempotency_key() -> None:
    keys: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return answer(200, {"count": 1, "next": None, "results": [NODES[0]]})
        keys.append(request.headers["Idempotency-Key"])
        if len(keys) == 1:
            raise httpx.ReadTimeout("lost", request=request)
        return answer(200, {"changed": True, "node": {"id": 1, "hostname": "n-1", "state": "cordoned"},
                            "drain": None})
    code, out, _ = run(["cordon", "n-1", "--reason", "PDU swap"], handler)
    assert code == 0 and out == "node/n-1 cordoned (state cordoned)\n"
    assert len(keys) == 2 and keys[0] == keys[1]


def test_an_unknown_name_is_refused_and_the_network_is_exit_4() -> None:
    code, _, err = run(["describe", "node", "n-9"], lambda r: answer(200, {"count": 0, "next": None, "results": []}))
    assert code == 1 and "no node named 'n-9'" in err

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)
    code, _, err = run(["get", "tiers"], down)
    assert code == 4 and "http://cp.test: ConnectError" in err


def test_a_drain_wait_that_runs_out_exits_3_saying_what_it_waited_for() -> None:
    waiting = "waiting for 3 in-flight requests; deadline in 9m58s"
    live = {"id": 1, "hostname": "n-1", "state": "draining", "latest": {"in_flight": 3},
            "hold": {"waiting_for": waiting}}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/nodes/":
            return answer(200, {"count": 1, "next": None, "results": [NODES[0]]})
        if request.method == "POST":
            return answer(202, {"changed": True, "node": {"id": 1, "hostname": "n-1", "state": "draining"},
                                "drain": {"waiting_for": waiting}})
        return answer(200, live)
    code, out, err = run(["drain", "n-1", "--reason", "r", "--wait", "--timeout", "1"], handler)
    assert code == 3
    assert out.startswith("node/n-1 drain started (state draining): waiting for 3 in-flight")
    progress = [line for line in err.splitlines() if line.startswith("node/n-1 draining, in flight 3: waiting for 3 ")]
    assert len(progress) == 1  # off a terminal an unchanged wait is logged once, not every poll
    assert "timed out after 1s waiting for node/n-1 to drain" in err


def test_tokens_get_the_scheme_their_kind_takes() -> None:
    assert authorization("0123456789abcdef0123456789abcdef01234567").startswith("Token ")
    assert authorization("Xy_3-long-urlsafe-service-token-value-abcdefghi") == \
        "Bearer Xy_3-long-urlsafe-service-token-value-abcdefghi"
    assert authorization("Token abc") == "Token abc"


def test_durations() -> None:
    assert [seconds(t) for t in ("90", "90s", "10m", "1h30m", "2d")] == [90, 90, 600, 5400, 172800]


def test_the_bash_completion_script_parses_and_completes_commands(tmp_path: Any) -> None:
    code, script, _ = run(["completion", "bash"])
    assert code == 0
    probe = (f"{script}\nCOMP_WORDS=(cpctl get no); COMP_CWORD=2; _cpctl; echo \"${{COMPREPLY[@]}}\"\n"
             "COMP_WORDS=(cpctl dr); COMP_CWORD=1; _cpctl; echo \"${COMPREPLY[@]}\"\n"
             "COMP_WORDS=(cpctl drain n-1 --de); COMP_CWORD=3; _cpctl; echo \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["no node nodes", "drain", "--deadline --deadline-action"]


def test_it_runs_without_importing_django() -> None:
    code = ("import sys, cpctl.cli, cpctl.actions, cpctl.reads; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'rest_framework', 'apps', "
            "'controlplane'}); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
