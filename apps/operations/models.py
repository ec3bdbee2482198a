"""Fleet operations: drains (and cordons), module quarantines, tier scale
requests, autoscaler policies and decisions, and stored Idempotency-Key replies.

Everything an operation needs to resume after a worker dies is a row here; the
node and module states themselves live in the inventory and change only through
``apps.operations.lifecycle`` (compare-and-set on the state column).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from apps.common import cron
from apps.common.errors import CONFLICT
from apps.inventory.models import Module, Node, Rack, Tier
from apps.operations.choices import (
    ACTIVE_DRAIN_STATES,
    AfterDrain,
    DeadlineAction,
    DecisionAction,
    DrainKind,
    DrainState,
    Owner,
    ScaleState,
    WindowActor,
)


class ScaleRequest(models.Model):
    """Move a tier to ``desired`` active nodes. Scale-up activates standby nodes at
    once; scale-down drains the nodes it picked and completes when each is back in
    standby, empty. At most one runs per tier."""

    tier = models.ForeignKey(Tier, on_delete=models.CASCADE, related_name="scale_requests")
    desired = models.PositiveIntegerField()
    from_active = models.PositiveIntegerField(help_text="Active nodes when the request was made")
    owner = models.CharField(max_length=16, choices=Owner.choices, default=Owner.OPERATOR)
    state = models.CharField(max_length=16, choices=ScaleState.choices, default=ScaleState.RUNNING)
    reason = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    activated = models.JSONField(default=list, blank=True, help_text="Hostnames activated from standby")
    reclaimed = models.JSONField(default=list, blank=True, help_text="Hostnames taken back from a scale-down drain")
    note = models.TextField(blank=True, default="", help_text="Shortfalls and skipped nodes, in words")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tier"], condition=Q(state=ScaleState.RUNNING),
                                    name="one_running_scale_per_tier"),
        ]

    def __str__(self) -> str:
        return f"scale #{self.pk} {self.tier} to {self.desired} ({self.state})"


class Drain(models.Model):
    """A hold on a node: a cordon (no new work) or a drain (cordon, then wait for
    zero in-flight requests). Active while cordoned, draining or drained; one
    active hold per node; only its owner (or an operator override, audited)
    releases it."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="drains")
    kind = models.CharField(max_length=8, choices=DrainKind.choices, default=DrainKind.DRAIN)
    owner = models.CharField(max_length=16, choices=Owner.choices, default=Owner.OPERATOR)
    state = models.CharField(max_length=16, choices=DrainState.choices, default=DrainState.DRAINING)
    reason = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(help_text="When the node stopped taking new work for this hold")
    deadline = models.DateTimeField(null=True, blank=True, help_text="When the deadline action applies")
    deadline_action = models.CharField(max_length=8, choices=DeadlineAction.choices, default=DeadlineAction.ALERT)
    resume_after = models.DateTimeField(null=True, blank=True, help_text="Uncordon automatically at this time")
    after = models.CharField(max_length=16, choices=AfterDrain.choices, default=AfterDrain.STAY)
    previous_state = models.CharField(max_length=16, blank=True, default="", help_text="Node state before the hold")
    scale_request = models.ForeignKey(ScaleRequest, on_delete=models.SET_NULL, null=True, blank=True,
                                      related_name="drains")
    drained_at = models.DateTimeField(null=True, blank=True)
    forced = models.BooleanField(default=False, help_text="Marked drained by the deadline with work in flight")
    in_flight_at_force = models.IntegerField(null=True, blank=True)
    alerted_at = models.DateTimeField(null=True, blank=True, help_text="When the deadline passed and alerted")
    released_at = models.DateTimeField(null=True, blank=True)
    released_by_name = models.CharField(max_length=150, blank=True, default="")
    release_reason = models.TextField(blank=True, default="")
    overridden = models.BooleanField(default=False, help_text="Released by an operator over another owner")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["node"], condition=Q(state__in=ACTIVE_DRAIN_STATES),
                                    name="one_active_drain_per_node"),
        ]
        indexes = [models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"{self.kind} of {self.node} by {self.owner} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_DRAIN_STATES


class Quarantine(models.Model):
    """One module taken out of service while its node keeps serving on the others."""

    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="quarantines")
    owner = models.CharField(max_length=16, choices=Owner.choices, default=Owner.OPERATOR)
    reason = models.TextField()
    previous_state = models.CharField(max_length=16)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)
    released_by_name = models.CharField(max_length=150, blank=True, default="")
    release_reason = models.TextField(blank=True, default="")
    overridden = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["module"], condition=Q(released_at__isnull=True),
                                    name="one_active_quarantine_per_module"),
        ]

    def __str__(self) -> str:
        return f"quarantine of {self.module} by {self.owner}"


