"""Per-minute rollups (default retention 30 days), the minutes due for one, and the snapshot's window
figures computed with them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import BrinIndex
from django.db import models

from apps.inventory.models import ExternalEndpoint, Module, Node, Tier
from apps.telemetry.choices import Stage
from apps.telemetry.metrics import MODULE_METRICS, NODE_METRICS, contribute
from apps.telemetry.models.samples import _ref


class RollupDue(models.Model):
    """A minute of one kind of sample that received rows since its rollup was last
    computed. The writer adds them (or bumps ``version``) with the rows; the rollup
    task recomputes those minutes and deletes the notes it saw, unless bumped since."""

    kind = models.CharField(max_length=8)
    minute = models.DateTimeField()
    version = models.BigIntegerField(db_default=1)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "minute"], name="rollupdue_unique")]

    def __str__(self) -> str:
        return f"{self.kind} {self.minute:%Y-%m-%d %H:%M}"


class WindowSummary(models.Model):
    """The fleet snapshot's window figures per tier over the default window, computed by the rollup
    run from the rollups it has just written (the percentiles over every node- and module-minute of
    the window take a few hundred milliseconds at 10,000 nodes: once a minute, not per request).
    The snapshot reads it while it is fresh, and computes the figures itself otherwise."""

    minutes = models.PositiveIntegerField(unique=True)
    since = models.DateTimeField(help_text="Start of the window (its end: computed_at)")
    computed_at = models.DateTimeField()
    tiers = models.JSONField(help_text="{tier id: window figures}")

    class Meta:
        verbose_name_plural = "window summaries"

    def __str__(self) -> str:
        return f"{self.minutes} min window @ {self.computed_at:%Y-%m-%d %H:%M:%S}"


class NodeRollup(models.Model):
    node = _ref(Node, "+")
    minute = models.DateTimeField()
    samples = models.IntegerField()
    # {metric}_{aggregate} of each node metric: from metrics.NODE_METRICS
    if TYPE_CHECKING:  # the columns contribute() adds, for the type checker only
        cpu_util_mean: float
        cpu_util_max: float
        mem_util_mean: float
        mem_util_max: float
        load1_mean: float
        in_flight_mean: float | None
        in_flight_max: int | None
        threads_max: int

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["node", "minute"], name="noderollup_unique")]
        indexes = [BrinIndex(fields=["minute"], name="noderollup_minute_brin")]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.minute:%Y-%m-%d %H:%M}"


contribute(NodeRollup, NODE_METRICS, "rollup")


class ModuleRollup(models.Model):
    module = _ref(Module, "+")
    node = _ref(Node, "+")
    minute = models.DateTimeField()
    samples = models.IntegerField()
    # {metric}_{aggregate} of each module metric: from metrics.MODULE_METRICS
    if TYPE_CHECKING:  # the columns contribute() adds, for the type checker only
        util_mean: float | None
        util_max: float | None
        temp_c_mean: float | None
        temp_c_max: float | None
        power_w_mean: float | None
        power_w_max: float | None
        link_width_min: int | None
        link_width_expected: int | None
        ecc_corrected_max: int | None
        ecc_uncorrected_max: int | None
        errors_max: int | None

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["module", "minute"], name="modulerollup_unique")]
        indexes = [
            models.Index(fields=["node", "minute"]),
            BrinIndex(fields=["minute"], name="modulerollup_minute_brin"),
        ]

    def __str__(self) -> str:
        return f"module {self.module_id} {self.minute:%Y-%m-%d %H:%M}"


contribute(ModuleRollup, MODULE_METRICS, "rollup")


class TierRollup(models.Model):
    tier = _ref(Tier, "+")
    minute = models.DateTimeField()
    samples = models.IntegerField()
    window_s = models.FloatField(help_text="Seconds covered by the samples of this minute")
    queue_depth_mean = models.FloatField()
    queue_depth_max = models.IntegerField()
    queue_depth_last = models.IntegerField()
    arrivals = models.BigIntegerField()
    completions = models.BigIntegerField()
    input_tokens = models.BigIntegerField()
    output_tokens = models.BigIntegerField()

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["tier", "minute"], name="tierrollup_unique")]

    def __str__(self) -> str:
        return f"tier {self.tier_id} {self.minute:%Y-%m-%d %H:%M}"


class StageRollup(models.Model):
    """Per minute: count summed; p50 the count-weighted mean of the windows' p50;
    p95, p99 and max the largest of the windows' values (an upper bound)."""

    tier = _ref(Tier, "+")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    minute = models.DateTimeField()
    count = models.BigIntegerField()
    p50_ms = models.FloatField()
    p95_ms = models.FloatField()
    p99_ms = models.FloatField()
    max_ms = models.FloatField()

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["tier", "stage", "minute"], name="stagerollup_unique")]

    def __str__(self) -> str:
        return f"tier {self.tier_id} {self.stage} {self.minute:%Y-%m-%d %H:%M}"


