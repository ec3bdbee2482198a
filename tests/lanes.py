"""``make test``: the whole suite as independent lanes run at once, each on its own engines.

    python -m tests.lanes                          # every lane on embedded engines, gates included
    python -m tests.lanes --lanes quick            # one lane (make test-quick)
    python -m tests.lanes --modes embedded,machine # also live and engine-bound quick tests on the machine's
    python -m tests.lanes -- tests/agent -q        # just these tests, one pytest run per engine mode
    python -m tests.lanes --lanes browser -- -k theme   # arguments after -- go to every pytest lane

The lanes: ``gates`` (ruff, the import floors, mypy, Django checks, migrations, the schema), ``quick`` (no live
stack, browser or heavy scenario), ``fuzz`` (the schema fuzz, on two xdist workers), ``heavy``
(the access matrix, memory),
``live`` (tests that start real processes), ``faults`` and ``scenarios`` (the long end-to-end
scenarios, a lane each so they wait side by side), ``browser``; with the machine mode,
``machine-quick`` and ``machine-live``. A lane has its own engines: on embedded engines its own
var dir (``var/lanes/<lane>``: its own PostgreSQL and Redis), on the machine's servers its own
test database and Redis database. Nothing is shared, so a live test that flushes its Redis
database or restarts PostgreSQL touches no other lane. Most lanes wait on real processes and
real time as much as they compute, so running them side by side fills both cores.

Each lane's output goes to ``var/lanes/<lane>.log`` and its per-test timings to
``var/lanes/<lane>.timing.jsonl`` (tests/timing.py). The run prints a line as each lane ends,
then a table (exit, wall time, CPU seconds of the lane and everything it started and waited
for, tests passed and failed), the failures of every lane that failed, and exits non-zero when
any lane did.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
QUICK = "not live and not browser and not heavy"


@dataclass
class Lane:
    name: str
    mode: str  # "embedded" or "machine"
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    pytest: bool = True
    # with tests named on the command line, a lane whose marker deselects them all is not a failure
    may_select_nothing: bool = False
    niced: bool = False  # a computing lane at the lowest priority
    # filled in by the run
    log: Path = Path()
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0
    code: int | None = None


def _pytest(marker: str, extra: list[str], timing: Path) -> list[str]:
    if marker:
        marker, extra = _marker(marker, extra)
    selection = ["-m", marker] if marker else []
    return [PY, "-m", "pytest", *selection, "-p", "no:cacheprovider", f"--timing-report={timing}", *extra]


# The quality gates: each runs even when one before it failed, and the lane fails if any did.
GATES = " ; ".join([
    "status=0",
    *(f"{{ echo '== {name}'; {cmd} || status=1; }}" for name, cmd in [
        ("ruff", f"{shlex.quote(str(ROOT / '.venv/bin/ruff'))} check ."),
        ("import floors", f"{shlex.quote(str(ROOT / '.venv/bin/lint-imports'))}"),
        ("mypy", f"{shlex.quote(PY)} -m mypy ."),
        ("django checks", f"{shlex.quote(PY)} manage.py check"),
        ("migrations", f"{shlex.quote(PY)} manage.py makemigrations --check --dry-run"),
        ("schema", f"{shlex.quote(PY)} manage.py spectacular --validate --fail-on-warn --file /dev/null"),
    ]),
    "exit $status",
])

# The long end-to-end scenarios: minutes each of a fleet on its real schedules. Each gets a lane
# of its own (the longest first), so they wait side by side instead of one after the other.
FAULTS = "tests/health/test_faults_live.py"
SCENARIOS = ["tests/health/test_quiet_demo_live.py", "tests/rollouts/test_live.py"]
FUZZ = "tests/security/test_schema_fuzz.py"
NICE = 19
# The lanes that wait on real time, the longest first, one at a time (TEST_LANES_JOBS=N for more):
# with three at once beside the computing lanes, the scenarios starved (a quiet demo node looked
# like a noisy neighbour; a simulated agent left a rollout's vector command unanswered).
# Once the computing lanes are done the CPU is theirs, and up to WAITING_JOBS_ALONE run at once
# (TEST_LANES_JOBS_ALONE=N): two, since the browser lane outlasts the computing lanes by minutes and
# three beside it starved the quiet demo scenario again (a node just out of standby looked like a
# noisy neighbour, twice in a row).
WAITING_ORDER = ["browser", "faults", "scenarios", "live", "machine-live"]
WAITING_JOBS = 1
WAITING_JOBS_ALONE = 2
BUDGET_SCALE = "4"


@dataclass(frozen=True)
class Spec:
    name: str
    marker: str | None  # the pytest marker expression; None: the quality gates
    modes: tuple[str, ...]
    paths: tuple[str, ...] = ()  # only these (default: the whole suite)
    ignore: tuple[str, ...] = ()  # never these (another lane runs them)
    args: tuple[str, ...] = ()  # more pytest arguments
    # Lanes that only compute run at the lowest priority: the lanes whose tests wait on real
    # processes and real time (a sweep's schedule, a command's answer) get the CPU as on a quiet
    # machine, and the computing lanes take what is left; their tests' time budgets stretch
    # by BUDGET_SCALE, as waiting for the CPU is not hanging.
    nice: int = 0


# The machine's servers take today's selection there: the live tests, and of the quick ones those of
# the apps whose SQL, Redis use and connections differ between engines (telemetry's rollups and series,
# operations' and health's set reads, the cache, channels and leases, the deploy checks), not the
# heavy scenarios, the browser or the quick tests of pure computation and request validation (the
# planner, the agent and cpctl clients, inventory's admission rules, the security refusals): they
# exercise nothing engine-specific the embedded run misses, and ran twice for about 330 CPU seconds.
MACHINE_QUICK = ("tests/common", "tests/telemetry", "tests/deploy", "tests/dashboard", "tests/operations",
                 "tests/health", "tests/agents", "tests/audit", "tests/accounts", "tests/test_celery_config.py")
LANES: list[Spec] = [
    Spec("gates", None, ("embedded",), nice=NICE),
    Spec("faults", "live", ("embedded",), paths=(FAULTS,)),
    Spec("scenarios", "live", ("embedded",), paths=tuple(SCENARIOS)),
    Spec("quick", QUICK, ("embedded",), nice=NICE),
    Spec("machine-quick", QUICK, ("machine",), paths=MACHINE_QUICK, nice=NICE),
    # The schema fuzz is the largest piece of pure computation: two pytest-xdist workers (each
    # its own test database) so that it can take both cores once the other lanes are done.
    Spec("fuzz", "heavy", ("embedded",), paths=(FUZZ,), args=("-n", "2"), nice=NICE),
    Spec("heavy", "heavy and not live and not browser", ("embedded",), ignore=(FUZZ,), nice=NICE),
    Spec("live", "live and not browser", ("embedded",), ignore=(FAULTS, *SCENARIOS)),
    Spec("machine-live", "live and not heavy and not browser", ("machine",)),
    Spec("browser", "browser", ("embedded",)),
]


def _machine_urls(index: int, lane: str) -> dict[str, str]:
    """This lane's own database and Redis database on the machine's servers (or the ones named)."""
    db = os.environ.get("TEST_MACHINE_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    redis = os.environ.get("TEST_MACHINE_REDIS_URL", "redis://127.0.0.1:6379/0")
    d = urlsplit(db)
    r = urlsplit(redis)
    base_db = int((r.path or "/0").lstrip("/") or 0)
    # Named after this checkout too: two checkouts' runs on one server (a developer's and CI's)
    # never share a test database or a key prefix.
    tag = f"{lane.replace('-', '_')}_{hashlib.sha1(str(ROOT).encode()).hexdigest()[:8]}"
    return {
        "DATABASE_URL": urlunsplit((d.scheme, d.netloc, f"/controlplane_{tag}", d.query, "")),
        "REDIS_URL": urlunsplit((r.scheme, r.netloc, f"/{base_db + 5 + index}", r.query, "")),
        "TEST_DATABASE_NAME": f"test_controlplane_{tag}",
        "CACHE_KEY_PREFIX": f"cp-{tag}",
        "CHANNEL_PREFIX": f"cp-{tag}",
    }


def _env(lane_var: Path, mode: str, index: int, label: str) -> dict[str, str]:
    env = {
        "CONTROLPLANE_VAR_DIR": str(lane_var),
        # Tests close every connection at the end of each request/thread (no pooling), so the
        # test database can be dropped at the end.
        "DB_POOL_MAX_SIZE": "0",
        "DB_CONN_MAX_AGE": "0",
        "TEST_LANE": label,
    }
    if mode == "machine":
        env.update(_machine_urls(index, label))
    return env


def _marker(lane: str, extra: list[str]) -> tuple[str, list[str]]:
    """The lane's marker expression and-ed with one given in ``extra`` (``-m EXPR``), which is taken out."""
    rest: list[str] = []
    user = ""
    it = iter(extra)
    for arg in it:
        if arg == "-m":
            user = next(it, "")
        elif arg.startswith("-m") and not arg.startswith("--"):
            user = arg[2:]
        else:
            rest.append(arg)
    return (f"({lane}) and ({user})" if user else lane), rest