class AutoscalerPolicy(models.Model):
    """Per tier: scale on queue depth per active node (the HPA formula), with the
    HPA's tolerance and stabilisation windows, a step limit, a cooldown after
    each scale action before any scale-down, and min/max bounds."""

    tier = models.OneToOneField(Tier, on_delete=models.CASCADE, related_name="autoscaler_policy")
    enabled = models.BooleanField(default=True)
    dry_run = models.BooleanField(default=False, help_text="Record decisions without scaling")
    target_queue_per_node = models.FloatField(validators=[MinValueValidator(0.01)],
                                              help_text="Queue depth per active node the tier should hold")
    tolerance = models.FloatField(default=0.1, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
                                  help_text="No change while |observed/target - 1| is within this")
    scale_up_window_s = models.PositiveIntegerField(default=0, help_text="Scale up to the lowest recommendation "
                                                    "of this window")
    scale_down_window_s = models.PositiveIntegerField(default=300, help_text="Scale down to the highest "
                                                      "recommendation of this window")
    max_step = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)],
                                           help_text="Most nodes added or removed by one decision")
    scale_up_percent = models.PositiveIntegerField(default=100, help_text="A scale-up adds at most the larger of "
                                                   "max_step and this share of the active count")
    scale_down_percent = models.PositiveIntegerField(default=25, validators=[MinValueValidator(1),
                                                                             MaxValueValidator(100)],
                                                     help_text="A scale-down removes at most this share of the "
                                                               "active count (at least one node)")
    scale_down_headroom = models.BooleanField(default=True, help_text="Scale down only as far as the queue per "
                                              "node, growing with the square of the load, stays within tolerance")
    cooldown_s = models.PositiveIntegerField(default=60, help_text="No scale-down until this long after a scale action")
    min_nodes = models.PositiveIntegerField(null=True, blank=True, help_text="Defaults to the tier's minimum")
    max_nodes = models.PositiveIntegerField(null=True, blank=True, help_text="Defaults to the tier's maximum")
    drain_deadline_s = models.PositiveIntegerField(default=900, help_text="Deadline of scale-down drains "
                                                   "(they stay draining and alert; never forced)")
    last_scaled_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tier__level"]
        verbose_name_plural = "autoscaler policies"

    def __str__(self) -> str:
        return f"autoscaler of {self.tier}"

    def clean(self) -> None:
        if self.min_nodes is not None and self.max_nodes is not None and self.min_nodes > self.max_nodes:
            raise ValidationError({"min_nodes": f"minimum {self.min_nodes} is above the maximum {self.max_nodes}"})
        if self.tier_id:
            tier = self.tier
            if self.min_nodes is not None and self.min_nodes < tier.min_active_nodes:
                raise ValidationError({"min_nodes": f"below the tier's minimum of {tier.min_active_nodes}"})
            if self.max_nodes is not None and self.max_nodes > tier.max_active_nodes:
                raise ValidationError({"max_nodes": f"above the tier's maximum of {tier.max_active_nodes}"})

    def bounds(self) -> tuple[int, int]:
        lo = self.min_nodes if self.min_nodes is not None else self.tier.min_active_nodes
        hi = self.max_nodes if self.max_nodes is not None else self.tier.max_active_nodes
        return lo, hi


class AutoscalerDecision(models.Model):
    """An autoscaler decision: its inputs, the formula's result, the stabilised result, what was
    done and why. Evaluations that come to the same decision as the one before (nothing to do,
    the same numbers) extend its row (``evaluations``, ``until``, the latest inputs) instead of
    adding one: a quiet tier gets a row when its decision changes, not one every 10 s."""

    tier = models.ForeignKey(Tier, on_delete=models.CASCADE, related_name="autoscaler_decisions")
    time = models.DateTimeField(db_index=True)
    current = models.PositiveIntegerField(help_text="Active nodes")
    queue_depth = models.FloatField(null=True, blank=True)
    target_queue_per_node = models.FloatField()
    raw_desired = models.IntegerField(null=True, blank=True, help_text="ceil(current x observed / target)")
    recommendation = models.IntegerField(null=True, blank=True, help_text="Formula result within min/max")
    desired = models.IntegerField(help_text="After stabilisation, step limit and cooldown")
    action = models.CharField(max_length=16, choices=DecisionAction.choices)
    dry_run = models.BooleanField(default=False)
    explanation = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)
    scale_request = models.ForeignKey(ScaleRequest, on_delete=models.SET_NULL, null=True, blank=True,
                                      related_name="decisions")
    evaluations = models.PositiveIntegerField(default=1, db_default=1,
                                              help_text="Evaluations in a row that came to this decision")
    until = models.DateTimeField(null=True, blank=True,
                                 help_text="The latest evaluation that came to it (null: only the one at time)")
    window = models.CharField(max_length=1000, blank=True, default="", db_default="",
                              help_text="The change window or freeze that governs the tier's scale-down, in words "
                                        "(empty: none governs it)")

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [models.Index(fields=["tier", "time"])]

    def __str__(self) -> str:
        return f"{self.tier} @ {self.time:%Y-%m-%d %H:%M:%S}: {self.action}"


