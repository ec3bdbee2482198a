"""Every bench at its smallest setting, end to end, as a subprocess on the test's engines: it prints
its figures and its goal line, no traceback, exits 1 on a miss (``BENCH_GOAL_FACTOR=0`` makes every
goal impossible) and leaves no database behind (its processes and pools closed first, so nothing
had to be terminated). Left out: ``bench/fleet_load.py`` (a ramp step lasts two send intervals of
10 s and its fleet needs a key per node: over a minute at its smallest) and ``bench/rollout.py``
(a 200-node fleet on the real processes, two rollouts: half an hour)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import psycopg
import pytest

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[2]

# bench, its smallest setting, a figure it prints, its goal line's start
GOALS = [
    ("api_list", ["--nodes", "100", "--requests", "5"], "/api/v1/modules/?limit=100", "goal API p95"),
    ("fleet_reads", ["--nodes", "50", "--requests", "5"], "stage-latency", "all goals:"),
    ("ingest", ["--samples", "20", "--runs", "1"], "raw psycopg binary COPY", "goal ingest rows/s"),
    ("health_sweep", ["--nodes", "50", "--sweeps", "3"], "one SELECT:", "goal sweep p95"),
    ("autoscale", ["--speed", "200"], "(c) bare HPA formula", "goal: at most"),
    ("live", ["--clients", "5", "--seconds", "3", "--baseline-seconds", "2"], "push lag",
     "goal p95 batch accepted"),
    ("vectors", ["--runs", "1"], "direct ONNX Runtime", "goal end to end"),
]
MEASUREMENTS = [
    ("storage", ["--racks", "1", "--seconds", "60"], "telemetry_modulesample"),
    ("redis_memory", ["--racks", "1", "--seconds", "5"], "task results"),
]


def _bench(name: str, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / f"{name}.py"), *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=240, env={**os.environ, "LOG_LEVEL": "WARNING", **env})


def _bench_databases() -> list[str]:
    url = urlunparse(urlparse(os.environ["DATABASE_URL"])._replace(path="/postgres"))
    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'bench%'")]


def _ended_cleanly(run: subprocess.CompletedProcess[str]) -> None:
    out = run.stdout + run.stderr
    assert "Traceback" not in out, out[-3000:]
    assert "terminated before dropping it" not in out, out[-3000:]  # a process or pool of its own left open
    assert "did not stop" not in out, out[-3000:]
    assert _bench_databases() == []


@pytest.mark.parametrize(("name", "args", "figure", "goal"), GOALS, ids=[g[0] for g in GOALS])
def test_a_forced_miss_exits_1_with_the_figures_and_the_goal(name: str, args: list[str], figure: str,
                                                            goal: str) -> None:
    run = _bench(name, args, BENCH_GOAL_FACTOR="0")
    _ended_cleanly(run)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert figure in run.stdout
    goal_lines = [line for line in run.stdout.splitlines() if line.startswith(goal)]
    assert goal_lines and all(any(word in line for word in ("MISSED", "NOT MET", "NO (")) for line in goal_lines), \
        run.stdout[-2000:]


def test_a_run_as_it_is_exits_0_when_met_or_1_when_missed() -> None:
    run = _bench("autoscale", ["--speed", "200"])
    _ended_cleanly(run)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    [goal] = [line for line in run.stdout.splitlines() if line.startswith("goal: at most 0.5 x")]
    assert ("yes" in goal) == (run.returncode == 0)


@pytest.mark.parametrize(("name", "args", "figure"), MEASUREMENTS, ids=[m[0] for m in MEASUREMENTS])
def test_a_measurement_says_it_has_no_goal_and_exits_0(name: str, args: list[str], figure: str) -> None:
    run = _bench(name, args, BENCH_GOAL_FACTOR="0")
    _ended_cleanly(run)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert figure in run.stdout and "goal: none" in run.stdout