def build(lanes: list[str], modes: list[str], extra: list[str], var: Path) -> list[Lane]:
    out: list[Lane] = []
    for spec in LANES:
        name, marker = spec.name, spec.marker
        for mode in modes:
            if mode not in spec.modes:
                continue
            label = name if mode == "embedded" or name.startswith("machine") else f"machine-{name}"
            if lanes and name not in lanes and label not in lanes:
                continue
            env = _env(var / label, mode, len(out), label)
            timing = var / f"{label}.timing.jsonl"
            if marker is None:
                inner = ["sh", "-c", GATES]
            else:
                inner = _pytest(marker, [*spec.paths, *(f"--ignore={p}" for p in spec.ignore), *spec.args, *extra],
                                timing)
            if spec.nice:
                inner = ["nice", "-n", str(spec.nice), *inner]
                env["TEST_BUDGET_SCALE"] = BUDGET_SCALE
            command = [PY, "-m", "controlplane.engines", "run", "--", *inner]
            out.append(Lane(label, mode, command, env, pytest=marker is not None, log=var / f"{label}.log",
                            may_select_nothing=bool(extra), niced=bool(spec.nice)))
    return out


def _rusage_cpu(ru: object) -> float:
    return float(ru.ru_utime + ru.ru_stime)  # type: ignore[attr-defined]


