"""`make up`, deploy/Procfile and the systemd units start the same processes, and
their workers take the same queues (the ones named in controlplane/celery.py)."""

from __future__ import annotations

import re
from pathlib import Path

from controlplane.celery import WORKER_QUEUES
from controlplane.devstack import _processes

ROOT = Path(__file__).resolve().parents[1]


def _queues(command: str) -> set[str]:
    match = re.search(r"-Q\s+(\S+)", command)
    assert match, f"no -Q in {command!r}"
    return set(match.group(1).split(","))


def test_it_names_the_same_worker_queues_in_make_up_the_procfile_and_systemd() -> None:
    procfile = dict(line.split(":", 1) for line in (ROOT / "deploy/Procfile").read_text().splitlines()
                    if line and not line.startswith("#"))
    unit = (ROOT / "deploy/systemd/controlplane-worker.service").read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    devstack = " ".join(_processes("127.0.0.1", "8000")["worker"])
    assert _queues(procfile["worker"]) == _queues(exec_start) == _queues(devstack) == set(WORKER_QUEUES)


def test_it_runs_every_long_running_process_kind_everywhere() -> None:
    procfile = {line.split(":", 1)[0] for line in (ROOT / "deploy/Procfile").read_text().splitlines()
                if line and not line.startswith("#")} - {"release"}
    units = {p.name.removeprefix("controlplane-").removesuffix(".service")
             for p in (ROOT / "deploy/systemd").glob("*.service")}
    devstack = set(_processes("127.0.0.1", "8000")) - {"simulator"}  # the simulator plays a demo fleet
    assert procfile == units == devstack


def _ws(command: str) -> str | None:
    match = re.search(r"--ws[= ](\S+)", command)
    return match.group(1) if match else None


def test_every_web_process_names_the_same_current_websocket_implementation() -> None:
    """uvicorn's ``--ws websockets`` is the deprecated legacy implementation (a warning in every web
    log); each way of starting the web process names the sans-I/O one, explicitly."""
    import inspect

    from tests.live import stack

    procfile = dict(line.split(":", 1) for line in (ROOT / "deploy/Procfile").read_text().splitlines()
                    if line and not line.startswith("#"))
    unit = (ROOT / "deploy/systemd/controlplane-web.service").read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    devstack = " ".join(_processes("127.0.0.1", "8000")["web"])
    harness = " ".join(re.findall(r'"([^"]*)"', inspect.getsource(stack.LiveStack.web)))
    found = {"Procfile": _ws(procfile["web"]), "systemd": _ws(exec_start), "make up": _ws(devstack),
             "live harness": _ws(harness)}
    assert set(found.values()) == {"websockets-sansio"}, found


def test_the_readme_names_every_process_make_up_starts() -> None:
    readme = (ROOT / "README.md").read_text()
    started = set(_processes("127.0.0.1", "8000"))
    section = readme.split("## Processes", 1)[1].split("\n## ", 1)[0]
    table = {line.split("|")[1].strip() for line in section.splitlines()
             if line.startswith("| ") and not line.startswith(("| process", "| ---"))}
    assert table == started
    # the paragraph saying what `make up` starts names each of them too
    intro = next(p for p in readme.split("\n\n") if "`make up` creates" in p)
    missing = {name for name in started if name not in intro}
    assert not missing, f"README's `make up` paragraph leaves out {sorted(missing)}"
