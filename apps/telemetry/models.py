"""Telemetry: agent tokens, ingest batches, raw samples, latest state,
per-minute rollups and the command channel to node agents.

Raw samples and rollups reference nodes, modules and tiers without database
foreign-key constraints (``db_constraint=False``, ``DO_NOTHING``): COPY does
not pay for constraint checks, deleting a node never cascades through millions
of rows in Python, and orphans age out with retention. Selectors join to the
inventory, so orphans never show.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import BrinIndex
from django.db import models
from django.db.models import Q

from apps.inventory.models import Module, Node, Tier
from apps.telemetry.choices import AgentKind, CommandState, Stage


def _ref(model: type[models.Model], related_name: str) -> models.ForeignKey:  # type: ignore[type-arg]
    return models.ForeignKey(
        model, on_delete=models.DO_NOTHING, db_constraint=False, related_name=related_name, db_index=False
    )


class AgentToken(models.Model):
    """A credential of a node agent (one node) or of the gateway (tiers and stages).
    Only the SHA-256 of the key is stored; the key is shown once at issue."""

    kind = models.CharField(max_length=16, choices=AgentKind.choices)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="agent_tokens")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_prefix = models.CharField(
        max_length=8, editable=False, help_text="First characters of the key, to tell keys apart"
    )
    note = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["kind", "node__hostname", "-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind=AgentKind.NODE) & Q(node__isnull=False))
                | (Q(kind=AgentKind.GATEWAY) & Q(node__isnull=True)),
                name="agent_token_node_iff_node_kind",
            )
        ]

    def __str__(self) -> str:
        who = self.node.hostname if self.node_id and self.node else "gateway"
        return f"{self.get_kind_display()} {who} ({self.key_prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def scope(self) -> str:
        """Whose batch ids these are: one node, or the gateway."""
        return f"node:{self.node_id}" if self.kind == AgentKind.NODE else "gateway"


class IngestBatch(models.Model):
    """One accepted telemetry batch. Inserted first in the ingest transaction
    (ON CONFLICT DO NOTHING on scope+batch_id): a resend writes nothing."""

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

    class Meta:
        ordering = ["-received_at"]
        verbose_name_plural = "ingest batches"
        constraints = [models.UniqueConstraint(fields=["scope", "batch_id"], name="ingest_batch_unique")]
        indexes = [models.Index(fields=["received_at"])]

    def __str__(self) -> str:
        return f"{self.scope} {self.batch_id}"

    def accepted(self) -> dict[str, int]:
        return {
            "node_samples": self.node_samples,
            "module_samples": self.module_samples,
            "tier_samples": self.tier_samples,
            "stage_samples": self.stage_samples,
        }


# ---- raw samples (default retention 48 h) -------------------------------------------------


class NodeSample(models.Model):
    time = models.DateTimeField()
    node = _ref(Node, "+")
    cpu_util = models.FloatField()
    mem_util = models.FloatField()
    load1 = models.FloatField()
    in_flight = models.IntegerField()
    threads = models.IntegerField()

    class Meta:
        ordering = ["-time"]
        indexes = [models.Index(fields=["node", "time"]), BrinIndex(fields=["time"], name="nodesample_time_brin")]

    def __str__(self) -> str:
        return f"node {self.node_id} @ {self.time:%Y-%m-%d %H:%M:%S}"


class ModuleSample(models.Model):
    time = models.DateTimeField()
    module = _ref(Module, "+")
    node = _ref(Node, "+")
    util = models.FloatField()
    temp_c = models.FloatField()
    power_w = models.FloatField()
    link_width = models.SmallIntegerField()
    link_width_expected = models.SmallIntegerField()
    ecc_corrected = models.BigIntegerField()
    ecc_uncorrected = models.BigIntegerField()
    errors = models.BigIntegerField()

    class Meta:
        ordering = ["-time"]
        indexes = [models.Index(fields=["module", "time"]), BrinIndex(fields=["time"], name="modulesample_time_brin")]

    def __str__(self) -> str:
        return f"module {self.module_id} @ {self.time:%Y-%m-%d %H:%M:%S}"


class TierSample(models.Model):
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

    time = models.DateTimeField()
    tier = _ref(Tier, "+")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    window_s = models.FloatField()
    count = models.IntegerField()
    p50_ms = models.FloatField()
    p95_ms = models.FloatField()
    p99_ms = models.FloatField()
    max_ms = models.FloatField()

    class Meta:
        ordering = ["-time"]
        indexes = [
            models.Index(fields=["tier", "stage", "time"]),
            BrinIndex(fields=["time"], name="stagesample_time_brin"),
        ]

    def __str__(self) -> str:
        return f"tier {self.tier_id} {self.stage} @ {self.time:%Y-%m-%d %H:%M:%S}"


# ---- latest state (one row per node / module / tier) -------------------------------------


class NodeStatus(models.Model):
    """The newest sample of a node, and when the node was last heard from."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="status")
    time = models.DateTimeField(help_text="Time of the newest sample")
    last_seen = models.DateTimeField(help_text="When the server last received a sample of this node")
    cpu_util = models.FloatField()
    mem_util = models.FloatField()
    load1 = models.FloatField()
    in_flight = models.IntegerField()
    threads = models.IntegerField()

    class Meta:
        verbose_name_plural = "node status"
        indexes = [models.Index(fields=["last_seen"])]

    def __str__(self) -> str:
        return f"{self.node} @ {self.time:%Y-%m-%d %H:%M:%S}"


