"""GET /metrics: Prometheus text that prometheus_client's own parser reads, the series the
deploy's dashboards and alert rules name, no series per node (a 600-node fleet has no more lines
than the 60-node demo), and scrapes only with the bearer token or from an allowed address."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from apps.common.leases import Lease
from apps.common.metrics import task_finished
from apps.inventory.demo import seed_inventory_demo
from tests.live.stack import wait_for

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]

SERIES = {
    "controlplane_nodes", "controlplane_tier_queue_depth", "controlplane_stage_latency_p95_seconds",
    "controlplane_findings_open", "controlplane_rollout_nodes", "controlplane_celery_queue_length",
    "controlplane_celery_task_runs", "controlplane_celery_task_failures", "controlplane_celery_task_duration_seconds",
    "controlplane_lease_held", "controlplane_http_request_duration_seconds", "controlplane_websocket_clients",
    "controlplane_websocket_frames", "controlplane_ingest_batches", "controlplane_ingest_rows",
    "controlplane_ingest_rejections", "controlplane_ingest_pending_batches", "controlplane_writer_lag_seconds",
}


def scrape(client: Client | None = None, **headers: Any) -> tuple[int, str]:
    response = (client or Client()).get("/metrics", **headers)
    return response.status_code, response.content.decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_it_shows_the_fleet_by_tier_and_state_and_the_process_figures() -> None:
    seed_inventory_demo(racks=3)  # the demo's 60 nodes
    Client().get("/healthz")
    status, text = scrape()
    assert status == 200
    families = {f.name for f in text_string_to_metric_families(text)}
    missing = {name for name in SERIES if name not in families}
    assert not missing, missing
    got = samples(text)
    nodes = {labels: v for (name, labels), v in got.items() if name == "controlplane_nodes"}
    assert sum(nodes.values()) == 60
    assert got[("controlplane_http_request_duration_seconds_count", (("method", "GET"), ("route", "healthz")))] >= 1
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) < 2000, len(lines)


@pytest.mark.heavy  # seeds 600 nodes
def test_a_larger_fleet_adds_no_series() -> None:
    seed_inventory_demo(racks=1)
    scrape()  # the scrape's own route is timed from the first scrape on
    small = len([line for line in scrape()[1].splitlines() if line and not line.startswith("#")])
    seed_inventory_demo(racks=30)  # 600 nodes
    status, text = scrape()
    assert sum(v for (name, _), v in samples(text).items() if name == "controlplane_nodes") == 600
    large = len([line for line in text.splitlines() if line and not line.startswith("#")])
    assert large == small, (small, large)  # not one line per node


def test_celery_tasks_are_counted_with_their_failures_and_durations() -> None:
    task_finished(name="apps.example.tasks.quick", seconds=0.05, failed=False)
    task_finished(name="apps.example.tasks.quick", seconds=3.0, failed=True)
    got = samples(scrape()[1])
    task = (("task", "apps.example.tasks.quick"),)
    assert got[("controlplane_celery_task_runs_total", task)] >= 2
    assert got[("controlplane_celery_task_failures_total", task)] >= 1
    assert got[("controlplane_celery_task_duration_seconds_bucket", (("le", "0.1"), *task))] >= 1
    assert got[("controlplane_celery_task_duration_seconds_bucket", (("le", "10.0"), *task))] >= 2


def test_it_names_the_lease_holders() -> None:
    lease = Lease("beat", holder="beat@host-a:7", ttl_s=30)
    assert lease.acquire()
    try:
        got = samples(scrape()[1])
        assert got[("controlplane_lease_held", (("holder", "beat@host-a:7"), ("lease", "beat")))] == 1
        assert got[("controlplane_lease_held", (("holder", ""), ("lease", "broadcaster")))] in (0, 1)
    finally:
        lease.release()


def test_a_scrape_needs_the_token_when_one_is_set(settings: Any) -> None:
    settings.METRICS_TOKEN = "s3cret-scrape"
    assert scrape()[0] == 403
    assert scrape(HTTP_AUTHORIZATION="Bearer wrong")[0] == 403
    assert scrape(HTTP_AUTHORIZATION="Bearer s3cret-scrape")[0] == 200


def test_without_a_token_only_allowed_addresses_scrape(settings: Any) -> None:
    settings.METRICS_ALLOWED_IPS = ["10.0.0.9"]
    assert scrape(REMOTE_ADDR="10.0.0.8")[0] == 403
    assert scrape(REMOTE_ADDR="10.0.0.9")[0] == 200


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_series_move_while_a_fleet_runs(live_stack: Any) -> None:
    """A simulated fleet against a real web process, worker and beat: between two scrapes the
    ingest, request and Celery figures grow."""
    seed_inventory_demo(racks=1)
    live_stack.web()
    live_stack.worker()
    live_stack.beat(every={"apps.operations.tasks.nodes_heartbeat": 1},
                    only=["apps.operations.tasks.nodes_heartbeat"])
    live_stack.simulator()

    def figures() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        response = httpx.get(f"{live_stack.url}/metrics", timeout=30)
        assert response.status_code == 200, response.text[:300]
        return samples(response.text)

    def total(got: dict[Any, float], name: str, **labels: str) -> float:
        return sum(v for (n, ls), v in got.items() if n == name and labels.items() <= dict(ls).items())

    def grown(before: dict[Any, float]) -> bool:
        now = figures()
        return all(total(now, name, **labels) > total(before, name, **labels) for name, labels in [
            ("controlplane_ingest_batches_total", {"outcome": "accepted"}),
            ("controlplane_ingest_rows_total", {"table": "node_samples"}),
            ("controlplane_celery_task_runs_total", {"task": "apps.operations.tasks.nodes_heartbeat"}),
            ("controlplane_http_request_duration_seconds_count", {"route": "metrics"}),
        ])

    def counting() -> dict[Any, float] | None:
        got = figures()
        return got if total(got, "controlplane_ingest_batches_total") else None

    first = wait_for(counting, timeout=120, what="the first accepted telemetry batch to be counted")
    assert first is not None
    wait_for(lambda: grown(first), timeout=120, what="ingest, Celery and request figures to grow between scrapes")


def test_with_a_multiprocess_directory_it_sums_every_process_of_the_host(tmp_path: Any, monkeypatch: Any) -> None:
    """Several web and worker processes on one host (PROMETHEUS_MULTIPROC_DIR, as the deploy files
    set it): a scrape answered by any of them shows the figures of all."""
    count = "from apps.common.metrics import INGEST_BATCHES; INGEST_BATCHES.labels(outcome='accepted').inc(%d)"
    for n in (2, 5):
        subprocess.run([sys.executable, "-c", count % n], check=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    got = samples(scrape()[1])
    assert got[("controlplane_ingest_batches_total", (("outcome", "accepted"),))] == 7
    assert ("controlplane_nodes", (("state", "active"), ("tier", "hybrid_inference"))) not in got  # no fleet yet
    assert any(name == "controlplane_celery_queue_length" for name, _ in got)  # the fleet-wide part is there too
