"""The latest state: one row per node, module and tier, as fresh as the last batch."""

from __future__ import annotations

from django.db import models

from apps.inventory.models import Module, Node, Tier
from apps.telemetry.metrics import MODULE_METRICS, NODE_METRICS, contribute
from apps.telemetry.models.samples import ModuleMetricColumns, NodeMetricColumns


class NodeStatus(NodeMetricColumns, models.Model):
    """The newest sample of a node, and when the node was last heard from."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="status")
    time = models.DateTimeField(help_text="Time of the newest sample")
    last_seen = models.DateTimeField(help_text="When the server last received a sample of this node")

    class Meta:
        verbose_name_plural = "node status"
        indexes = [models.Index(fields=["last_seen"])]

    def __str__(self) -> str:
        return f"{self.node} @ {self.time:%Y-%m-%d %H:%M:%S}"


contribute(NodeStatus, NODE_METRICS, "sample")


class NodeHolders(models.Model):
    """The processes holding a node's modules, as its agent last listed them (``--holders-from``, contract
    4): each {pid, name, module}. No row: the agent does not look, and drains go by the in-flight count."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="holders")
    time = models.DateTimeField(help_text="Time of the sample that listed them")
    holders = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name_plural = "node holders"

    def __str__(self) -> str:
        return f"{self.node}: {len(self.holders)} holder(s) @ {self.time:%Y-%m-%d %H:%M:%S}"


class ModuleStatus(ModuleMetricColumns, models.Model):
    module = models.OneToOneField(Module, on_delete=models.CASCADE, primary_key=True, related_name="status")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="module_status")
    time = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        verbose_name_plural = "module status"

    def __str__(self) -> str:
        return f"{self.module} @ {self.time:%Y-%m-%d %H:%M:%S}"


contribute(ModuleStatus, MODULE_METRICS, "sample")


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
