"""Faults injected into the simulated fleet, switchable at run time.

A fault row is the switch: ``enabled`` turns the failure pattern on and off;
``params`` tunes it (defaults in ``choices.FAULT_DEFAULT_PARAMS``).  One row per
(kind, node, combination); re-enabling reuses it and restarts its clock.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from apps.inventory.models import Node, VersionCombination
from apps.simulator.choices import FaultKind


class Fault(models.Model):
    kind = models.CharField(max_length=32, choices=FaultKind.choices)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="sim_faults")
    combination = models.ForeignKey(
        VersionCombination, on_delete=models.CASCADE, null=True, blank=True, related_name="sim_faults"
    )
    enabled = models.BooleanField(default=True)
    params = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When the fault was last switched on")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "node__hostname", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "node", "combination"], name="fault_unique_target", nulls_distinct=False
            ),
        ]
        indexes = [models.Index(fields=["enabled"], condition=Q(enabled=True), name="fault_enabled_idx")]

    def __str__(self) -> str:
        target = self.node or self.combination or "fleet"
        return f"{self.get_kind_display()} on {target} ({'on' if self.enabled else 'off'})"
