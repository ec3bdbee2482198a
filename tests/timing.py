"""``--timing-report FILE``: each test's wall time and CPU seconds, written as JSON lines.

CPU is this process's user + system time plus that of the children it has reaped (the live
stacks' servers, agents and browsers a test starts and stops). The engines' own CPU
(PostgreSQL, Redis) is not a child of pytest and is not counted. docs/testing.md lists the
slowest tests from such a report (``python -m tests.timing FILE`` prints the table).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import pytest


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--timing-report", default=None, help="append each test's wall and CPU seconds (JSON lines)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    path = item.config.getoption("timing_report")
    if not path:
        yield
        return
    wall0, cpu0 = time.monotonic(), _cpu()
    yield
    row = {"test": item.nodeid, "wall": round(time.monotonic() - wall0, 3), "cpu": round(_cpu() - cpu0, 3),
           "markers": sorted({m.name for m in item.iter_markers()} & {"live", "browser", "heavy"}),
           "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def table(path: Path, top: int = 30) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: -r["wall"])
    total_wall = sum(r["wall"] for r in rows)
    total_cpu = sum(r["cpu"] for r in rows)
    out = [f"{len(rows)} tests, {total_wall:.0f} s wall, {total_cpu:.0f} s CPU (sum over tests)", "",
           "| wall s | CPU s | markers | test |", "| ---: | ---: | --- | --- |"]
    for r in rows[:top]:
        out.append(f"| {r['wall']:.1f} | {r['cpu']:.1f} | {' '.join(r['markers'])} | `{r['test']}` |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 30))
