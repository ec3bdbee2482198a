"""A real API server process (uvicorn) on the pytest test database, for tests
that need the network path an agent takes: kill it, restart it, watch."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import httpx
from django.conf import settings

from controlplane.engines import BASE_DIR, VAR_DIR, read_state


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_database_url() -> str:
    """DATABASE_URL of this test run's database (pytest-django renamed it to test_*)."""
    base = os.environ.get("DATABASE_URL") or read_state()["DATABASE_URL"]
    parts = urlparse(base)
    return urlunparse(parts._replace(path="/" + str(settings.DATABASES["default"]["NAME"])))


class LiveServer:
    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"uvicorn-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 45.0) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "REDIS_URL": os.environ.get("REDIS_URL") or read_state()["REDIS_URL"],
            "CONTROLPLANE_VAR_DIR": str(VAR_DIR),
            "DB_CONN_MAX_AGE": "0",
            "LOG_LEVEL": "WARNING",
        }
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "controlplane.asgi:application", "--host", "127.0.0.1",
             "--port", str(self.port), "--no-access-log", "--lifespan", "off"],
            cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the API server exited with {self.proc.returncode}: "
                                   f"{self.log_path.read_text()[-2000:]}")
            try:
                httpx.get(f"{self.url}/api/v1/agent/commands/", timeout=1.0)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"the API server did not answer within {timeout} s")

    def kill(self) -> None:
        """Stop the server the hard way (as a crash would)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
