"""Agents: the keys of node agents and the gateway, the command channel to node agents, and the
bootstrap tokens and enrolments through which a new node's agent joins.

Both models were first part of the telemetry app and keep its tables (``db_table``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.agents.choices import AgentKind, CommandState, EnrolmentState
from apps.inventory.models import Node, Rack, Tier


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


class BootstrapToken(models.Model):
    """A shared secret that lets agents without a node key ask to join, within a scope (a tier, racks or
    both), a number of times, until it expires or is revoked. It never fetches a node key: each join
    gets an enrolment secret of its own. Only the SHA-256 of the token is stored; it is shown once."""

    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_prefix = models.CharField(max_length=8, editable=False, help_text="First characters of the token")
    tier = models.ForeignKey(Tier, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                             help_text="Scope: the tier the joining nodes go to")
    racks = models.ManyToManyField(Rack, blank=True, related_name="+",
                                   help_text="Scope: the racks the joining nodes may be placed in (none: any)")
    uses = models.PositiveIntegerField(default=1, help_text="How many joins the token admits")
    used = models.PositiveIntegerField(default=0, editable=False)
    expires_at = models.DateTimeField()
    reason = models.TextField()
    auto_approve = models.BooleanField(
        default=False, help_text="Approve at once a join that passes every hard admission rule and whose "
                                 "location hint names a free rack slot in the scope")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.CheckConstraint(condition=Q(used__lte=models.F("uses")),
                                              name="bootstrap_token_used_within_uses")]

    def __str__(self) -> str:
        return f"bootstrap token {self.key_prefix}…"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and self.used < self.uses and self.expires_at > timezone.now()


class Enrolment(models.Model):
    """A joining node as its agent describes it (host facts, modules, a location hint), staged with the
    admission rules' verdicts until approved (the node and its modules are created, or a re-joining
    node matched to its record) or rejected. The agent proves it is the one that joined with its own
    secret (only its hash is stored) and fetches its node key with it once approved."""

    token = models.ForeignKey(BootstrapToken, on_delete=models.PROTECT, related_name="enrolments")
    state = models.CharField(max_length=16, choices=EnrolmentState.choices, default=EnrolmentState.PENDING)
    hostname = models.CharField(max_length=128)
    machine_id = models.CharField(max_length=64, db_index=True)
    agent_version = models.CharField(max_length=32, blank=True, default="")
    facts = models.JSONField(default=dict, help_text="The host's facts as the agent sent them")
    modules = models.JSONField(default=list, help_text="The modules as the agent discovered them")
    location_hint = models.CharField(max_length=128, blank=True, default="")
    tier = models.ForeignKey(Tier, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    rack = models.ForeignKey(Rack, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                             help_text="Where the node goes: prefilled from the hint, set at approval")
    slot = models.PositiveIntegerField(null=True, blank=True)
    verdicts = models.JSONField(default=dict, help_text="The admission rules' findings: errors (hard) and "
                                                        "warnings (soft)")
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="enrolments",
                             help_text="The node it created, or the node a re-join was matched to")
    rejoin = models.BooleanField(default=False, help_text="Matched to an existing node at join")
    agent_token = models.OneToOneField(AgentToken, on_delete=models.SET_NULL, null=True, blank=True,
                                       related_name="enrolment", help_text="The node key handed to the agent")
    key_delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=150, blank=True, default="")
    decision_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["machine_id"], condition=Q(state=EnrolmentState.PENDING),
                                               name="one_pending_enrolment_per_machine")]
        indexes = [models.Index(fields=["state", "created_at"])]

    def __str__(self) -> str:
        return f"enrolment #{self.pk} {self.hostname} ({self.state})"

    @property
    def hard_errors(self) -> dict[str, list[str]]:
        return dict((self.verdicts or {}).get("errors") or {})
