"""A new telemetry metric is one declaration: in a copy of the project, one line added to
``apps/telemetry/metrics.py`` and one ``makemigrations`` give a metric that the ingest validates
(its range, its null rule), stores (raw rows and the latest status, by COPY), rolls up per minute
and shows in the OpenAPI schema. Nothing else in the copy is edited."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
import yaml
from django.conf import settings

from tests.live.stack import test_database_url as run_database_url

pytestmark = [pytest.mark.heavy, pytest.mark.django_db]

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = '    _m("fan_rpm", "int4", unit="rpm", help="Fan speed", hi=30000, nullable_since=2),\n'

SCRIPT = r'''
import datetime as dt, json
import django
django.setup()
from django.test.utils import setup_test_environment
setup_test_environment()
from django.utils import timezone
from apps.telemetry.models import ModuleRollup, ModuleSample, ModuleStatus
from apps.telemetry.rollups.rollup import telemetry_rollup
from tests.telemetry.conftest import Fleet, iso, node_sample, stored

fleet = Fleet()
client = fleet.client(fleet.key_a)
serials = [m.serial for m in fleet.mod_a]
minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=2)
out = {}

def sample(at, rpm, **over):
    s = node_sample("n-a", at, serials)
    for m in s["modules"]:
        m["fan_rpm"] = rpm
    s.update(over)
    return s

def post(batch):
    r = client.post("/api/v1/telemetry/", batch, format="json")
    return r.status_code, r.json() if r.content else None

out["too_fast"] = post({"batch_id": "decl-bad-0001", "contract": 3,
                        "node_samples": [sample(minute + dt.timedelta(seconds=5), 99999)]})
missing = sample(minute, 1000)
del missing["modules"][1]["fan_rpm"]
out["missing"] = post({"batch_id": "decl-bad-0002", "contract": 3, "node_samples": [missing]})
out["null_v1"] = post({"batch_id": "decl-bad-0003", "node_samples": [sample(minute, None)]})
out["good"] = post({"batch_id": "decl-good-0001", "contract": 3, "node_samples": [
    sample(minute + dt.timedelta(seconds=10), 1200), sample(minute + dt.timedelta(seconds=40), 1800)]})
out["null_v2"] = post({"batch_id": "decl-good-0002", "contract": 2, "node_samples": [
    sample(minute + dt.timedelta(minutes=1, seconds=5), None)]})
out["stored"] = stored()
a0 = fleet.mod_a[0]
out["raw"] = sorted(ModuleSample.objects.filter(module=a0).values_list("fan_rpm", flat=True),
                    key=lambda v: (v is None, v))
out["status"] = ModuleStatus.objects.get(module=a0).fan_rpm
telemetry_rollup(now=timezone.now())
r = ModuleRollup.objects.get(module=a0, minute=minute)
out["rollup"] = [r.fan_rpm_mean, r.fan_rpm_max, r.samples]
print("RESULT " + json.dumps(out))
'''


def _redis_url_beside(url: str) -> str:
    """The run's Redis server, another database number: the copy's buffer never meets the run's."""
    base, _, db = url.rpartition("/")
    return f"{base}/{14 if db != '14' else 13}"


def _copy_project(dst: Path) -> None:
    for name in ("manage.py", "pyproject.toml"):
        shutil.copy2(ROOT / name, dst / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("controlplane", "apps", "agent", "templates", "static", "tests"):  # the simulator imports the agent
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.timeout(600)
def test_a_metric_declared_once_is_validated_stored_rolled_up_and_in_the_schema(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _copy_project(project)
    declared = project / "apps/telemetry/metrics.py"
    text = declared.read_text()
    anchor = "MODULE_METRICS: tuple[Metric, ...] = (\n"
    assert anchor in text
    declared.write_text(text.replace(anchor, anchor + DECLARATION, 1))  # the one edit

    test_url = run_database_url()
    name = f"cp_metric_decl_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(test_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    redis_url = _redis_url_beside(settings.REDIS_URL)
    env = {**os.environ, "DATABASE_URL": re.sub(r"/[^/?]+(\?|$)", f"/{name}\\1", test_url, count=1),
           "REDIS_URL": redis_url, "DB_POOL_MAX_SIZE": "0", "DB_CONN_MAX_AGE": "0",
           "CONTROLPLANE_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "PYTHONPATH": str(project)}

    redis.Redis.from_url(redis_url).flushdb()
    try:
        made = _run([sys.executable, "manage.py", "makemigrations", "telemetry", "--name", "fan_rpm"], project, env)
        migration = next((project / "apps/telemetry/migrations").glob("*_fan_rpm.py")).read_text()
        for model in ("modulesample", "modulestatus", "modulerollup"):
            assert f"model_name='{model}'" in migration, made
        assert {"'fan_rpm'", "'fan_rpm_mean'", "'fan_rpm_max'"} <= set(re.findall(r"'fan_rpm\w*'", migration))
        _run([sys.executable, "manage.py", "migrate", "--no-input"], project, env)
        result: dict[str, Any] = json.loads(
            _run([sys.executable, "-c", SCRIPT], project, env).split("RESULT ", 1)[1])
        _run([sys.executable, "manage.py", "spectacular", "--file", "schema.yaml"], project, env)
        schema = yaml.safe_load((project / "schema.yaml").read_text())
    finally:
        redis.Redis.from_url(redis_url).flushdb()
        with psycopg.connect(test_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    status, body = result["too_fast"]
    assert status == 400 and body["errors"] == {"node_samples[0].modules[0].fan_rpm": ["must be at most 30000"],
                                                "node_samples[0].modules[1].fan_rpm": ["must be at most 30000"]}
    status, body = result["missing"]
    assert status == 400 and body["errors"] == {"node_samples[0].modules[1].fan_rpm": ["is required (null when "
                                                                                      "unknown)"]}
    status, body = result["null_v1"]  # contract 1 has no unknowns; the declaration says since 2
    assert status == 400 and "node_samples[0].modules[0].fan_rpm" in body["errors"]
    assert result["good"][0] == 202 and result["null_v2"][0] == 202 and result["stored"] == 2
    assert result["raw"] == [1200, 1800, None]  # stored as sent; unknown stays null, never zero
    assert result["status"] is None  # the latest sample did not know it
    assert result["rollup"] == [1500.0, 1800, 2]

    prop = schema["components"]["schemas"]["ModuleSampleInRequest"]["properties"]["fan_rpm"]
    assert prop["type"] == "integer" and prop["maximum"] == 30000 and prop["minimum"] == 0
    assert prop["nullable"] is True and prop["description"].startswith("Fan speed (rpm)")
