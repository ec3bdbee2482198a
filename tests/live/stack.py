"""One live stack for tests: the real processes of the control plane on the
pytest test database, each part optional.

    def test_it_...(live_stack: LiveStack) -> None:
        live_stack.web()                     # uvicorn (ASGI: pages, API, websockets) and a telemetry writer
        live_stack.worker()                  # a Celery worker on every queue the Procfile names
        live_stack.beat(every={"apps.operations.tasks.nodes_heartbeat": 1})
        live_stack.broadcaster()
        live_stack.simulator(speed=60)       # plays every node in the database over HTTP
        agent = live_stack.agent(node, "--in-flight-from", "none")  # a real cp_agent subprocess
        wait_for(lambda: ..., timeout=30, what="the node to drain")
        live_stack.wait_stored()             # every accepted telemetry batch is in the raw tables
        live_stack.restart_postgres()        # fault drills on the embedded engines

Every process sees only committed rows (use ``transactional_db``, which the
``live_stack`` fixture does). Processes are stopped at the end of the test, before
the database is flushed; on failure the tails of their logs are printed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from django.conf import settings
from django.db import connection, transaction

from controlplane.celery import WORKER_QUEUES
from controlplane.engines import BASE_DIR, VAR_DIR

T = TypeVar("T")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_waiting: list[str] = []  # what the running wait_for calls wait for (innermost last)
_interrupted: list[str] = []  # what a wait_for stopped by an exception from outside its check waited for


def current_wait() -> str:
    """What this process's ``wait_for`` was waiting for when the test was stopped ("" when it was
    in none): named when a test runs past its time budget (tests/conftest.py)."""
    return _waiting[-1] if _waiting else (_interrupted[0] if _interrupted else "")


def api_client(stack: LiveStack, role: str = "operator", *, timeout: float = 60.0) -> httpx.Client:
    """An API client of the running stack signed in with the token of user ``live-<role>``."""
    from rest_framework.authtoken.models import Token

    from apps.accounts.services import user_ensure

    user, _ = user_ensure(username=f"live-{role}", password="pw-live", role=role)
    token, _ = Token.objects.get_or_create(user=user)
    return httpx.Client(base_url=stack.url, headers={"Authorization": f"Token {token.key}"}, timeout=timeout)


def wait_for(check: Callable[[], T], *, timeout: float, what: str, interval: float = 0.2) -> T:
    """Poll ``check`` until it returns something truthy (returned), or fail naming ``what``
    and the last value seen. Database reads in ``check`` see fresh committed rows."""
    deadline = time.monotonic() + timeout
    last: Any = None
    _waiting.append(what)
    _interrupted.clear()
    try:
        while True:
            try:
                last = check()
            except AssertionError as exc:  # a check may assert; keep its message as the last value
                last = exc
            else:
                if last:
                    return last
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")
            time.sleep(interval)
    except BaseException as exc:
        if not isinstance(exc, AssertionError):  # e.g. the time budget's signal, mid-wait
            _interrupted.append(what)
        raise
    finally:
        _waiting.pop()


class RowHold:
    """Holds one row's lock (SELECT … FOR UPDATE) from its own thread and connection until
    released, so a worker that reaches the row waits there and a test can kill it half-way:

        with RowHold(Drain.objects.filter(pk=drain.pk)) as hold:
            ...; wait_for(lambda: waiting_on_lock("ops-crash-worker"), ...); worker.kill(); hold.release()
    """

    def __init__(self, rows: Any) -> None:
        self._rows = rows
        self._held, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        try:
            with transaction.atomic():
                self._rows.select_for_update().get()
                self._held.set()
                self._release.wait(120)
        finally:
            connection.close()

    def __enter__(self) -> RowHold:
        self._thread.start()
        assert self._held.wait(10), "could not lock the row"
        return self

    def release(self) -> None:
        self._release.set()
        self._thread.join(10)

    def __exit__(self, *exc: Any) -> None:
        self.release()


def waiting_on_lock(application_name: str) -> bool:
    """Whether a connection of the process started with DB_APPLICATION_NAME=``application_name``
    waits for a lock."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                    [application_name])
        row = cur.fetchone()
    return bool(row and row[0])


