"""Raw samples (default retention 48 h), partitioned by time.

Raw samples and rollups reference nodes, modules and tiers without database foreign-key constraints
(``db_constraint=False``, ``DO_NOTHING``): COPY does not pay for constraint checks, deleting a node
never cascades through millions of rows in Python, and orphans age out with retention. Selectors join
to the inventory, so orphans never show. A node's ``in_flight`` and a module's metrics are null when
the agent does not know them (contract 2): unknown, never zero."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import BrinIndex
from django.db import models

from apps.inventory.models import Module, Node, Tier
from apps.telemetry.choices import Stage
from apps.telemetry.metrics import MODULE_METRICS, NODE_METRICS, contribute


def _ref(model: type[models.Model], related_name: str) -> models.ForeignKey:  # type: ignore[type-arg]
    return models.ForeignKey(
        model, on_delete=models.DO_NOTHING, db_constraint=False, related_name=related_name, db_index=False
    )


def _next_id(table: str) -> models.Func:
    """The id of a raw sample: from the table's sequence (an AutoField cannot be part of a
    composite primary key)."""
    return models.Func(models.Value(f"{table}_seq"), function="nextval", output_field=models.BigIntegerField())


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
