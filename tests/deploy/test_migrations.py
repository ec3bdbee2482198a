"""Migrations that two releases survive at once: during a rolling upgrade the old web pods run on
the new schema, so a migration may add (a nullable column, a table, an index) but not drop or rename
what the old code reads. `manage.py lintmigrations` (django-migration-linter) checks every migration
written since the linter came (the older ones are listed in migrations_before_the_linter.txt), on a
throwaway database: sqlmigrate runs a RunPython nested in SeparateDatabaseAndState for real."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
BASELINE = Path(__file__).with_name("migrations_before_the_linter.txt")


def migration_files() -> set[str]:
    return {str(p.relative_to(ROOT)) for pattern in ("apps/*/migrations/0*.py", "controlplane/migrations/0*.py")
            for p in ROOT.glob(pattern)}


def baseline() -> set[str]:
    return {line.strip() for line in BASELINE.read_text().splitlines() if line.strip() and not line.startswith("#")}


@pytest.fixture
def throwaway_database_url() -> Iterator[str]:
    """An empty database on the tests' PostgreSQL server, dropped afterwards."""
    d = settings.DATABASES["default"]
    name = f"lint_migrations_{uuid.uuid4().hex[:12]}"
    params = {"host": d["HOST"], "port": d["PORT"] or None, "user": d["USER"] or None,
              "password": d["PASSWORD"] or None, "dbname": "postgres", "autocommit": True}
    with psycopg.connect(**params) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    auth = quote(d["USER"] or "") + (":" + quote(d["PASSWORD"]) if d["PASSWORD"] else "")
    host = d["HOST"] or "127.0.0.1"
    if host.startswith("/"):  # a unix socket directory (the embedded server)
        yield f"postgresql://{auth}@:{d['PORT'] or 5432}/{name}?host={quote(host)}"
    else:
        yield f"postgresql://{auth}@{host}:{d['PORT'] or 5432}/{name}"
    with psycopg.connect(**params) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def lintmigrations(migrations: list[str], tmp_path: Path, database_url: str,
                   **env: str) -> subprocess.CompletedProcess[str]:
    listing = tmp_path / "migrations.txt"
    listing.write_text("".join(f"{m}\n" for m in migrations))
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "lintmigrations", "--no-cache",
         "--include-migrations-from", str(listing)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "DATABASE_URL": database_url, "DB_POOL_MAX_SIZE": "0", **env})


def test_the_baseline_lists_only_migrations_that_exist() -> None:
    assert baseline() <= migration_files(), baseline() - migration_files()


def test_every_migration_since_the_baseline_is_backward_compatible(tmp_path: Path,
                                                                   throwaway_database_url: str) -> None:
    new = sorted(migration_files() - baseline())
    result = lintmigrations(new, tmp_path, throwaway_database_url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Erroneous migrations: 0/{len(new)}" in result.stdout, result.stdout


def test_the_listing_reaches_the_linter(tmp_path: Path, throwaway_database_url: str) -> None:
    """The same listing of repository paths, with two baselined migrations: both are linted."""
    listed = ["apps/inventory/migrations/0004_node_gray.py", "apps/telemetry/migrations/0004_agent_key_rotation.py"]
    result = lintmigrations(listed, tmp_path, throwaway_database_url)
    assert "(inventory, 0004_node_gray)..." in result.stdout, result.stdout
    assert "(telemetry, 0004_agent_key_rotation)..." in result.stdout, result.stdout
    assert "Ignored migrations: 0/2" in result.stdout, result.stdout


# A throwaway app with a table and a migration that drops one of its columns.
PROBE_APP = {
    "lintprobe/__init__.py": "",
    "lintprobe/migrations/__init__.py": "",
    "lintprobe/migrations/0001_initial.py": """
        from django.db import migrations, models

        class Migration(migrations.Migration):
            initial = True
            dependencies = []
            operations = [migrations.CreateModel("Rack", [
                ("id", models.BigAutoField(primary_key=True)),
                ("name", models.CharField(max_length=40)),
                ("room", models.CharField(max_length=40, null=True)),
            ])]
    """,
    "lintprobe/migrations/0002_add_row.py": """
        from django.db import migrations, models

        class Migration(migrations.Migration):
            dependencies = [("lintprobe", "0001_initial")]
            operations = [migrations.AddField("rack", "row", models.CharField(max_length=8, null=True))]
    """,
    "lintprobe/migrations/0003_drop_room.py": """
        from django.db import migrations

        class Migration(migrations.Migration):
            dependencies = [("lintprobe", "0002_add_row")]
            operations = [migrations.RemoveField("rack", "room")]
    """,
    "lintprobe_settings.py": """
        from tests.settings import *  # noqa: F403

        INSTALLED_APPS = [*INSTALLED_APPS, "lintprobe"]  # noqa: F405
    """,
}


def test_a_migration_that_drops_a_column_is_caught(tmp_path: Path, throwaway_database_url: str) -> None:
    for name, text in PROBE_APP.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    migrations = [f"{tmp_path}/lintprobe/migrations/{m}.py" for m in ("0002_add_row", "0003_drop_room")]
    result = lintmigrations(migrations, tmp_path, throwaway_database_url,
                            DJANGO_SETTINGS_MODULE="lintprobe_settings",
                            PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "(lintprobe, 0002_add_row)... OK" in out, out  # adding a nullable column is fine
    assert "(lintprobe, 0003_drop_room)... ERR" in out and "DROPPING columns" in out, out
