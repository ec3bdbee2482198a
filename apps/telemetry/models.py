"""Telemetry: ingest batches, raw samples, latest state and per-minute rollups.

A node's ``in_flight`` and a module's metrics are null when the agent does not
know them (contract 2): unknown, never zero.

Raw samples and rollups reference nodes, modules and tiers without database
foreign-key constraints (``db_constraint=False``, ``DO_NOTHING``): COPY does
not pay for constraint checks, deleting a node never cascades through millions
of rows in Python, and orphans age out with retention. Selectors join to the
inventory, so orphans never show.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import BrinIndex
from django.db import models
from django.db.models import Q

from apps.agents.models import AgentToken
from apps.inventory.models import ExternalEndpoint, Module, Node, Tier
from apps.telemetry.choices import Stage
from apps.telemetry.metrics import MODULE_METRICS, NODE_METRICS, contribute


def _ref(model: type[models.Model], related_name: str) -> models.ForeignKey:  # type: ignore[type-arg]
    return models.ForeignKey(
        model, on_delete=models.DO_NOTHING, db_constraint=False, related_name=related_name, db_index=False
    )


class IngestBatch(models.Model):
    """One accepted telemetry batch, and the durable buffer of the ingest path.

    The web process inserts it with the validated rows in ``payload``
    (ON CONFLICT DO NOTHING on scope+batch_id: a resend writes nothing) and
    answers 202 once that commits. The writer moves the payload into the raw
    tables and sets ``stored_at`` in one transaction, so each accepted batch is
    stored exactly once whichever process dies when."""

    scope = models.CharField(max_length=32, help_text="node:<id> or gateway: whose batch ids these are")
    batch_id = models.CharField(max_length=64)
    token = models.ForeignKey(AgentToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="batches")
    received_at = models.DateTimeField()
    min_time = models.DateTimeField(null=True, blank=True, help_text="Earliest sample time in the batch")
    max_time = models.DateTimeField(null=True, blank=True, help_text="Latest sample time in the batch")
    node_samples = models.PositiveIntegerField(default=0)
    module_samples = models.PositiveIntegerField(default=0)
    tier_samples = models.PositiveIntegerField(default=0)
    stage_samples = models.PositiveIntegerField(default=0)
    payload = models.BinaryField(null=True, editable=False,
                                 help_text="Validated rows waiting for the writer (msgpack); empty once stored")
    stored_at = models.DateTimeField(null=True, blank=True, help_text="When the writer stored the rows")

    class Meta:
        ordering = ["-received_at"]
        verbose_name_plural = "ingest batches"
        constraints = [models.UniqueConstraint(fields=["scope", "batch_id"], name="ingest_batch_unique")]
        indexes = [
            models.Index(fields=["received_at"]),
            models.Index(fields=["id"], condition=Q(stored_at__isnull=True), name="ingestbatch_pending"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.batch_id}"

    def accepted(self) -> dict[str, int]:
        return {
            "node_samples": self.node_samples,
            "module_samples": self.module_samples,
            "tier_samples": self.tier_samples,
            "stage_samples": self.stage_samples,
        }


# ---- raw samples (default retention 48 h), partitioned by time --------------------------------


def _next_id(table: str) -> models.Func:
    """The id of a raw sample: from the table's sequence (an AutoField cannot be part of a
    composite primary key)."""
    return models.Func(models.Value(f"{table}_seq"), function="nextval", output_field=models.BigIntegerField())


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


class NodeMetricColumns:
    """The columns ``contribute(model, NODE_METRICS, "sample")`` adds (a sample and the latest state),
    declared here for the type checker only: the declarations in ``metrics.py`` make the fields."""

    cpu_util: float
    mem_util: float
    load1: float
    in_flight: int | None
    threads: int


class ModuleMetricColumns:
    """As ``NodeMetricColumns``, for ``MODULE_METRICS``: utilisation, temperature, power, link widths,
    ECC and error counters."""

    util: float | None
    temp_c: float | None
    power_w: float | None
    link_width: int | None
    link_width_expected: int | None
    ecc_corrected: int | None
    ecc_uncorrected: int | None
    errors: int | None


class NodeSample(NodeMetricColumns, models.Model):
    pk = models.CompositePrimaryKey("id", "time")
    id = models.BigIntegerField(db_default=_next_id("telemetry_nodesample"), editable=False)
    time = models.DateTimeField()
    node = _ref(Node, "+")

    class Meta:
        ordering = ["-time"]
        indexes = [models.Index(fields=["node", "time"]), BrinIndex(fields=["time"], name="nodesample_time_brin")]

    def __str__(self) -> str:
        return f"node {self.node_id} @ {self.time:%Y-%m-%d %H:%M:%S}"


contribute(NodeSample, NODE_METRICS, "sample")


class ModuleSample(ModuleMetricColumns, models.Model):
    pk = models.CompositePrimaryKey("id", "time")
    id = models.BigIntegerField(db_default=_next_id("telemetry_modulesample"), editable=False)
    time = models.DateTimeField()
    module = _ref(Module, "+")
    node = _ref(Node, "+")

    class Meta:
        ordering = ["-time"]
        indexes = [models.Index(fields=["module", "time"]), BrinIndex(fields=["time"], name="modulesample_time_brin")]

    def __str__(self) -> str:
        return f"module {self.module_id} @ {self.time:%Y-%m-%d %H:%M:%S}"


contribute(ModuleSample, MODULE_METRICS, "sample")


class TierSample(models.Model):
    pk = models.CompositePrimaryKey("id", "time")
    id = models.BigIntegerField(db_default=_next_id("telemetry_tiersample"), editable=False)
    time = models.DateTimeField()
    tier = _ref(Tier, "+")
    window_s = models.FloatField(help_text="Seconds the arrivals/completions/tokens were counted over")
    queue_depth = models.IntegerField()
    arrivals = models.IntegerField()
    completions = models.IntegerField()
    input_tokens = models.BigIntegerField()
    output_tokens = models.BigIntegerField()

    class Meta:
        ordering = ["-time"]
        indexes = [models.Index(fields=["tier", "time"]), BrinIndex(fields=["time"], name="tiersample_time_brin")]

    def __str__(self) -> str:
        return f"tier {self.tier_id} @ {self.time:%Y-%m-%d %H:%M:%S}"


class StageSample(models.Model):
    """A latency summary of one stage over one window (count and percentiles)."""

    pk = models.CompositePrimaryKey("id", "time")
    id = models.BigIntegerField(db_default=_next_id("telemetry_stagesample"), editable=False)
    time = models.DateTimeField()
    tier = _ref(Tier, "+")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    window_s = models.FloatField()
    count = models.IntegerField()
    p50_ms = models.FloatField()
    p95_ms = models.FloatField()
    p99_ms = models.FloatField()
    max_ms = models.FloatField()
    node = models.ForeignKey(Node, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, null=True,
                             blank=True, related_name="+",
                             help_text="Set on a per-node breakdown: the requests this node served in the stage "
                                       "(the tier's own summary has none)")
    errors = models.IntegerField(default=0, db_default=0, help_text="Requests of ``count`` that failed in the stage")

    class Meta:
        ordering = ["-time"]
        indexes = [
            models.Index(fields=["tier", "stage", "time"]),
            BrinIndex(fields=["time"], name="stagesample_time_brin"),
        ]

    def __str__(self) -> str:
        return f"tier {self.tier_id} {self.stage} @ {self.time:%Y-%m-%d %H:%M:%S}"


class LatencySample(models.Model):
    """A node's log-bucket histogram of one stage's latencies since its previous sample (contract 3,
    ``apps/telemetry/sketch.py``): ``counts[k]`` latencies fell in bucket ``hist_offset + k``."""

    pk = models.CompositePrimaryKey("id", "time")
    id = models.BigIntegerField(db_default=_next_id("telemetry_latencysample"), editable=False)
    time = models.DateTimeField()
    node = _ref(Node, "+")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    hist_offset = models.IntegerField(help_text="Bucket index of counts[0]")
    counts = ArrayField(models.IntegerField())
    count = models.IntegerField(help_text="Latencies in the histogram (the sum of counts)")

    class Meta:
        ordering = ["-time"]
        indexes = [models.Index(fields=["node", "time"]), BrinIndex(fields=["time"], name="latencysample_time_brin")]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.stage} @ {self.time:%Y-%m-%d %H:%M:%S}"


# ---- latest state (one row per node / module / tier) -------------------------------------


class NodeStatus(NodeMetricColumns, models.Model):
    """The newest sample of a node, and when the node was last heard from."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="status")
    time = models.DateTimeField(help_text="Time of the newest sample")
    last_seen = models.DateTimeField(help_text="When the server last received a sample of this node")

    class Meta:
        verbose_name_plural = "node status"
        indexes = [models.Index(fields=["last_seen"])]

    def __str__(self) -> str:
        return f"{self.node} @ {self.time:%Y-%m-%d %H:%M:%S}"


contribute(NodeStatus, NODE_METRICS, "sample")


class ModuleStatus(ModuleMetricColumns, models.Model):
    module = models.OneToOneField(Module, on_delete=models.CASCADE, primary_key=True, related_name="status")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="module_status")
    time = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        verbose_name_plural = "module status"

    def __str__(self) -> str:
        return f"{self.module} @ {self.time:%Y-%m-%d %H:%M:%S}"


contribute(ModuleStatus, MODULE_METRICS, "sample")


class TierStatus(models.Model):
    """The newest tier sample: the freshest queue depth for the dashboard."""

    tier = models.OneToOneField(Tier, on_delete=models.CASCADE, primary_key=True, related_name="status")
    time = models.DateTimeField()
    last_seen = models.DateTimeField()
    window_s = models.FloatField()
    queue_depth = models.IntegerField()
    arrivals = models.IntegerField()
    completions = models.IntegerField()
    input_tokens = models.BigIntegerField()
    output_tokens = models.BigIntegerField()

    class Meta:
        verbose_name_plural = "tier status"

    def __str__(self) -> str:
        return f"{self.tier} @ {self.time:%Y-%m-%d %H:%M:%S}"


# ---- per-minute rollups (default retention 30 days) --------------------------------------


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
