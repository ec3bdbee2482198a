"""Action hooks: every action kind runs its operator-configured command with the
command's args in the environment, is killed at its timeout, and fails visibly."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agent.cp_agent.commands import CommandRegistry
from agent.cp_agent.hooks import ACTIONS, KILL_GRACE_S, Hook, hook_env, register_actions, run_hook
from tests.live.stack import wait_for

KINDS = list(ACTIONS)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper is not)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state != "Z"


def _registry(hooks: dict[str, Hook], **kw: object) -> CommandRegistry:
    registry = CommandRegistry()
    register_actions(registry, hooks, node="n-r1-08", **kw)  # type: ignore[arg-type]
    return registry


def test_it_covers_every_action_the_control_plane_sends() -> None:
    assert set(KINDS) == {"cordon", "drain", "uncordon", "resume", "standby", "maintenance", "quarantine_module",
                          "release_module", "install_versions"}
    assert set(KINDS) <= set(_registry({}).kinds())


@pytest.mark.parametrize("kind", KINDS)
def test_it_runs_the_hook_of_each_kind_with_the_args_in_its_environment(kind: str, tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    script = (f'python3 -c "import json, os; json.dump({{k: v for k, v in os.environ.items() '
              f"if k.startswith('CP_')}}, open('{out}', 'w'))\"; echo \"$CP_COMMAND_KIND done on $CP_NODE\"")
    registry = _registry({kind: Hook(kind, script, timeout_s=30)})
    command = {"id": 41, "kind": kind, "args": {"serial": "AX-0001", "deadline": None, "force": True,
                                                 "versions": {"driver": "2.4.0"}, "deadline-s": 300}}
    status, result = registry.handle(command)
    assert status == "succeeded", result
    hook = result["hook"]
    assert hook["exit_code"] == 0 and not hook["timed_out"] and hook["timeout_s"] == 30
    assert hook["output_tail"] == f"{kind} done on n-r1-08\n"
    assert result["message"].startswith(f"{kind} hook exited 0")
    env = json.loads(out.read_text())
    assert env["CP_NODE"] == "n-r1-08" and env["CP_COMMAND_ID"] == "41" and env["CP_COMMAND_KIND"] == kind
    assert env["CP_ARG_SERIAL"] == "AX-0001" and env["CP_ARG_DEADLINE"] == "" and env["CP_ARG_FORCE"] == "true"
    assert env["CP_ARG_VERSIONS"] == '{"driver": "2.4.0"}' and env["CP_ARG_DEADLINE_S"] == "300"
    assert json.loads(env["CP_ARGS"]) == command["args"]


@pytest.mark.parametrize("kind", KINDS)
def test_it_fails_a_hook_that_exits_non_zero_with_its_output(kind: str) -> None:
    script = "echo checking the pool; echo 'gateway refused: n-r1-08 unknown' >&2; exit 3"
    status, result = _registry({kind: Hook(kind, script)}).handle({"id": 1, "kind": kind, "args": {}})
    assert status == "failed"
    assert result["hook"]["exit_code"] == 3 and not result["hook"]["timed_out"]
    assert result["hook"]["output_tail"] == "checking the pool\ngateway refused: n-r1-08 unknown\n"
    assert result["message"] == f"{kind} hook failed with exit code 3"


# A hook killed before its shell got as far as starting its child says nothing about the child: on a
# busy machine the shell may take longer than a short timeout to start, so then it runs again, given longer.
TIMEOUTS_S = (0.5, 2.0, 8.0)


@pytest.mark.parametrize("kind", KINDS)
def test_it_kills_a_hook_at_its_timeout_and_fails_it(kind: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo started; sleep 300 & echo $! > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; wait"
    for timeout_s in TIMEOUTS_S:
        started = time.monotonic()
        status, result = _registry({kind: Hook(kind, script, timeout_s=timeout_s)}).handle({"id": 1, "kind": kind})
        took = time.monotonic() - started
        assert status == "failed"
        assert result["hook"]["timed_out"] and result["hook"]["exit_code"] is None
        assert result["hook"]["timeout_s"] == timeout_s and result["hook"]["duration_s"] >= timeout_s
        assert result["message"].startswith(f"{kind} hook timed out after")
        # Killed at its timeout: not left to run its 300 s (SIGTERM to the group ends it at once; SIGKILL
        # would follow after the grace period).
        assert took < timeout_s + KILL_GRACE_S + 10, took
        if pid_file.exists():  # the shell had started its child (and said so) before it was killed
            break
    else:
        pytest.fail(f"the hook's shell never started its child within {TIMEOUTS_S[-1]} s")
    assert result["hook"]["output_tail"] == "started\n"
    child = int(pid_file.read_text())  # the whole process group went, not just the shell
    wait_for(lambda: not _alive(child), timeout=10, what=f"the hook's child {child} to be killed")


def test_it_reports_a_hook_that_cannot_start() -> None:
    run = run_hook("exec /nonexistent/gw-pool remove", env={}, timeout_s=5)
    assert not run.ok and run.exit_code == 127 and "not found" in run.output_tail


def test_it_keeps_only_the_tail_of_a_chatty_hook() -> None:
    run = run_hook("for i in $(seq 1 500); do echo line $i; done", env={}, timeout_s=10)
    assert run.ok
    assert run.output_tail.splitlines() == [f"line {i}" for i in range(481, 501)]


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "install_versions"])
def test_it_acks_an_action_without_a_hook_as_succeeded_with_hook_null(kind: str) -> None:
    status, result = _registry({}).handle({"id": 1, "kind": kind, "args": {"serial": "AX-0001"}})
    assert status == "succeeded" and result["hook"] is None
    assert "/api/v1/schedulable/" in result["message"]


def test_it_never_claims_an_install_it_did_not_do() -> None:
    status, result = _registry({}).handle({"id": 1, "kind": "install_versions", "args": {"driver": "2.4.0"}})
    assert status == "failed" and result["hook"] is None and "cannot install versions" in result["message"]
    recorded: list[dict[str, object]] = []
    status, result = _registry({}, record_versions=recorded.append).handle(
        {"id": 2, "kind": "install_versions", "args": {"driver": "2.4.0"}})
    assert status == "succeeded" and recorded == [{"driver": "2.4.0"}]


def test_it_names_args_safely_in_the_environment() -> None:
    env = hook_env({"id": 3, "kind": "drain", "args": {"drain": 12, "rack.slot": "r1/4", "": "x"}}, node="n")
    assert env["CP_ARG_DRAIN"] == "12" and env["CP_ARG_RACK_SLOT"] == "r1/4"
    assert not any(k == "CP_ARG_" for k in env)