def result_line(text: str) -> str:
    """pytest's closing line ("== 12 passed, 1 failed in 3.2s ==", or without the rules under -q), or ""."""
    for line in reversed(text.splitlines()):
        if re.match(r"^(=+ )?.*(passed|failed|error|no tests ran|deselected).* in [\d.]+s", line):  # -q: no =
            return line.strip("= ")
    return ""


def _count(result: str, word: str) -> int:
    m = re.search(rf"(\d+) {word}", result)
    return int(m.group(1)) if m else 0


def failures(text: str) -> str:
    """The short test summary pytest prints at the end, or the log's tail when there is none."""
    marker = "short test summary info"
    idx = text.rfind(marker)
    if idx >= 0:
        return text[text.rfind("\n", 0, idx) + 1:]
    return "\n".join(text.splitlines()[-60:])


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _subreaper() -> None:
    """Become the parent of the daemons the lanes start (the embedded PostgreSQL server detaches
    from its starter), so their CPU time is counted when they end (Linux; elsewhere not counted)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap_orphans(timeout: float = 15.0) -> float:
    """Wait for the daemons still ending (a server stopped just before its lane ended) and sum their CPU."""
    cpu = 0.0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.1)
            continue
        cpu += _rusage_cpu(ru)
    return cpu


def run(lanes: list[Lane], var: Path) -> int:
    var.mkdir(parents=True, exist_ok=True)
    _subreaper()
    t0 = time.monotonic()
    # At most ``jobs`` of the lanes that wait on real time run at once (the computing lanes, at the
    # lowest priority, all start at once): several of them side by side starve one another.
    jobs = int(os.environ.get("TEST_LANES_JOBS", str(WAITING_JOBS)) or 0) or len(lanes)
    jobs_alone = max(jobs, int(os.environ.get("TEST_LANES_JOBS_ALONE", str(WAITING_JOBS_ALONE)) or 0) or len(lanes))
    waiting = sorted((lane for lane in lanes if not lane.niced), key=lambda lane: WAITING_ORDER.index(lane.name)
                     if lane.name in WAITING_ORDER else len(WAITING_ORDER))

    def start(lane: Lane) -> None:
        lane.log.parent.mkdir(parents=True, exist_ok=True)
        for stale in (lane.log, var / f"{lane.name}.timing.jsonl"):
            stale.unlink(missing_ok=True)
        log = open(lane.log, "wb")  # noqa: SIM115 - the lane's process holds it
        log.write(f"$ {' '.join(shlex.quote(c) for c in lane.command)}\n".encode())
        log.flush()
        lane.started = time.monotonic()
        lane.proc = subprocess.Popen(lane.command, cwd=ROOT, env={**os.environ, **lane.env}, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        running[lane.proc.pid] = lane
        print(f"[lanes] {lane.name}: started ({lane.mode} engines), log {_show(lane.log)}", flush=True)

    def stop_all(signum: int, frame: object) -> None:
        waiting.clear()
        for lane in lanes:
            if lane.proc is not None and lane.proc.poll() is None:
                os.killpg(lane.proc.pid, signal.SIGINT)  # pytest stops its live stacks on an interrupt

    running: dict[int, Lane] = {}
    for lane in lanes:
        if lane.niced:
            start(lane)

    def waiting_running() -> int:
        return sum(1 for lane in running.values() if not lane.niced)

    def room() -> bool:
        computing = any(lane.niced for lane in running.values())
        return waiting_running() < (jobs if computing else jobs_alone)

    while waiting and room():
        start(waiting.pop(0))
    signal.signal(signal.SIGINT, stop_all)
    signal.signal(signal.SIGTERM, stop_all)
    orphans_cpu = 0.0  # daemons a lane started (PostgreSQL) come back to this process when they end
    while running:
        try:
            pid, status, ru = os.wait4(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid not in running:
            orphans_cpu += _rusage_cpu(ru)
            continue
        lane = running.pop(pid)
        lane.code = os.waitstatus_to_exitcode(status)
        if lane.code == 5 and lane.may_select_nothing:  # pytest: no test of this lane among those named
            lane.code = 0
        lane.wall = time.monotonic() - lane.started
        lane.cpu = _rusage_cpu(ru)
        result = result_line(lane.log.read_text(errors="replace")) if lane.pytest else ""
        verdict = "passed" if lane.code == 0 else f"FAILED (exit {lane.code})"
        print(f"[lanes] {lane.name}: {verdict} in {lane.wall:.0f} s, {lane.cpu:.0f} CPU s"
              f"{' - ' + result if result else ''}", flush=True)
        while waiting and room():
            start(waiting.pop(0))
    total_wall = time.monotonic() - t0

    print("\n| lane | engines | exit | wall s | CPU s | passed | failed | errors | skipped |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    passed = failed = 0
    for lane in lanes:
        text = lane.log.read_text(errors="replace")
        result = result_line(text) if lane.pytest else ""
        p, f, e, s = (_count(result, w) for w in ("passed", "failed", "error", "skipped"))
        passed += p
        failed += f + e
        if lane.code != 0 and f + e == 0:
            failed += 1  # a lane that died (or the gates) counts as a failure
        print(f"| {lane.name} | {lane.mode} | {lane.code} | {lane.wall:.0f} | {lane.cpu:.0f} | {p} | {f} | {e} | {s} |")
    orphans_cpu += _reap_orphans()
    lanes_cpu = sum(lane.cpu for lane in lanes)
    print(f"\n[lanes] all lanes in {total_wall:.0f} s; CPU: {lanes_cpu:.0f} s in the lanes, {orphans_cpu:.0f} s in "
          f"the embedded PostgreSQL servers they started, {lanes_cpu + orphans_cpu:.0f} s in all")
    bad = [lane for lane in lanes if lane.code != 0]
    for lane in bad:
        print(f"\n======== lane {lane.name} failed (exit {lane.code}); whole log: {_show(lane.log)}")
        print(failures(lane.log.read_text(errors="replace")))
    print(f"{passed} passed, {failed} failed")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lanes", default="", help="comma-separated lane names (default: all)")
    parser.add_argument("--modes", default=os.environ.get("TEST_ENGINES", "embedded"),
                        help="embedded, machine or both (comma-separated; default $TEST_ENGINES or embedded)")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - {"embedded", "machine"}:
        parser.error(f"unknown engine mode in {args.modes!r}")
    var = Path(os.environ.get("TEST_LANES_DIR", ROOT / "var" / "lanes"))
    names = [n for n in args.lanes.split(",") if n]
    if extra and not names:
        # Tests named with no lane chosen (``make test PYTEST_ARGS="tests/agent -q"``): one pytest
        # run of just those, in each engine mode, with no lane's marker in the way.
        lanes = [Lane(f"selected-{mode}" if len(modes) > 1 else "selected", mode,
                      [PY, "-m", "controlplane.engines", "run", "--",
                       *_pytest("", extra, var / f"selected-{mode}.timing.jsonl")],
                      _env(var / f"selected-{mode}", mode, i, f"selected-{mode}"), log=var / f"selected-{mode}.log")
                 for i, mode in enumerate(modes)]
        return run(lanes, var)
    lanes = build(names, modes, extra, var)
    if not lanes:
        parser.error(f"no lane matches {args.lanes!r} in modes {modes}")
    known = {lane.name for lane in build([], ["embedded", "machine"], [], var)} | {spec.name for spec in LANES}
    if set(names) - known:
        parser.error(f"unknown lane(s) {sorted(set(names) - known)}; known: {sorted(known)}")
    return run(lanes, var)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
