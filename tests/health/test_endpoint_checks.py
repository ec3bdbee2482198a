"""Tier 3 endpoints: latency over the endpoint's SLO, error rate and quota headroom, from the
gateway's per-endpoint figures as ingest stores them. Each check opens a finding on 3 of 5 failing
sweeps and resolves it after 5 passes; endpoints are not nodes: no hold, never `act`."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.agents.choices import AgentKind
from apps.agents.services import agent_token_issue
from apps.health.advisor import advice
from apps.health.choices import FindingState, SubjectKind
from apps.health.models import CheckState, Delivery, Finding, Receiver
from apps.health.notify import payload
from apps.health.sweep import sweep
from apps.inventory.choices import EndpointKind, TierKind
from apps.inventory.models import ExternalEndpoint, Tier
from apps.operations.models import Drain, Quarantine
from apps.telemetry.ingest.receive import telemetry_ingest

_batch = itertools.count(1)
GOOD = {"requests": 120, "errors": 1, "tokens": 70_000, "p95_ms": 1500.0}
BAD = {
    "endpoint_latency": {**GOOD, "p95_ms": 8000.0},
    "endpoint_errors": {**GOOD, "errors": 30},
    "endpoint_quota": {**GOOD, "requests": 570},  # 570 of 600 requests/min: 5 % headroom left
}
SUMMARY = {"endpoint_latency": "p95 8000 ms over its SLO of 5000 ms",
           "endpoint_errors": "25.0% of requests failed (90 of 360 in 3 min",
           "endpoint_quota": "570 of 600 requests/min (95% of its requests quota, 5% headroom)"}


class Gateway:
    def __init__(self) -> None:
        self.tier = Tier.objects.get(kind=TierKind.EXTERNAL_LARGE_MODEL)
        self.endpoint = ExternalEndpoint.objects.create(
            name="gpu-70b", tier=self.tier, kind=EndpointKind.GPU_CLUSTER, url="https://gpu.example/v1",
            model="m70b", quota_requests_per_min=600, quota_tokens_per_min=1_000_000, latency_slo_ms=5000)
        self.token, _ = agent_token_issue(kind=AgentKind.GATEWAY, node=None, actor="test")

    def report(self, minute: dt.datetime, figures: dict[str, Any]) -> None:
        """The gateway's tier sample covering ``minute`` whole (window 60 s) with the endpoint's figures."""
        at = min(minute + dt.timedelta(seconds=59), timezone.now())
        telemetry_ingest(token=self.token, payload={"batch_id": f"gw-ep-{next(_batch):06d}", "contract": 3,
                                                    "tier_samples": [{
                                                        "time": at.isoformat(), "tier": self.tier.kind,
                                                        "window_s": 60, "queue_depth": 0, "arrivals": 100,
                                                        "completions": 100,
                                                        "endpoints": [{"endpoint": self.endpoint.name, **figures}]}]})


@pytest.fixture
def gateway(db: Any) -> Gateway:
    return Gateway()


def _history(gw: Gateway, bad: dict[str, Any]) -> tuple[dt.datetime, dt.datetime]:
    """Three bad minutes some minutes ago, then three good ones up to now. Returns when a sweep sees only
    the bad minutes, and now (a sweep sees only the good ones)."""
    now = timezone.now()
    this_minute = now.replace(second=0, microsecond=0)
    first_bad = this_minute - dt.timedelta(minutes=8)
    for i in range(3):
        gw.report(first_bad + dt.timedelta(minutes=i), bad)
        gw.report(this_minute - dt.timedelta(minutes=2 - i), GOOD)
    return first_bad + dt.timedelta(minutes=2, seconds=59), now


@pytest.mark.parametrize("check", list(BAD))
def test_each_endpoint_check_opens_a_finding_and_resolves_it(gateway: Gateway, check: str) -> None:
    Receiver.objects.create(name="ops", kind=Receiver.Kind.WEBHOOK, url="http://127.0.0.1:9/alerts")
    bad_time, now = _history(gateway, BAD[check])
    for _ in range(2):
        sweep(now=bad_time)
    assert not Finding.objects.filter(check_name=check).exists()  # 2 of 5 failing: not yet
    sweep(now=bad_time)
    [f] = Finding.objects.filter(check_name=check)
    assert f.state == FindingState.OPEN and f.subject_kind == SubjectKind.ENDPOINT
    assert f.subject_key == f"endpoint:{gateway.endpoint.pk}" and f.tier == gateway.tier
    assert f.node is None and f.module is None
    assert SUMMARY[check] in f.summary and f.evidence["endpoint"] == "gpu-70b"
    # The other two checks pass on the same figures: each judges its own figure.
    others = set(BAD) - {check}
    assert set(CheckState.objects.filter(check_name__in=others).values_list("last_status", flat=True)) == {"pass"}
    # Notified, with the endpoint named; no hold anywhere (endpoints are not nodes).
    [delivery] = Delivery.objects.filter(finding=f, event="open")
    body = payload(delivery)
    assert body["alerts"][0]["labels"]["endpoint"] == "gpu-70b" and body["status"] == "firing"
    assert "on gpu-70b" in body["text"] and body["commonAnnotations"]["remedy"]
    assert not f.holds and f.action == {} and not Drain.objects.exists() and not Quarantine.objects.exists()

    for _ in range(4):
        sweep(now=now)
    assert Finding.objects.get(pk=f.pk).state == FindingState.OPEN
    sweep(now=now)
    f.refresh_from_db()
    assert f.state == FindingState.RESOLVED and f.resolved_at == now
    assert Delivery.objects.filter(finding=f, event="resolve").exists()


def test_a_used_up_quota_is_critical_and_tokens_count_too(gateway: Gateway) -> None:
    this_minute = timezone.now().replace(second=0, microsecond=0)
    for i in range(3):
        gateway.report(this_minute - dt.timedelta(minutes=2 - i), {**GOOD, "tokens": 1_050_000})
    for _ in range(3):
        sweep()
    [f] = Finding.objects.filter(check_name="endpoint_quota")
    assert f.severity == "critical" and f.evidence["binding"] == "tokens" and f.evidence["headroom"] < 0
    assert "of 1000000 tokens/min (105% of its tokens quota, 0% headroom)" in f.summary


def test_no_figures_is_unknown_never_a_pass_and_a_disabled_endpoint_is_not_checked(gateway: Gateway) -> None:
    sweep()
    states = dict(CheckState.objects.filter(subject_key=f"endpoint:{gateway.endpoint.pk}").values_list(
        "check_name", "last_status"))
    assert states == {"endpoint_latency": "unknown", "endpoint_errors": "unknown", "endpoint_quota": "unknown"}
    assert "reported no figures of gpu-70b" in CheckState.objects.get(check_name="endpoint_quota").last_summary
    # Too few requests to judge latency and errors: no evaluation; the quota is judged on any traffic.
    this_minute = timezone.now().replace(second=0, microsecond=0)
    gateway.report(this_minute, {"requests": 3, "errors": 2, "tokens": 900, "p95_ms": 9000.0})
    sweep()
    states = dict(CheckState.objects.filter(subject_key=f"endpoint:{gateway.endpoint.pk}").values_list(
        "check_name", "history"))
    assert states == {"endpoint_latency": "u", "endpoint_errors": "u", "endpoint_quota": "up"}

    ExternalEndpoint.objects.filter(pk=gateway.endpoint.pk).update(enabled=False)
    CheckState.objects.all().delete()
    sweep()
    assert not CheckState.objects.filter(subject_key__startswith="endpoint:").exists()


def test_endpoint_checks_observe_or_alert_but_never_act(gateway: Gateway, admin_api: APIClient) -> None:
    r = admin_api.patch("/api/v1/health/checks/endpoint_quota/", {"policy": "act"}, format="json")
    assert r.status_code == 400 and "policy" in r.json()["errors"]
    r = admin_api.patch("/api/v1/health/checks/endpoint_quota/", {"params": {"min_headroom": 0.5}}, format="json")
    assert r.status_code == 400 and "params.min_headroom" in r.json()["errors"]
    r = admin_api.patch("/api/v1/health/checks/endpoint_errors/", {"params": {"max_error_rate": 0.1},
                                                                   "policy": "observe"}, format="json")
    assert r.status_code == 200 and r.json()["params"]["max_error_rate"] == 0.1


def test_the_advisor_names_cause_confirmation_and_remedy_for_each_endpoint_check(gateway: Gateway) -> None:
    tier = gateway.tier.pk
    quota = advice("endpoint_quota", tier_id=tier)
    assert "quota" in quota[0]["cause"] and "429" in quota[0]["cause"]
    assert "requests/min and tokens/min" in quota[0]["confirm"]
    assert "Spill over" in quota[0]["remedy"] and "quota raise" in quota[0]["remedy"]
    latency = advice("endpoint_latency", tier_id=tier)
    assert "saturated" in latency[0]["cause"] and "against the SLO" in latency[0]["confirm"]
    assert "Spill over" in latency[0]["remedy"]
    errors = advice("endpoint_errors", tier_id=tier)
    assert "failing requests" in errors[0]["cause"] and "status codes" in errors[0]["confirm"]
    assert all(a["link"] == f"/tiers/{tier}/" for a in quota + latency + errors)
    assert all(a["cause"] and a["confirm"] and a["remedy"] for a in quota + latency + errors)
