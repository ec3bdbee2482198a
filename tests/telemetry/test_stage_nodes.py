"""The gateway's per-node stage breakdown: stage samples naming a node (and their errors) roll up per
node, stay out of the tier's rollup, and are read per cohort of nodes; bad ones are refused by name."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

import apps.telemetry.selectors.cohorts as telemetry_cohorts
from apps.agents.choices import AgentKind
from apps.agents.models import AgentToken
from apps.inventory.models import Node, Rack, Tier
from apps.telemetry.ingest.receive import telemetry_ingest
from apps.telemetry.models import StageNodeRollup, StageRollup, StageSample
from apps.telemetry.rollups.rollup import telemetry_rollup
from tests.telemetry.conftest import Fleet, stage_sample

pytestmark = pytest.mark.django_db
URL = "/api/v1/telemetry/"


def test_a_per_node_breakdown_rolls_up_per_node_and_stays_out_of_the_tier_rollup(fleet: Fleet) -> None:
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=2)
    at = minute + dt.timedelta(seconds=20)
    gw = AgentToken.objects.get(kind=AgentKind.GATEWAY)
    telemetry_ingest(token=gw, payload={"batch_id": "gw-nodes-0001", "stage_samples": [
        stage_sample("intent", at, count=100, p50_ms=100, p95_ms=300, p99_ms=400, max_ms=500),
        stage_sample("intent", at, node="n-a", count=60, errors=3, p50_ms=90, p95_ms=280, p99_ms=390, max_ms=450),
        stage_sample("intent", at + dt.timedelta(seconds=20), node="n-a", count=40, errors=1, p50_ms=100,
                     p95_ms=320, p99_ms=400, max_ms=470),
        stage_sample("intent", at, node="n-b", count=40, p50_ms=130, p95_ms=350, p99_ms=420, max_ms=600),
    ]})
    assert StageSample.objects.filter(node__isnull=False).count() == 3
    telemetry_rollup(now=timezone.now())
    tier = StageRollup.objects.get(stage="intent", minute=minute)
    assert (tier.count, tier.p95_ms, tier.max_ms) == (100, 300, 500)  # the tier's own summary only
    a = StageNodeRollup.objects.get(node=fleet.node_a, stage="intent", minute=minute)
    assert (a.count, a.errors, a.p95_ms, a.max_ms, a.tier_id) == (100, 4, 320, 470, fleet.tier.pk)
    assert a.p50_ms == pytest.approx((90 * 60 + 100 * 40) / 100)
    figures = telemetry_cohorts.stage_cohorts(cohorts={"a": [fleet.node_a.pk], "b": [fleet.node_b.pk], "none": []},
                                      since=minute, until=timezone.now())
    assert figures["a"]["intent"] == {"requests": 100, "errors": 4, "error_rate": 0.04, "p95_ms": 320.0,
                                      "p95_max_ms": 320.0, "nodes": 1, "minutes": 1}
    assert figures["b"]["intent"]["error_rate"] == 0 and figures["b"]["intent"]["p95_ms"] == 350
    assert figures["none"] == {}
    series = telemetry_cohorts.stage_cohort_series(cohorts={"a": [fleet.node_a.pk]}, since=minute, until=timezone.now())
    assert series["a"] == [{"minute": minute.isoformat(), "p95_ms": {"intent": 320.0}, "error_rate": 0.04}]


@pytest.mark.parametrize(("over", "field", "message"), [
    ({"node": "n-nowhere"}, "node", "unknown node n-nowhere"),
    ({"node": "n-access"}, "node", "is not in tier hybrid_inference"),
    ({"node": "n-a", "errors": 101}, "errors", "must not exceed count"),
    ({"errors": -1}, "errors", "must be an integer"),
])
def test_a_bad_breakdown_is_refused_by_name_and_writes_nothing(fleet: Fleet, over: dict[str, Any], field: str,
                                                               message: str) -> None:
    Node.objects.create(hostname="n-access", rack=Rack.objects.get(name="rack-t"), slot=9,
                        tier=Tier.objects.exclude(pk=fleet.tier.pk).order_by("level")[0])
    r = fleet.client(fleet.key_gw).post(URL, {"batch_id": "gw-nodes-bad1", "stage_samples": [
        stage_sample("intent"), stage_sample("intent", **over)]}, format="json")
    assert r.status_code == 400, r.content
    errors = r.json()["errors"]
    assert message in " ".join(errors[f"stage_samples[1].{field}"]), errors
    assert not StageSample.objects.exists()
