from django.contrib import admin

from apps.common.admin import ReadOnlyAdmin
from apps.telemetry import models


@admin.register(models.IngestBatch)
class IngestBatchAdmin(ReadOnlyAdmin):
    list_display = ["batch_id", "scope", "received_at", "stored_at", "node_samples", "module_samples",
                    "tier_samples", "stage_samples", "min_time", "max_time"]
    exclude = ["payload"]
    search_fields = ["batch_id", "scope"]
    date_hierarchy = "received_at"


@admin.register(models.RollupDue)
class RollupDueAdmin(ReadOnlyAdmin):
    """Minutes waiting for the next rollup run: a long list means rollups fall behind."""

    list_display = ["kind", "minute", "version"]
    list_filter = ["kind"]


@admin.register(models.WindowSummary)
class WindowSummaryAdmin(ReadOnlyAdmin):
    """The snapshot's default-window figures as of the last rollup run: an old one means rollups stopped."""

    list_display = ["minutes", "since", "computed_at"]


# The raw sample tables (partitioned, composite primary key) are not in the admin:
# the admin cannot show such models, and rollups are what operators read.


@admin.register(models.NodeStatus)
class NodeStatusAdmin(ReadOnlyAdmin):
    list_display = ["node", "time", "last_seen", "cpu_util", "mem_util", "load1", "in_flight", "threads"]
    search_fields = ["node__hostname"]


@admin.register(models.NodeHolders)
class NodeHoldersAdmin(ReadOnlyAdmin):
    list_display = ["node", "time", "holders"]
    search_fields = ["node__hostname"]


@admin.register(models.ModuleStatus)
class ModuleStatusAdmin(ReadOnlyAdmin):
    list_display = ["module", "node", "time", "util", "temp_c", "power_w", "link_width", "link_width_expected",
                    "ecc_corrected", "ecc_uncorrected", "errors"]
    search_fields = ["module__serial", "node__hostname"]


@admin.register(models.TierStatus)
class TierStatusAdmin(ReadOnlyAdmin):
    list_display = ["tier", "time", "queue_depth", "arrivals", "completions", "window_s"]


@admin.register(models.NodeRollup)
class NodeRollupAdmin(ReadOnlyAdmin):
    list_display = ["minute", "node_id", "samples", "cpu_util_mean", "cpu_util_max", "mem_util_mean", "in_flight_max"]
    show_full_result_count = False


@admin.register(models.ModuleRollup)
class ModuleRollupAdmin(ReadOnlyAdmin):
    list_display = ["minute", "module_id", "node_id", "samples", "util_mean", "temp_c_max", "link_width_min",
                    "ecc_uncorrected_max"]
    show_full_result_count = False


@admin.register(models.TierRollup)
class TierRollupAdmin(ReadOnlyAdmin):
    list_display = ["minute", "tier_id", "samples", "queue_depth_mean", "queue_depth_max", "arrivals", "window_s"]
    show_full_result_count = False


@admin.register(models.EndpointRollup)
class EndpointRollupAdmin(ReadOnlyAdmin):
    """The gateway's figures per external endpoint and minute (merged as batches are stored)."""

    list_display = ["minute", "endpoint_id", "samples", "requests", "errors", "tokens", "p95_ms", "window_s"]
    show_full_result_count = False


@admin.register(models.StageRollup)
class StageRollupAdmin(ReadOnlyAdmin):
    list_display = ["minute", "tier_id", "stage", "count", "p50_ms", "p95_ms", "p99_ms", "max_ms"]
    list_filter = ["stage"]
    show_full_result_count = False


@admin.register(models.StageNodeRollup)
class StageNodeRollupAdmin(ReadOnlyAdmin):
    """The gateway's per-node breakdown of a stage per minute (what a rollout's cohort gate compares)."""

    list_display = ["minute", "node_id", "tier_id", "stage", "count", "errors", "p95_ms"]
    list_filter = ["stage"]
    show_full_result_count = False


@admin.register(models.NodeLatencyRollup)
class NodeLatencyRollupAdmin(ReadOnlyAdmin):
    """A node's merged latency histogram per minute and stage (percentiles: /api/v1/fleet/latency/)."""

    list_display = ["minute", "node_id", "tier_id", "stage", "count"]
    list_filter = ["stage"]
    show_full_result_count = False


@admin.register(models.TierLatencyRollup)
class TierLatencyRollupAdmin(ReadOnlyAdmin):
    """A tier's merged latency histogram per minute and stage."""

    list_display = ["minute", "tier_id", "stage", "count"]
    list_filter = ["stage"]
    show_full_result_count = False