class ModuleStatus(models.Model):
    module = models.OneToOneField(Module, on_delete=models.CASCADE, primary_key=True, related_name="status")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="module_status")
    time = models.DateTimeField()
    last_seen = models.DateTimeField()
    util = models.FloatField()
    temp_c = models.FloatField()
    power_w = models.FloatField()
    link_width = models.SmallIntegerField()
    link_width_expected = models.SmallIntegerField()
    ecc_corrected = models.BigIntegerField()
    ecc_uncorrected = models.BigIntegerField()
    errors = models.BigIntegerField()

    class Meta:
        verbose_name_plural = "module status"

    def __str__(self) -> str:
        return f"{self.module} @ {self.time:%Y-%m-%d %H:%M:%S}"


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


class NodeRollup(models.Model):
    node = _ref(Node, "+")
    minute = models.DateTimeField()
    samples = models.IntegerField()
    cpu_util_mean = models.FloatField()
    cpu_util_max = models.FloatField()
    mem_util_mean = models.FloatField()
    mem_util_max = models.FloatField()
    load1_mean = models.FloatField()
    in_flight_mean = models.FloatField()
    in_flight_max = models.IntegerField()
    threads_max = models.IntegerField()

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["node", "minute"], name="noderollup_unique")]
        indexes = [BrinIndex(fields=["minute"], name="noderollup_minute_brin")]

    def __str__(self) -> str:
        return f"node {self.node_id} {self.minute:%Y-%m-%d %H:%M}"


class ModuleRollup(models.Model):
    module = _ref(Module, "+")
    node = _ref(Node, "+")
    minute = models.DateTimeField()
    samples = models.IntegerField()
    util_mean = models.FloatField()
    util_max = models.FloatField()
    temp_c_mean = models.FloatField()
    temp_c_max = models.FloatField()
    power_w_mean = models.FloatField()
    power_w_max = models.FloatField()
    link_width_min = models.SmallIntegerField()
    link_width_expected = models.SmallIntegerField()
    ecc_corrected_max = models.BigIntegerField()
    ecc_uncorrected_max = models.BigIntegerField()
    errors_max = models.BigIntegerField()

    class Meta:
        ordering = ["-minute"]
        constraints = [models.UniqueConstraint(fields=["module", "minute"], name="modulerollup_unique")]
        indexes = [
            models.Index(fields=["node", "minute"]),
            BrinIndex(fields=["minute"], name="modulerollup_minute_brin"),
        ]

    def __str__(self) -> str:
        return f"module {self.module_id} {self.minute:%Y-%m-%d %H:%M}"


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


# ---- command channel ----------------------------------------------------------------------


class NodeCommand(models.Model):
    """Work for a node agent (drain, install, run vectors, diagnose...). The server
    accepts any kind; an agent that does not know one acks it "unknown"."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="commands")
    kind = models.CharField(max_length=64)
    args = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=CommandState.choices, default=CommandState.PENDING)
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Not delivered after this time")
    delivered_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)
    audit_event = models.ForeignKey(
        "audit.AuditEvent", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["node", "state", "created_at"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} for {self.node} ({self.state})"
