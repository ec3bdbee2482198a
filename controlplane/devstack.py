"""`make up`: engines, migrations, demo fleet, then every process of the
control plane in the foreground. Ctrl-C stops all of them, engines included;
running it again reuses the data under ./var/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from controlplane.celery import WORKER_QUEUES
from controlplane.engines import BASE_DIR, VAR_DIR, running_engines

PY = sys.executable


def _manage(*args: str) -> None:
    subprocess.run([PY, "manage.py", *args], check=True, cwd=BASE_DIR)


def _processes(host: str, port: str) -> dict[str, list[str]]:
    procs = {
        "web": [PY, "-m", "uvicorn", "controlplane.asgi:application", "--host", host, "--port", port,
                "--no-access-log", "--ws", "websockets-sansio", "--timeout-keep-alive", "65"],
        "worker": [PY, "-m", "celery", "-A", "controlplane", "worker", "-l", "INFO", "-Q",
                   ",".join(WORKER_QUEUES), "--concurrency", "2", "-n", "worker@%h"],
        "beat": [PY, "-m", "celery", "-A", "controlplane", "beat", "-l", "INFO",
                 "--schedule", str(VAR_DIR / "celerybeat-schedule")],
        "broadcaster": [PY, "manage.py", "broadcast", "--interval", "1.0"],
        "writer": [PY, "manage.py", "telemetry_writer"],
    }
    if (BASE_DIR / "apps" / "simulator" / "management" / "commands" / "simulate.py").exists():
        procs["simulator"] = [PY, "manage.py", "simulate", "--api", f"http://{host}:{port}"]
    return procs


def main() -> int:
    host = os.environ.get("HOST", "127.0.0.1")
    port = os.environ.get("PORT", "8000")
    children: dict[str, subprocess.Popen[bytes]] = {}
    stopping = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    with running_engines() as env:
        os.environ.update(env)
        _manage("migrate", "--no-input", "-v", "0")
        _manage("seed_demo")
        logdir = VAR_DIR / "log"
        logdir.mkdir(parents=True, exist_ok=True)
        for name, cmd in _processes(host, port).items():
            out = open(logdir / f"{name}.log", "ab")  # noqa: SIM115
            children[name] = subprocess.Popen(cmd, cwd=BASE_DIR, stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True)
        credentials = (VAR_DIR / "demo-credentials.txt").read_text().rstrip()
        print(
            f"\nControl plane running at http://{host}:{port}/  (API docs: http://{host}:{port}/api/docs/)\n"
            f"Demo logins:\n{credentials}\n"
            f"Logs: {logdir}/  ·  processes: {', '.join(children)}  ·  Ctrl-C stops everything.\n",
            flush=True,
        )
        while not stopping:
            for name, proc in children.items():
                if proc.poll() is not None:
                    print(f"[up] {name} exited with {proc.returncode}; see {logdir / (name + '.log')}", flush=True)
                    stopping = True
            time.sleep(0.5)
        print("[up] stopping...", flush=True)
        for proc in children.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in children.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    os.chdir(Path(BASE_DIR))
    sys.exit(main())
