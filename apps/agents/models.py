"""Agents: the keys of node agents and the gateway, and the command channel to node agents.

Both models were first part of the telemetry app and keep its tables (``db_table``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.agents.choices import AgentKind, CommandState
from apps.inventory.models import Node


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
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Refused from this time on (the old key of a rotation, after its overlap)")
    rotated_to = models.OneToOneField("self", on_delete=models.SET_NULL, null=True, blank=True,
                                      related_name="rotated_from", help_text="The key that replaced this one")

    class Meta:
        db_table = "telemetry_agenttoken"
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
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())

    @property
    def scope(self) -> str:
        """Whose batch ids these are: one node, or the gateway."""
        return f"node:{self.node_id}" if self.kind == AgentKind.NODE else "gateway"


class NodeCommand(models.Model):
    """Work for a node agent (drain, install, run vectors, diagnose...). The server
    accepts any kind (``CommandKind`` lists the ones it sends); an agent that does not
    know one acks it "unknown". An agent working on a long one acks "in_progress"
    (again and again) before its answer."""

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
    progress_at = models.DateTimeField(
        null=True, blank=True, help_text="The agent's latest in_progress ack: it is still working on it"
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)
    audit_event = models.ForeignKey(
        "audit.AuditEvent", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        db_table = "telemetry_nodecommand"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["node", "state", "created_at"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} for {self.node} ({self.state})"
