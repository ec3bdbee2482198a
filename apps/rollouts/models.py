"""Driver rollouts: a validated combination moved onto a module type's nodes, canary first, then
waves within each tier's capacity budget. ``Rollout`` is the plan and its state; ``RolloutNode`` is
one node's step, what it waits for and the last-known-good versions its rollback restores.

State changes happen in ``transitions.py`` (the rollout's, for the controls in ``services.py`` and
the controller) and ``nodes.py`` (each node's steps); node and
module state only through ``apps.operations.lifecycle`` with owner ``rollout``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.agents.models import NodeCommand
from apps.inventory.models import ModuleType, Node, VersionCombination
from apps.rollouts.choices import (
    ACTIVE_ROLLOUT_STATES,
    FailureKind,
    OnFailure,
    RollbackPhase,
    RolloutState,
    Step,
)
from apps.vectors.models import Suite, VectorRun


class Rollout(models.Model):
    combination = models.ForeignKey(VersionCombination, on_delete=models.PROTECT, related_name="rollouts")
    module_type = models.ForeignKey(ModuleType, on_delete=models.PROTECT, related_name="rollouts")
    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="rollouts",
                              help_text="The vectors each upgraded node's modules must pass")
    scope = models.JSONField(default=dict, blank=True, help_text="tiers, racks, nodes (ids) the rollout was limited to")
    canary = models.CharField(max_length=16, default="1",
                              help_text="Canary per tier in scope: a number of nodes ('1') or a percentage of the "
                                        "tier's nodes in scope ('10%', rounded up, at least 1)")
    wave_size = models.PositiveIntegerField(default=4, help_text="Nodes per wave after the canary")
    max_unavailable = models.CharField(max_length=16, default="25%",
                                       help_text="Serving nodes per tier out at once: '25%' or a number; never "
                                                 "past the capacity floor")
    bake_s = models.PositiveIntegerField(default=600, help_text="Seconds to wait after each wave before the next")
    on_failure = models.CharField(max_length=16, choices=OnFailure.choices, default=OnFailure.ROLLBACK)
    cohort_tolerance_pct = models.PositiveIntegerField(
        default=20, help_text="Cohort gate: after each wave's bake, the upgraded nodes' per-stage p95 latency and "
                              "error rate may exceed the not-yet-upgraded nodes' by at most this much (%)")
    max_failures = models.PositiveIntegerField(default=3, help_text="Circuit breaker: failed nodes in total")
    failures_acknowledged = models.PositiveIntegerField(default=0, help_text="Failed nodes an operator resumed past")
    drain_deadline_s = models.PositiveIntegerField(default=900)
    install_timeout_s = models.PositiveIntegerField(default=600)
    vectors_timeout_s = models.PositiveIntegerField(default=600)
    state = models.CharField(max_length=16, choices=RolloutState.choices, default=RolloutState.PLANNED)
    paused_from = models.CharField(max_length=16, blank=True, default="")
    current_wave = models.PositiveIntegerField(default=0)
    wave_count = models.PositiveIntegerField(default=0)
    wave_finished_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, default="", help_text="Why it was started")
    overrides = models.JSONField(
        default=list, db_default=models.Value([], output_field=models.JSONField()), blank=True,
        help_text="Dry-run gates that failed at the start and the starter overrode (the rollout's reason says why): "
                  "each gate's name and what it said")
    message = models.TextField(blank=True, default="", help_text="Why it paused, stopped or rolled back")
    waiting_for = models.CharField(max_length=1000, blank=True, default="")
    waiting_until = models.DateTimeField(null=True, blank=True,
                                         help_text="Waiting for its change window: when the next wave may start")
    plan = models.JSONField(default=dict, blank=True, help_text="The waves and capacity figures at creation")
    gates = models.JSONField(default=list, blank=True, help_text="Each wave's gate evidence")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["module_type"], condition=Q(state__in=sorted(ACTIVE_ROLLOUT_STATES)),
                                    name="one_active_rollout_per_module_type"),
        ]

    def __str__(self) -> str:
        return f"rollout #{self.pk} of {self.combination_id} ({self.state})"


class RolloutNode(models.Model):
    rollout = models.ForeignKey(Rollout, on_delete=models.CASCADE, related_name="nodes")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="rollout_steps")
    wave = models.PositiveIntegerField(null=True, blank=True,
                                       help_text="0 is the canary; none when skipped at planning")
    position = models.PositiveIntegerField(default=0)
    serving = models.BooleanField(default=True, help_text="Active when planned (counts against the tier's budget)")
    step = models.CharField(max_length=16, choices=Step.choices, default=Step.PENDING)
    rollback_phase = models.CharField(max_length=16, choices=RollbackPhase.choices, blank=True, default="")
    failure_kind = models.CharField(max_length=16, choices=FailureKind.choices, blank=True, default="")
    needs_hand = models.BooleanField(default=False, help_text="Its rollback could not finish: check it by hand")
    hold = models.CharField(max_length=16, blank=True, default="",
                            help_text="What the rollout did to take it out: drain, maintenance, or nothing yet")
    reason = models.TextField(blank=True, default="", help_text="Why it was skipped or failed")
    waiting_for = models.CharField(max_length=1000, blank=True, default="")
    modules = models.JSONField(default=list, blank=True, help_text="Serials of the module type's modules")
    lkg_driver = models.CharField(max_length=64, blank=True, default="", help_text="Last-known-good driver")
    lkg_framework = models.CharField(max_length=64, blank=True, default="", help_text="Last-known-good framework")
    install_command = models.ForeignKey(NodeCommand, on_delete=models.SET_NULL, null=True, blank=True,
                                        related_name="+")
    restore_command = models.ForeignKey(NodeCommand, on_delete=models.SET_NULL, null=True, blank=True,
                                        related_name="+")
    vector_run = models.ForeignKey(VectorRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    step_changed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["rollout", "wave", "position"]
        constraints = [models.UniqueConstraint(fields=["rollout", "node"], name="rollout_node_unique")]

    def __str__(self) -> str:
        return f"{self.node_id} in rollout #{self.rollout_id}: {self.step}"
