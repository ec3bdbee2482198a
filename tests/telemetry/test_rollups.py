"""Per-minute rollups and retention: the numbers the dashboard and the checks read."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import msgspec
import pytest
from django.db import connection
from django.utils import timezone

from apps.agents.choices import AgentKind
from apps.agents.models import AgentToken
from apps.agents.services import identity_of
from apps.telemetry.ingest.receive import telemetry_ingest, telemetry_receive
from apps.telemetry.models import (
    IngestBatch,
    ModuleRollup,
    NodeRollup,
    NodeSample,
    StageRollup,
    StageSample,
    TierRollup,
)
from apps.telemetry.rollups.retention import telemetry_retention
from apps.telemetry.rollups.rollup import _ROLLUPS, telemetry_rollup
from apps.telemetry.store import partitions
from tests.telemetry.conftest import Fleet, node_sample, stage_sample, tier_sample


def minute_ago(n: int) -> dt.datetime:
    return timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=n)


def ingest_minute(fleet: Fleet, minute: dt.datetime, batch: str = "m") -> None:
    """Three node samples, tier samples and two intent windows inside ``minute``."""
    node_token = AgentToken.objects.get(node=fleet.node_a)
    gw = AgentToken.objects.get(kind=AgentKind.GATEWAY)
    samples = []
    for sec, cpu, util, temp in ((5, 0.2, 0.1, 50.0), (25, 0.4, 0.3, 60.0), (45, 0.9, 0.8, 70.0)):
        s = node_sample("n-a", minute + dt.timedelta(seconds=sec), ["A-0"], cpu_util=cpu)
        s["modules"][0].update(util=util, temp_c=temp, link_width=2 if sec == 25 else 4, ecc_corrected=sec)
        samples.append(s)
    telemetry_ingest(token=node_token, payload={"batch_id": f"{batch}-node-{minute:%H%M}", "node_samples": samples})
    telemetry_ingest(token=gw, payload={
        "batch_id": f"{batch}-gw-{minute:%H%M}",
        "tier_samples": [tier_sample(minute + dt.timedelta(seconds=s), queue_depth=q, arrivals=100, completions=90,
                                     window_s=20, input_tokens=1000, output_tokens=200)
                         for s, q in ((10, 10), (30, 20), (50, 30))],
        "stage_samples": [
            stage_sample("intent", minute + dt.timedelta(seconds=20), count=100, p50_ms=100, p95_ms=300,
                         p99_ms=400, max_ms=500),
            stage_sample("intent", minute + dt.timedelta(seconds=40), count=300, p50_ms=200, p95_ms=250,
                         p99_ms=450, max_ms=900),
        ],
    })


def test_it_rolls_samples_up_per_minute(fleet: Fleet) -> None:
    minute = minute_ago(2)
    ingest_minute(fleet, minute)
    telemetry_rollup()
    node = NodeRollup.objects.get(node_id=fleet.node_a.pk, minute=minute)
    assert node.samples == 3
    assert node.cpu_util_mean == pytest.approx(0.5)
    assert node.cpu_util_max == pytest.approx(0.9)
    module = ModuleRollup.objects.get(module_id=fleet.mod_a[0].pk, minute=minute)
    assert (module.util_mean, module.temp_c_max, module.link_width_min, module.ecc_corrected_max) == (
        pytest.approx(0.4), 70.0, 2, 45)
    tier = TierRollup.objects.get(tier_id=fleet.tier.pk, minute=minute)
    assert (tier.queue_depth_mean, tier.queue_depth_max, tier.queue_depth_last) == (20.0, 30, 30)
    assert (tier.arrivals, tier.window_s, tier.output_tokens) == (300, 60.0, 600)
    stage = StageRollup.objects.get(tier_id=fleet.tier.pk, stage="intent", minute=minute)
    assert stage.count == 400
    assert stage.p50_ms == pytest.approx(175.0)  # count-weighted: (100*100 + 300*200) / 400
    assert (stage.p95_ms, stage.p99_ms, stage.max_ms) == (300.0, 450.0, 900.0)  # worst window


def test_it_is_idempotent_and_picks_up_late_samples(fleet: Fleet) -> None:
    minute = minute_ago(1)
    ingest_minute(fleet, minute)
    telemetry_rollup()
    telemetry_rollup()
    assert NodeRollup.objects.filter(minute=minute).count() == 1
    assert NodeRollup.objects.get(minute=minute).samples == 3
    # An agent resends buffered samples from 40 minutes ago, far outside the usual lookback.
    late = minute_ago(40)
    ingest_minute(fleet, late, batch="late")
    telemetry_rollup()
    assert NodeRollup.objects.get(minute=late).cpu_util_mean == pytest.approx(0.5)
    assert StageRollup.objects.get(minute=late).count == 400


def test_it_drops_exactly_the_expired_partitions(fleet: Fleet) -> None:
    """Raw retention drops every partition wholly older than the cutoff, and no other;
    rollups and batch ids past their retention are deleted as before."""
    now = timezone.now()
    ingest_minute(fleet, minute_ago(1))
    telemetry_rollup()
    hour = dt.timedelta(hours=1)
    cutoff = now - dt.timedelta(hours=48)
    # Rows in the hours around the cutoff, each in its own partition.
    times = [cutoff - 3 * hour, cutoff - 2 * hour, cutoff - dt.timedelta(minutes=1), cutoff + hour]
    with connection.cursor() as cur:
        for t in times:
            partitions.create(cur, "telemetry_nodesample", [partitions.partition_start(t)])
            partitions.create(cur, "telemetry_stagesample", [partitions.partition_start(t)])
    for t in times:
        NodeSample.objects.create(time=t, node_id=fleet.node_a.pk, cpu_util=0.1, mem_util=0.1, load1=0,
                                  in_flight=0, threads=1)
        StageSample.objects.create(time=t, tier_id=fleet.tier.pk, stage="intent", window_s=10, count=1,
                                   p50_ms=1, p95_ms=1, p99_ms=1, max_ms=1)
    for days in (31, 29):
        NodeRollup.objects.create(node_id=fleet.node_a.pk, minute=now - dt.timedelta(days=days), samples=1,
                                  cpu_util_mean=0, cpu_util_max=0, mem_util_mean=0, mem_util_max=0, load1_mean=0,
                                  in_flight_mean=0, in_flight_max=0, threads_max=0)
    IngestBatch.objects.filter(batch_id__startswith="m-node").update(received_at=cutoff - hour)
    with connection.cursor() as cur:
        before = partitions.list_partitions(cur, "telemetry_nodesample")
    expired = sorted(name for name, _lo, hi in before if hi <= cutoff)
    assert expired == sorted({partitions.partition_name("telemetry_nodesample", partitions.partition_start(t))
                              for t in times if partitions.partition_start(t) + hour <= cutoff})
    assert len(expired) >= 2

    deleted = telemetry_retention(now=now)

    assert sorted(deleted["nodesample"]) == expired
    assert len(deleted["stagesample"]) == len(expired)
    with connection.cursor() as cur:
        after = partitions.list_partitions(cur, "telemetry_nodesample")
    assert sorted(name for name, _lo, _hi in after) == sorted(name for name, _lo, _hi in before
                                                               if name not in expired)
    # Only whole partitions go: the row a minute past the cutoff shares a live partition and stays.
    kept = set(NodeSample.objects.values_list("time", flat=True))
    assert kept == {t for t in times if partitions.partition_start(t) + hour > cutoff} | set(
        NodeSample.objects.filter(time__gte=minute_ago(1)).values_list("time", flat=True))
    assert deleted["noderollup"] == 1
    assert NodeRollup.objects.count() == 2  # this minute's and the 29-day-old one
    assert not IngestBatch.objects.filter(batch_id__startswith="m-node").exists()


def test_it_honours_shorter_retention_settings(fleet: Fleet, settings: Any) -> None:
    ingest_minute(fleet, timezone.now().replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=3))
    ingest_minute(fleet, minute_ago(1), batch="now")
    assert NodeSample.objects.count() == 6
    settings.TELEMETRY_RAW_RETENTION_HOURS = 1
    telemetry_retention()
    assert NodeSample.objects.count() == 3  # the partition three hours back went whole


def test_it_never_deletes_a_batch_still_in_the_buffer(fleet: Fleet) -> None:
    token = AgentToken.objects.get(node=fleet.node_a)
    body = {"batch_id": "buffered-1", "node_samples": [node_sample("n-a", minute_ago(1), ["A-0"])]}
    telemetry_receive(identity=identity_of(token), body=msgspec.json.encode(body))
    IngestBatch.objects.update(received_at=timezone.now() - dt.timedelta(hours=50))
    telemetry_retention()
    assert IngestBatch.objects.filter(batch_id="buffered-1", stored_at__isnull=True).exists()


def test_it_rolls_up_only_the_minutes_that_received_rows(fleet: Fleet) -> None:
    ingest_minute(fleet, minute_ago(3))
    ingest_minute(fleet, minute_ago(30), batch="older")
    first = telemetry_rollup()
    assert first["minutes"] == 2 and first["ranges"]["node"] == 2
    assert telemetry_rollup()["minutes"] == 0  # nothing new since
    next_minute = minute_ago(2)
    ingest_minute(fleet, next_minute, batch="next")
    again = telemetry_rollup()
    assert again["minutes"] == 1 and again["rows"]["noderollup"] == 1
    assert NodeRollup.objects.get(minute=next_minute).samples == 3


def test_it_reads_only_the_partitions_a_rollup_needs(fleet: Fleet) -> None:
    start = minute_ago(1)
    with connection.cursor() as cur:
        partitions.create(cur, "telemetry_nodesample",
                          partitions.starts_between(start - dt.timedelta(hours=5), start + dt.timedelta(hours=2)))
        select = _ROLLUPS["node"][0].split("SELECT", 1)[1].split("ON CONFLICT")[0]
        cur.execute("EXPLAIN SELECT" + select, [start, start + dt.timedelta(minutes=1)])
        plan = "\n".join(r[0] for r in cur.fetchall())
    scanned = set(re.findall(r"telemetry_nodesample_p\d{10}", plan))
    assert scanned == {partitions.partition_name("telemetry_nodesample", partitions.partition_start(start))}
