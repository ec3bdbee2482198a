"""The Grafana dashboards and Prometheus alert rules in deploy/: promtool accepts the rules and
every dashboard query, and every series they name is one /metrics really exports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))
SERIES = re.compile(r"\b(controlplane_[a-z0-9_]+)")
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("REQUIRE_TOOLS") == "1":
            pytest.fail("promtool is missing and REQUIRE_TOOLS=1 (make monitor-deps installs Debian's prometheus)")
        pytest.skip("promtool is missing (make monitor-deps; set REQUIRE_TOOLS=1 to fail instead)")
    return found


def check_rules(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)


def dashboard_queries() -> dict[str, str]:
    out = {}
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel["targets"]:
                out[f"{path.name}: {panel['title']} ({target['refId']})"] = target["expr"]
    return out


def rule_queries() -> dict[str, str]:
    return {rule["alert"]: rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"]
            for rule in group["rules"]}


def test_promtool_accepts_the_alert_rules_and_refuses_a_broken_one(tmp_path: Path) -> None:
    result = check_rules(RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    broken = tmp_path / "broken.yml"
    broken.write_text(RULES.read_text().replace("> 0.2", "> > 0.2", 1))
    assert check_rules(broken).returncode != 0


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert len(DASHBOARDS) == 4 and len(queries) >= 20
    as_rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, expr in enumerate(queries.values())]}]}
    path = tmp_path / "dashboards.yml"
    path.write_text(yaml.safe_dump(as_rules))
    result = check_rules(path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.django_db
def test_every_series_the_dashboards_and_rules_name_is_exported() -> None:
    exported = {f.name for f in text_string_to_metric_families(Client().get("/metrics").content.decode())}
    named: dict[str, set[str]] = {}
    for where, expr in {**dashboard_queries(), **rule_queries()}.items():
        for series in SERIES.findall(expr):
            base = next((series.removesuffix(s) for s in SUFFIXES if series.endswith(s)), series)
            named.setdefault(base, set()).add(where)
    unknown = {series: sorted(where) for series, where in named.items() if series not in exported}
    assert not unknown, unknown
    assert len(named) >= 15  # the dashboards and rules cover the fleet, ingest, workers and rollouts


def test_each_dashboard_is_a_grafana_dashboard_with_a_datasource_variable() -> None:
    for path in DASHBOARDS:
        board: dict[str, Any] = json.loads(path.read_text())
        assert board["uid"].startswith("cp-") and board["title"].startswith("Control plane")
        assert [v["name"] for v in board["templating"]["list"]] == ["datasource"]
        assert all(p["datasource"]["uid"] == "${datasource}" for p in board["panels"])