def test_database_url() -> str:
    """A postgresql:// URL of this test run's database (pytest-django's test_* database)."""
    d = connection.settings_dict
    auth = quote(d["USER"] or "") + (":" + quote(d["PASSWORD"]) if d["PASSWORD"] else "")
    host = d["HOST"] or ""
    if host.startswith("/"):  # a unix socket directory (the embedded server)
        return f"postgresql://{auth}@:{d['PORT'] or 5432}/{quote(d['NAME'])}?host={quote(host)}"
    return f"postgresql://{auth}@{host or '127.0.0.1'}:{d['PORT'] or 5432}/{quote(d['NAME'])}"


@dataclass
class Proc:
    """One child process, its own session (killed with its children), logging to a file."""

    name: str
    cmd: list[str]
    log_path: Path
    env: dict[str, str]
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> Proc:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it
        log.write(f"\n==== start {self.starts + 1}: {' '.join(self.cmd)}\n".encode())
        log.flush()
        self.popen = subprocess.Popen(self.cmd, cwd=BASE_DIR, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        log.close()
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_log(self, text: str, *, timeout: float = 60.0, since: int = 0) -> None:
        """Wait until ``text`` appears in the log (after offset ``since``), failing early if the process died."""
        def seen() -> bool:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.popen and self.popen.returncode}:\n"
                                   f"{self.log()[-3000:]}")
            return text in self.log()[since:]
        wait_for(seen, timeout=timeout, what=f"{self.name} to log {text!r}", interval=0.1)

    def signal(self, sig: int) -> None:
        if self.alive():
            os.killpg(self.pid, sig)

    def kill(self) -> None:
        """The hard way, as a crash would."""
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
            except ProcessLookupError:
                pass
        return self.popen.returncode


@dataclass
class AgentProc(Proc):
    """A real node agent (``python -m agent.cp_agent``) with its own spool and stats file."""

    stats_path: Path = field(default_factory=Path)

    def stop(self, timeout: float = 35.0) -> int | None:
        """SIGTERM; the agent flushes its spool for up to 25 s (``--flush-on-stop``) before exiting."""
        return super().stop(timeout)

    def stats(self) -> dict[str, Any]:
        """The counters the agent wrote when it stopped (stop it first)."""
        return dict(json.loads(self.stats_path.read_text()))


