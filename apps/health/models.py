"""Health checks' settings, each subject's recent evaluations, findings and silences.

The check functions and their defaults are in ``checks.py``; a ``HealthCheck`` row
holds what operators changed (parameters, policy, hysteresis). The sweep keeps one
``CheckState`` per (check, subject): its last M outcomes as letters, from which a
``Finding`` is raised (N of M fail) and resolved (K passes in a row)."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.health.choices import ACTIVE_FINDING_STATES, FindingState, Policy, Severity, Status, SubjectKind
from apps.inventory.models import Module, Node, Tier


class HealthCheck(models.Model):
    name = models.CharField(max_length=32, unique=True)
    params = models.JSONField(default=dict, blank=True, help_text="Parameters that differ from the defaults")
    policy = models.CharField(max_length=8, choices=Policy.choices, default=Policy.ALERT)
    enabled = models.BooleanField(default=True)
    raise_n = models.PositiveSmallIntegerField(default=3, validators=[MinValueValidator(1), MaxValueValidator(20)],
                                               help_text="Raise a finding when N of the last M evaluations fail")
    raise_m = models.PositiveSmallIntegerField(default=5, validators=[MinValueValidator(1), MaxValueValidator(20)])
    clear_k = models.PositiveSmallIntegerField(default=5, validators=[MinValueValidator(1), MaxValueValidator(100)],
                                               help_text="Resolve after K passing evaluations in a row")
    updated_at = models.DateTimeField(auto_now=True)
    updated_by_name = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CheckState(models.Model):
    """The recent evaluations of one check on one subject (``node:12``, ``module:40``, ``tier:2``)."""

    check_name = models.CharField(max_length=32)
    subject_key = models.CharField(max_length=64)
    history = models.CharField(max_length=20, default="", help_text="Last outcomes, newest last: p w f u")
    pass_streak = models.PositiveIntegerField(default=0)
    unknown_streak = models.PositiveIntegerField(default=0)
    last_status = models.CharField(max_length=8, choices=Status.choices, default=Status.UNKNOWN)
    last_summary = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["check_name", "subject_key"], name="checkstate_unique")]

    def __str__(self) -> str:
        return f"{self.check_name} {self.subject_key}: {self.history}"


class Finding(models.Model):
    check_name = models.CharField(max_length=32)
    subject_kind = models.CharField(max_length=8, choices=SubjectKind.choices)
    subject_key = models.CharField(max_length=64)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="findings")
    module = models.ForeignKey(Module, on_delete=models.CASCADE, null=True, blank=True, related_name="findings")
    tier = models.ForeignKey(Tier, on_delete=models.CASCADE, null=True, blank=True, related_name="findings")
    state = models.CharField(max_length=16, choices=FindingState.choices, default=FindingState.OPEN)
    severity = models.CharField(max_length=8, choices=Severity.choices)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.FAIL,
                              help_text="fail: the check failed; unknown: it could not evaluate")
    summary = models.TextField()
    evidence = models.JSONField(default=dict, blank=True, help_text="The numbers of the worst evaluation")
    worst_score = models.FloatField(default=0)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by_name = models.CharField(max_length=150, blank=True, default="")
    acknowledge_reason = models.TextField(blank=True, default="")
    reopened = models.PositiveIntegerField(default=0, help_text="Times it came back soon after resolving")
    flapping = models.BooleanField(default=False)
    action = models.JSONField(default=dict, blank=True,
                              help_text="What health did about it, or would have done and why not")
    holds = models.BooleanField(default=False, help_text="Health holds the node or module because of it")
    release_after = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["check_name", "subject_key"], condition=Q(state__in=ACTIVE_FINDING_STATES),
                                    name="one_active_finding_per_check_subject"),
        ]
        indexes = [models.Index(fields=["state", "severity"]), models.Index(fields=["node", "state"]),
                   models.Index(fields=["check_name", "subject_key", "-resolved_at"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.check_name} on {self.subject_key} ({self.state})"


class Silence(models.Model):
    """Mute a check (or every check) on a node, a tier or the fleet until ``expires_at``."""

    check_name = models.CharField(max_length=32, blank=True, default="", help_text="Empty: every check")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    tier = models.ForeignKey(Tier, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    reason = models.TextField()
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by_name = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"silence {self.check_name or 'all'} on {self.node or self.tier or 'fleet'} until {self.expires_at}"


class Receiver(models.Model):
    """Where notifications of findings go: a webhook (Alertmanager's payload, with a Slack-compatible
    ``text``) or an email address, for findings of at least ``min_severity`` (of one tier, or all)."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Webhook (Alertmanager payload)"
        EMAIL = "email", "Email"

    name = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    url = models.URLField(max_length=500, blank=True, default="")
    email = models.EmailField(blank=True, default="")
    min_severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.WARNING)
    tier = models.ForeignKey(Tier, on_delete=models.CASCADE, null=True, blank=True, related_name="+",
                             help_text="Only findings of this tier (empty: every tier)")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class Delivery(models.Model):
    """One notification of one finding's event to one receiver: the delivery log."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed (retries exhausted)"

    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="deliveries")
    receiver = models.ForeignKey(Receiver, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=10, help_text="open, escalate or resolve")
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event} of finding {self.finding_id} to {self.receiver} ({self.state})"