class StageNodeRollup(models.Model):
    """Per node, stage and minute, from the gateway's per-node breakdown: count and errors summed;
    p50 the count-weighted mean of the windows' p50; p95, p99 and max the largest (as StageRollup).
    What a rollout compares between the nodes it upgraded and the ones it has not reached yet."""

    node = _ref(Node, "+")
    tier = _ref(Tier, "+")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    minute = models.DateTimeField()
    count = models.BigIntegerField()
    errors = models.BigIntegerField(default=0)
    p50_ms = models.FloatField()
    p95_ms = models.FloatField()
    p99_ms = models.FloatField()
    max_ms = models.FloatField()

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["node", "stage", "minute"], name="stagenoderollup_unique")]
        indexes = [models.Index(fields=["minute"], name="stagenoderollup_minute")]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.stage} {self.minute:%Y-%m-%d %H:%M}"


class EndpointRollup(models.Model):
    """Per minute, the gateway's figures of one external endpoint (tier samples' ``endpoints``,
    contract 3), merged as the batches are stored (no raw table): requests, errors, tokens and the
    seconds covered summed, p95 the largest of the windows' (an upper bound, as stage rollups merge
    theirs; null when no request completed in the minute)."""

    endpoint = _ref(ExternalEndpoint, "+")
    minute = models.DateTimeField()
    samples = models.IntegerField()
    window_s = models.FloatField(help_text="Seconds covered by the samples of this minute")
    requests = models.BigIntegerField()
    errors = models.BigIntegerField()
    tokens = models.BigIntegerField(help_text="Tokens counted against the endpoint's quota (input + output)")
    p95_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["endpoint", "minute"], name="endpointrollup_unique")]
        indexes = [BrinIndex(fields=["minute"], name="endpointrollup_minute_brin")]

    def __str__(self) -> str:
        return f"endpoint {self.endpoint_id} {self.minute:%Y-%m-%d %H:%M}"


class NodeLatencyRollup(models.Model):
    """A node's stage latency per minute: its histograms of the minute merged (bucket counts added).
    Sparse: ``counts[k]`` latencies in bucket ``buckets[k]``, buckets ascending."""

    node = _ref(Node, "+")
    tier = _ref(Tier, "+")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    minute = models.DateTimeField()
    count = models.BigIntegerField()
    buckets = ArrayField(models.IntegerField())
    counts = ArrayField(models.BigIntegerField())

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["node", "stage", "minute"], name="nodelatencyrollup_unique")]
        indexes = [BrinIndex(fields=["minute"], name="nodelatencyrollup_minute_brin")]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.stage} {self.minute:%Y-%m-%d %H:%M}"


class TierLatencyRollup(models.Model):
    """A tier's stage latency per minute: the histograms of its nodes' minute merged. The fleet's
    is the sum of the tiers'."""

    tier = _ref(Tier, "+")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    minute = models.DateTimeField()
    count = models.BigIntegerField()
    buckets = ArrayField(models.IntegerField())
    counts = ArrayField(models.BigIntegerField())

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["tier", "stage", "minute"], name="tierlatencyrollup_unique")]
        indexes = [models.Index(fields=["minute"], name="tierlatencyrollup_minute")]

    def __str__(self) -> str:
        return f"tier {self.tier_id} {self.stage} {self.minute:%Y-%m-%d %H:%M}"
