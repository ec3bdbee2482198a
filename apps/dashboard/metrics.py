"""``GET /metrics``: the control plane in Prometheus text format, for the monitoring an operator
already runs (deploy/grafana, deploy/prometheus). The per-process series are declared in
apps/common/metrics.py; the fleet-wide ones are read here when the endpoint is scraped, from the
same selectors the dashboard reads (one snapshot per scrape).

Protected: a request must carry ``Authorization: Bearer <METRICS_TOKEN>`` when that setting is
set, or come from an address in ``METRICS_ALLOWED_IPS`` (default: loopback only).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator
from typing import Any

from celery import current_app
from django.conf import settings
from django.db.models import Count, Min
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from apps.common.leases import lease_holders
from apps.common.metrics import TASK_BUCKETS, task_figures
from apps.dashboard import selectors
from apps.health.choices import ACTIVE_FINDING_STATES, Severity
from apps.health.models import Finding
from apps.rollouts.choices import ACTIVE_ROLLOUT_STATES, Step
from apps.rollouts.models import Rollout, RolloutNode
from apps.telemetry.models import IngestBatch

# The queues a worker takes, as Redis lists named after them (Celery's Redis transport).
QUEUES = ("default", "telemetry", "operations", "vectors", "health")


class FleetCollector(Collector):
    """Figures read at scrape time: a handful of series per tier, stage, task and rollout."""

    def collect(self) -> Iterator[Any]:
        snapshot = selectors.live_snapshot()
        nodes = GaugeMetricFamily("controlplane_nodes", "Nodes by tier and state.", labels=["tier", "state"])
        queue = GaugeMetricFamily("controlplane_tier_queue_depth", "Requests waiting in each tier's queues.",
                                  labels=["tier"])
        p95 = GaugeMetricFamily("controlplane_stage_latency_p95_seconds",
                                "Each stage's p95 latency in each tier, over the last minutes reported.",
                                labels=["tier", "stage"])
        for tier in snapshot["tiers"]:
            for state, count in sorted(tier["by_state"].items()):
                nodes.add_metric([tier["kind"], state], count)
            if tier["queue_depth"] is not None:
                queue.add_metric([tier["kind"]], tier["queue_depth"])
            for stage in tier["stages"]:
                if stage.get("p95_ms") is not None:
                    p95.add_metric([tier["kind"], stage["stage"]], stage["p95_ms"] / 1000)
        yield from (nodes, queue, p95)

        findings = GaugeMetricFamily("controlplane_findings_open", "Active health findings by severity.",
                                     labels=["severity"])
        open_by = dict(Finding.objects.filter(state__in=ACTIVE_FINDING_STATES).values_list("severity")
                       .annotate(n=Count("id")).values_list("severity", "n"))
        for severity in Severity.values:
            findings.add_metric([severity], open_by.get(severity, 0))
        yield findings

        rollouts = GaugeMetricFamily("controlplane_rollout_nodes", "Nodes of each active rollout by step.",
                                     labels=["rollout", "state", "step"])
        active = {r.pk: r for r in Rollout.objects.filter(state__in=ACTIVE_ROLLOUT_STATES)}
        steps = (RolloutNode.objects.filter(rollout_id__in=active).values_list("rollout_id", "step")
                 .annotate(n=Count("id")))
        counts: dict[tuple[int, str], int] = {(rid, step): n for rid, step, n in steps}
        for rid, rollout in sorted(active.items()):
            for step in Step.values:
                rollouts.add_metric([str(rid), rollout.state, step], counts.get((rid, step), 0))
        yield rollouts

        pending = IngestBatch.objects.filter(stored_at__isnull=True).aggregate(n=Count("id"), oldest=Min("received_at"))
        yield GaugeMetricFamily("controlplane_ingest_pending_batches", "Accepted telemetry batches not stored yet.",
                                value=pending["n"])
        lag = (timezone.now() - pending["oldest"]).total_seconds() if pending["oldest"] else 0.0
        yield GaugeMetricFamily("controlplane_writer_lag_seconds",
                                "Age of the oldest accepted telemetry batch the writer has not stored.", value=lag)

        yield from self._celery()

        leases = GaugeMetricFamily("controlplane_lease_held", "1 while a process holds the role's lease.",
                                   labels=["lease", "holder"])
        for holder in lease_holders():
            leases.add_metric([holder.name, holder.holder or ""], 1 if holder.holder else 0)
        yield leases

    def _celery(self) -> Iterator[Any]:
        lengths = GaugeMetricFamily("controlplane_celery_queue_length", "Tasks waiting in each Celery queue.",
                                    labels=["queue"])
        with current_app.connection_for_read() as conn:
            client = conn.default_channel.client  # type: ignore[attr-defined]  # the Redis transport's channel
            for name in QUEUES:
                lengths.add_metric([name], client.llen(name))
        yield lengths

        runs = CounterMetricFamily("controlplane_celery_task_runs", "Celery task runs.", labels=["task"])
        failures = CounterMetricFamily("controlplane_celery_task_failures", "Celery task runs that failed.",
                                       labels=["task"])
        seconds = HistogramMetricFamily("controlplane_celery_task_duration_seconds", "Celery task run time.",
                                        labels=["task"])
        for task, f in sorted(task_figures().items()):
            runs.add_metric([task], f.get("runs", 0))
            failures.add_metric([task], f.get("failures", 0))
            buckets = [(str(le), f.get(f"le={le}", 0)) for le in TASK_BUCKETS] + [("+Inf", f.get("runs", 0))]
            seconds.add_metric([task], buckets, f.get("sum", 0.0))
        yield from (runs, failures, seconds)


def _allowed(request: HttpRequest) -> bool:
    token = getattr(settings, "METRICS_TOKEN", "")
    if token:
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
    return request.META.get("REMOTE_ADDR", "") in settings.METRICS_ALLOWED_IPS


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return HttpResponse("metrics: a bearer token (METRICS_TOKEN) or an allowed address is required\n",
                            status=403, content_type="text/plain")
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # every process of this host, summed
    else:
        registry.register(_ProcessOnly())
    registry.register(FleetCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


class _ProcessOnly(Collector):
    """This process's own series (the default registry), beside the fleet collector."""

    def collect(self) -> Iterator[Any]:
        yield from REGISTRY.collect()
