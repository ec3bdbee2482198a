"""An accepted batch: the durable buffer of the ingest path."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from apps.agents.models import AgentToken


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
