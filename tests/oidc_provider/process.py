"""Start and stop the test provider (``serve.py``) from a test: its own database on the test run's
PostgreSQL, a fresh RSA key, a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID = "control-plane"
CLIENT_SECRET = "control-plane-secret-for-tests"
# name:password:groups; the mallory-* users get bad ID tokens on purpose (validators.py).
USERS = {
    "hanna": ("hanna-pw", ["team-hybrid"]),
    "ada": ("ada-pw", ["fleet-admins", "team-hybrid"]),
    "nobody": ("nobody-pw", ["marketing"]),
    "mallory-issuer": ("m-pw", ["fleet-admins"]),
    "mallory-expired": ("m-pw", ["fleet-admins"]),
    "mallory-signature": ("m-pw", ["fleet-admins"]),
}


@dataclass
class Provider:
    port: int
    process: subprocess.Popen[str]
    database: str
    log: Path

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}/o"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _admin_connection() -> Any:
    sd = connection.settings_dict
    return psycopg.connect(dbname="postgres", host=sd["HOST"] or None, port=sd["PORT"] or None,
                           user=sd["USER"] or None, password=sd["PASSWORD"] or None, autocommit=True)


def start(redirect_uris: list[str], *, timeout_s: float = 120.0) -> Provider:
    port = _free_port()
    database = f"oidc_provider_{os.getpid()}_{port}"
    with _admin_connection() as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    sd = connection.settings_dict
    env = {**os.environ, "PROVIDER_DB_NAME": database, "PROVIDER_DB_HOST": str(sd["HOST"] or ""),
           "PROVIDER_DB_PORT": str(sd["PORT"] or ""), "PROVIDER_DB_USER": str(sd["USER"] or ""),
           "PROVIDER_DB_PASSWORD": str(sd["PASSWORD"] or ""), "PROVIDER_PORT": str(port), "PROVIDER_RSA_KEY": key,
           "PROVIDER_CLIENT_ID": CLIENT_ID, "PROVIDER_CLIENT_SECRET": CLIENT_SECRET,
           "PROVIDER_REDIRECT_URIS": " ".join(redirect_uris),
           "PROVIDER_USERS": ",".join(f"{n}:{p}:{'+'.join(g)}" for n, (p, g) in USERS.items())}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    log = tempfile.NamedTemporaryFile("w+", prefix="oidc-provider-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen([sys.executable, "-m", "tests.oidc_provider.serve"], cwd=ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT, text=True)
    provider = Provider(port, process, database, Path(log.name))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = provider.log.read_text()
            stop(provider)
            raise RuntimeError(f"the test provider exited: {out[-2000:]}")
        try:
            if requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                return provider
        except requests.RequestException:
            pass
        time.sleep(0.3)
    stop(provider)
    raise RuntimeError("the test provider did not start in time")


def stop(provider: Provider) -> None:
    if provider.process.poll() is None:
        provider.process.terminate()
        try:
            provider.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            provider.process.kill()
            provider.process.wait(timeout=10)
    with _admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{provider.database}" WITH (FORCE)')
    provider.log.unlink(missing_ok=True)