class LiveStack:
    """The processes of one live test. Each start method returns the process handle."""

    def __init__(self, work_dir: Path, *, env: dict[str, str] | None = None) -> None:
        self.dir = work_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[Proc] = []
        self.url = ""
        self.web_proc: Proc | None = None
        self.env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "CONTROLPLANE_VAR_DIR": str(VAR_DIR),
            "DB_CONN_MAX_AGE": "0",
            "LOG_LEVEL": os.environ.get("LIVE_LOG_LEVEL", "INFO"),
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        # Nothing from an earlier test may reach this test's processes: empty the
        # broker's queues and the channel layer (this Redis database is the test run's).
        import redis

        redis.Redis.from_url(settings.REDIS_URL).flushdb()

    # -- parts ---------------------------------------------------------------------------------

    def _proc(self, name: str, cmd: list[str], env: dict[str, str] | None = None, cls: type[Proc] = Proc,
              **extra: Any) -> Any:
        n = sum(1 for p in self.procs if p.name.split("#")[0] == name)
        label = f"{name}#{n + 1}" if n else name
        proc = cls(label, cmd, self.dir / f"{label}.log", {**self.env, **(env or {})}, **extra)
        self.procs.append(proc)
        return proc

    def web(self, *, env: dict[str, str] | None = None, timeout: float = 60.0, writer: bool = True) -> Proc:
        """uvicorn serving the ASGI app (pages, API, websockets) on a free port; ``self.url``.
        A telemetry writer comes with it (accepted batches reach the raw tables through
        it), unless ``writer=False`` or one runs already."""
        if writer and not any(p.name.startswith("writer") and p.alive() for p in self.procs):
            self.writer()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        proc = self._proc("web", [sys.executable, "-m", "uvicorn", "controlplane.asgi:application",
                                  "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
                                  "--lifespan", "off", "--ws", "websockets-sansio",
                                  "--timeout-keep-alive", "65"], env)
        self.web_proc = proc
        self.start_web(proc, timeout=timeout)
        return proc

    def start_web(self, proc: Proc | None = None, *, timeout: float = 60.0) -> None:
        """(Re)start the web process and wait until it answers."""
        proc = proc or self.web_proc
        assert proc is not None, "no web process: call web() first"
        proc.start()

        def answers() -> bool:
            if not proc.alive():
                raise RuntimeError(f"web exited:\n{proc.log()[-3000:]}")
            try:
                httpx.get(f"{self.url}/healthz", timeout=1.0)
                return True
            except httpx.HTTPError:
                return False
        wait_for(answers, timeout=timeout, what="the web process to answer", interval=0.1)

    def worker(self, queues: Iterable[str] = WORKER_QUEUES, *, concurrency: int = 2, pool: str = "prefork",
               env: dict[str, str] | None = None) -> Proc:
        """A Celery worker on ``queues`` (default: every queue the Procfile's worker takes)."""
        n = sum(1 for p in self.procs if p.name.startswith("worker")) + 1
        proc = self._proc("worker", [sys.executable, "-m", "celery", "-A", "controlplane", "worker",
                                     "-Q", ",".join(queues), "--pool", pool, "--concurrency", str(concurrency),
                                     "--without-heartbeat", "--without-gossip", "--without-mingle",
                                     "-n", f"live{n}-{os.getpid()}@%h", "-l", "INFO"],
                          {"DB_APPLICATION_NAME": f"live-worker-{n}", **(env or {})})
        proc.start().wait_log(" ready.")
        return proc

    def beat(self, *, every: dict[str, float] | None = None, only: Iterable[str] | None = None,
             env: dict[str, str] | None = None) -> Proc:
        """Celery beat on the database scheduler, with the schedules of controlplane/schedules.py
        stored first. ``every`` overrides intervals by task name (seconds); ``only`` keeps just
        those tasks enabled."""
        from django.core.management import call_command
        from django_celery_beat.models import IntervalSchedule, PeriodicTask

        call_command("sync_schedules", verbosity=0)
        for task, seconds in (every or {}).items():
            interval, _ = IntervalSchedule.objects.get_or_create(every=max(1, round(seconds)),
                                                                 period=IntervalSchedule.SECONDS)
            if not PeriodicTask.objects.filter(task=task).update(interval=interval, expire_seconds=None):
                raise AssertionError(f"no schedule runs {task}")
        if only is not None:
            keep = set(only)
            PeriodicTask.objects.exclude(task__in=keep).update(enabled=False)
        proc = self._proc("beat", [sys.executable, "-m", "celery", "-A", "controlplane", "beat", "-l", "INFO",
                                   "--schedule", str(self.dir / "beat-schedule")], env)
        proc.start().wait_log("beat: Starting")
        return proc

    def writer(self, *, env: dict[str, str] | None = None) -> Proc:
        """``manage.py telemetry_writer``: stores accepted telemetry batches."""
        proc = self._proc("writer", [sys.executable, "manage.py", "telemetry_writer"],
                          {"DB_APPLICATION_NAME": "live-writer", **(env or {})})
        proc.start().wait_log("telemetry writer:")
        return proc

    def wait_stored(self, timeout: float = 30.0) -> None:
        """Wait until every accepted telemetry batch has been stored by the writer."""
        from apps.telemetry.models import IngestBatch

        wait_for(lambda: not IngestBatch.objects.filter(stored_at__isnull=True).exists(), timeout=timeout,
                 what="the writer to store every accepted batch")

    def restart_postgres(self) -> None:
        """Restart the embedded PostgreSQL under the running processes (every connection is cut)."""
        from controlplane import engines

        engines.restart_postgres()
        connection.close()  # this test's own connection died with the server

    def restart_redis(self) -> None:
        """Restart the embedded Redis on its port (broker, cache and channel layer go away and come back)."""
        from controlplane import engines

        engines.restart_redis()

    def broadcaster(self, *, interval: float = 0.5, env: dict[str, str] | None = None) -> Proc:
        proc = self._proc("broadcaster", [sys.executable, "manage.py", "broadcast", "--interval", str(interval)],
                          env)
        return proc.start()

    def tokens_file(self) -> Path:
        """Agent keys for every node in the database and the gateway (the simulator's tokens file)."""
        from apps.agents.services import agent_token_issue
        from apps.inventory.models import Node

        path = self.dir / "agent-tokens.json"
        if not path.exists():
            _, gateway = agent_token_issue(kind="gateway", node=None, actor="live-test")
            nodes = {n.hostname: agent_token_issue(kind="node", node=n, actor="live-test")[1]
                     for n in Node.objects.order_by("hostname")}
            path.write_text(json.dumps({"gateway": gateway, "nodes": nodes}))
        return path

    def simulator(self, *args: str, speed: float = 60.0, interval: float = 1.0, command_interval: float = 1.0,
                  env: dict[str, str] | None = None) -> Proc:
        """``manage.py simulate`` playing every node of the database against the web process."""
        assert self.url, "start web() before the simulator"
        proc = self._proc("simulator", [sys.executable, "manage.py", "simulate", "--api", self.url,
                                        "--tokens", str(self.tokens_file()), "--speed", str(speed),
                                        "--interval", str(interval), "--command-interval", str(command_interval),
                                        *args], env)
        return proc.start()

    def agent(self, node: Any, *args: str, token: str | None = None, interval: float = 1.0,
              env: dict[str, str] | None = None) -> AgentProc:
        """A real node agent subprocess for ``node`` (a Node), with a fresh key unless ``token``;
        ``--in-flight-from none`` unless ``args`` name a source."""
        from apps.agents.services import agent_token_issue

        assert self.url, "start web() before an agent"
        if token is None:
            token = agent_token_issue(kind="node", node=node, actor="live-test")[1]
        spool = self.dir / f"spool-{node.hostname}"
        stats = self.dir / f"agent-{node.hostname}.json"
        if not any(a == "--in-flight-from" or a.startswith("--in-flight-from=") for a in args):
            args = ("--in-flight-from", "none", *args)  # the agent wants its source named
        cmd = [sys.executable, "-m", "agent.cp_agent", "--api", self.url, f"--token={token}", "--node", node.hostname,
               "--interval", str(interval), "--buffer-dir", str(spool), "--stats-file", str(stats),
               "--command-wait", "2", "--backoff-cap", "2",
               # the tests count every sample stored: a loaded machine may need more than the default 5 s
               "--flush-on-stop", "25", *args]
        proc = self._proc(f"agent-{node.hostname}", cmd, env, cls=AgentProc, stats_path=stats)
        return proc.start()  # type: ignore[no-any-return]

    def joining_agent(self, hostname: str, *args: str, bootstrap_token: str, interval: float = 1.0,
                      env: dict[str, str] | None = None) -> AgentProc:
        """A real node agent with no key yet: it joins with ``bootstrap_token`` and, once approved, reports
        with the key it was given (kept in its buffer dir, ``self.dir / f"spool-{hostname}"``)."""
        assert self.url, "start web() before an agent"
        spool = self.dir / f"spool-{hostname}"
        stats = self.dir / f"agent-{hostname}.json"
        cmd = [sys.executable, "-m", "agent.cp_agent", "--api", self.url, f"--bootstrap-token={bootstrap_token}",
               "--node", hostname, "--interval", str(interval), "--buffer-dir", str(spool), "--stats-file",
               str(stats), "--command-wait", "2", "--backoff-cap", "2", "--enrol-poll", "0.5",
               "--flush-on-stop", "25", "--in-flight-from", "none", *args]
        proc = self._proc(f"agent-{hostname}", cmd, env, cls=AgentProc, stats_path=stats)
        return proc.start()  # type: ignore[no-any-return]

    # -- the end --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every process (agents first, so their last batches reach a live server)."""
        agents = [p for p in self.procs if isinstance(p, AgentProc)]
        for proc in agents + [p for p in reversed(self.procs) if not isinstance(p, AgentProc)]:
            proc.stop()

    def log_tails(self, lines: int = 40) -> str:
        out = []
        for proc in self.procs:
            tail = "\n".join(proc.log().splitlines()[-lines:])
            out.append(f"---- {proc.name} ({proc.log_path}) ----\n{tail}")
        return "\n".join(out)