class ChangeWindow(models.Model):
    """When the actors it names may change things in its scope: it opens at each firing of its cron
    expression (in its time zone) and stays open ``duration_minutes``. Windows are opt-in: an actor
    no window governs in a scope is unrestricted there (``apps.operations.windows``)."""

    name = models.CharField(max_length=100, unique=True)
    cron = models.CharField(max_length=200, help_text="When it opens: minute hour day-of-month month day-of-week, "
                                                      "e.g. '0 22 * * mon-fri'")
    duration_minutes = models.PositiveIntegerField(validators=[MinValueValidator(1)],
                                                   help_text="How long it stays open after each opening")
    time_zone = models.CharField(max_length=64, default="UTC", help_text="The zone the cron expression reads in "
                                                                          "(an IANA name)")
    tiers = models.ManyToManyField(Tier, blank=True, related_name="+", help_text="None (and no racks): the fleet")
    racks = models.ManyToManyField(Rack, blank=True, related_name="+", help_text="None (and no tiers): the fleet")
    actors = models.JSONField(default=list, blank=True, help_text="What it governs: " + ", ".join(WindowActor.values))
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"window {self.name!r} ({self.cron}, {self.duration_minutes} min, {self.time_zone})"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        try:
            cron.parse(self.cron)
        except cron.CronError as exc:
            errors["cron"] = str(exc)
        try:
            cron.zone(self.time_zone)
        except cron.CronError as exc:
            errors["time_zone"] = str(exc)
        if not isinstance(self.actors, list) or not self.actors:
            errors["actors"] = f"name at least one of: {', '.join(WindowActor.values)}"
        else:
            unknown = [a for a in self.actors if a not in WindowActor.values]
            if unknown:
                errors["actors"] = f"unknown {', '.join(map(str, unknown))}; one of: {', '.join(WindowActor.values)}"
            elif len(set(self.actors)) != len(self.actors):
                errors["actors"] = "an actor is named twice"
        if errors:
            raise ValidationError(errors)


class Freeze(models.Model):
    """From ``starts_at`` to ``ends_at`` every automated actor in its scope only observes (findings still
    open, notifications still go; a critical health finding keeps its exception), whatever the windows
    say; an operator's own action in its scope needs a reason and is audited as done during it."""

    reason = models.TextField(help_text="Why changes stop (shown wherever an action is held)")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    tiers = models.ManyToManyField(Tier, blank=True, related_name="+", help_text="None (and no racks): the fleet")
    racks = models.ManyToManyField(Rack, blank=True, related_name="+", help_text="None (and no tiers): the fleet")
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["starts_at", "id"]
        constraints = [models.CheckConstraint(condition=Q(ends_at__gt=models.F("starts_at")),
                                              name="freeze_ends_after_it_starts")]

    def __str__(self) -> str:
        return f"freeze {self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%Y-%m-%d %H:%M} UTC"

    def clean(self) -> None:
        if not self.reason.strip():
            raise ValidationError({"reason": "say why changes stop"})
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": ValidationError(  # a rule between two values: a 409 (CONFLICT)
                f"{self.ends_at:%Y-%m-%d %H:%M} is not after the start {self.starts_at:%Y-%m-%d %H:%M}",
                code=CONFLICT)})


class BudgetHeldBack(models.Model):
    """An automated actor the remediation budget held back on a tier (``apps.operations.budget``): what it
    wanted, the limit that refused it and the numbers. One per (actor, tier), renewed while it stays
    held back, deleted when the actor asks again and is granted; health's ``budget_held_back``
    finding reads it."""

    actor = models.CharField(max_length=16, choices=WindowActor.choices)
    tier = models.ForeignKey(Tier, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, help_text="nodes or modules")
    wanted = models.CharField(max_length=500, help_text="What the actor would have done")
    asked = models.PositiveIntegerField()
    granted = models.PositiveIntegerField()
    limit = models.CharField(max_length=16, help_text="max_unavailable, rate or fleet")
    why = models.TextField()
    numbers = models.JSONField(default=dict, blank=True)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()
    times = models.PositiveIntegerField(default=1, help_text="Times asked and held back since first_at")

    class Meta:
        ordering = ["-last_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["actor", "tier"], name="one_held_back_per_actor_tier")]

    def __str__(self) -> str:
        return f"{self.actor} held back on {self.tier}: {self.wanted}"


class IdempotencyRecord(models.Model):
    """The first reply to a request carrying an ``Idempotency-Key``; a replay of
    the key by the same user gets the same reply."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=128)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=300)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_user_key_unique")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key}]"
