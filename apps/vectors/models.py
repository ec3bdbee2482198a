"""Regression test vectors: suites of content-addressed vectors (immutable once
published), runs over modules, one result per (run, module, case).

A vector is a small ONNX model, its input tensors, the expected outputs and a tolerance
per output, addressed by the sha256 of all of it (``codec.content_sha256``). Tensors are
stored in the wire format of ``codec`` (compressed, exact). State changes happen in
``services.py``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from apps.agents.models import NodeCommand
from apps.inventory.models import Module, Node, VersionCombination
from apps.vectors.choices import Outcome, RunPhase, RunPurpose, RunState, SuiteState, TargetState


class Vector(models.Model):
    sha256 = models.CharField(max_length=64, unique=True, help_text="Address: sha256 of model, inputs, "
                              "expected outputs and tolerances")
    name = models.CharField(max_length=200, help_text="The case's name at its source, e.g. test_qlinearmatmul_2D")
    operator = models.CharField(max_length=64, db_index=True, help_text="The operator the vector exercises")
    opset = models.PositiveIntegerField(default=0, help_text="The model's default-domain opset")
    model = models.BinaryField(help_text="The ONNX model, serialised")
    model_sha256 = models.CharField(max_length=64)
    inputs = models.JSONField(help_text="Input tensors in the codec's format, with their names")
    expected = models.JSONField(help_text="Expected output tensors in the codec's format, with their names")
    tolerances = models.JSONField(help_text="One tolerance per output: gate and bounds (compare.py)")
    provenance = models.JSONField(default=dict, blank=True,
                                  help_text="Where it comes from: source, case, package version")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["operator", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.sha256[:12]})"


class Suite(models.Model):
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    description = models.TextField(blank=True, default="")
    state = models.CharField(max_length=16, choices=SuiteState.choices, default=SuiteState.DRAFT)
    provenance = models.JSONField(default=dict, blank=True)
    vectors = models.ManyToManyField(Vector, through="SuiteVector", related_name="suites")
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="suite_name_version_unique")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class SuiteVector(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="members")
    vector = models.ForeignKey(Vector, on_delete=models.PROTECT, related_name="memberships")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["suite", "position"]
        constraints = [models.UniqueConstraint(fields=["suite", "vector"], name="suite_vector_unique")]

    def __str__(self) -> str:
        return f"{self.suite} #{self.position}: {self.vector}"


class VectorRun(models.Model):
    """A suite run over chosen modules. Validation runs also install the candidate
    combination on the gray pool first and put the previous versions back after."""

    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="runs")
    combination = models.ForeignKey(VersionCombination, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="vector_runs")
    purpose = models.CharField(max_length=16, choices=RunPurpose.choices, default=RunPurpose.MANUAL)
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    phase = models.CharField(max_length=16, choices=RunPhase.choices, default=RunPhase.EXECUTE)
    reason = models.TextField(blank=True, default="")
    message = models.TextField(blank=True, default="", help_text="Why it ended as it did, in words")
    timeout_s = models.PositiveIntegerField(default=600, help_text="Per module: from sending to results")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True, help_text="Counts by outcome, failing cases")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"run #{self.pk} {self.suite} ({self.state})"


class RunTarget(models.Model):
    """One module of a run: the commands sent for it and where it is."""

    run = models.ForeignKey(VectorRun, on_delete=models.CASCADE, related_name="targets")
    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="vector_targets")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="vector_targets")
    state = models.CharField(max_length=16, choices=TargetState.choices, default=TargetState.PENDING)
    command = models.ForeignKey(NodeCommand, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                help_text="The run_vectors command")
    install_command = models.ForeignKey(NodeCommand, on_delete=models.SET_NULL, null=True, blank=True,
                                        related_name="+", help_text="Validation: the install_versions command")
    restore_command = models.ForeignKey(NodeCommand, on_delete=models.SET_NULL, null=True, blank=True,
                                        related_name="+", help_text="Validation: the command restoring versions")
    previous_driver = models.CharField(max_length=64, blank=True, default="")
    previous_framework = models.CharField(max_length=64, blank=True, default="")
    restored = models.BooleanField(default=False)
    sent_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["run", "node__hostname", "module__slot"]
        constraints = [models.UniqueConstraint(fields=["run", "module"], name="run_target_unique")]

    def __str__(self) -> str:
        return f"run #{self.run_id} on {self.module_id} ({self.state})"


class VectorResult(models.Model):
    """The control plane's verdict on one case on one module in one run (stored once)."""

    run = models.ForeignKey(VectorRun, on_delete=models.CASCADE, related_name="results")
    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="vector_results")
    vector = models.ForeignKey(Vector, on_delete=models.PROTECT, related_name="results")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    message = models.TextField(blank=True, default="")
    max_abs_error = models.FloatField(null=True, blank=True)
    outputs = models.JSONField(default=list, blank=True, help_text="Every figure per output (compare.py)")
    agent_ms = models.FloatField(null=True, blank=True, help_text="The agent's execution time of the case")
    digest = models.CharField(max_length=64, blank=True, default="",
                              help_text="sha256 of the outputs the agent returned: twins must agree bit for bit")
    actual = models.JSONField(default=list, blank=True,
                              help_text="The outputs the agent returned (codec format): the baseline of the next "
                                        "combination when this one is pinned")
    baseline = models.JSONField(default=dict, blank=True,
                                help_text="Beside the expected outputs: the difference from the pinned "
                                          "combination's outputs of the same case on the same module type")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "module", "vector__operator", "vector__name"]
        constraints = [models.UniqueConstraint(fields=["run", "module", "vector"], name="vector_result_once")]
        indexes = [models.Index(fields=["run", "outcome"], condition=~Q(outcome=Outcome.PASS),
                                name="vector_result_not_pass_idx")]

    def __str__(self) -> str:
        return f"{self.vector.name} on {self.module_id}: {self.outcome}"


class ModuleCheck(models.Model):
    """The versions a serving module had when the version-regression check last looked at it:
    a module seen on other versions is checked again."""

    module = models.OneToOneField(Module, on_delete=models.CASCADE, related_name="vector_check")
    driver_version = models.CharField(max_length=64, blank=True, default="")
    framework_version = models.CharField(max_length=64, blank=True, default="")
    run = models.ForeignKey(VectorRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    checked_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.module_id}: {self.driver_version} + {self.framework_version}"
