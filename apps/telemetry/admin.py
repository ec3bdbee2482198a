import datetime as dt
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.audit.choices import Source
from apps.common.admin import ReadOnlyAdmin
from apps.common.errors import Conflict
from apps.telemetry import models, services

ROTATION_OVERLAP_S = 3600
ROTATION_OVERLAP = dt.timedelta(seconds=ROTATION_OVERLAP_S)


@admin.register(models.AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ["__str__", "kind", "node", "key_prefix", "created_at", "last_used_at", "revoked_at",
                    "expires_at"]
    list_filter = ["kind", "revoked_at", "expires_at"]
    search_fields = ["node__hostname", "key_prefix", "note"]
    fields = ["kind", "node", "note", "key_prefix", "created_at", "created_by", "last_used_at", "revoked_at",
              "expires_at", "rotated_to"]
    readonly_fields = ["key_prefix", "created_at", "created_by", "last_used_at", "revoked_at", "expires_at",
                       "rotated_to"]
    actions = ["revoke", "rotate"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*self.readonly_fields, "kind", "node"] if obj else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, key = services.agent_token_issue(kind=obj.kind, node=obj.node, actor=request.user,
                                                note=obj.note, source=Source.ADMIN)
        obj.pk = token.pk
        messages.warning(request, f"The key of {token}, shown only now: {key}")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Rotate the selected keys (the old ones keep working for 1 hour)")
    def rotate(self, request: HttpRequest, queryset: QuerySet[models.AgentToken]) -> None:
        for token in queryset:
            try:
                new, key = services.agent_token_rotate(token=token, overlap_s=ROTATION_OVERLAP_S, actor=request.user,
                                                       source=Source.ADMIN)
            except Conflict as exc:
                messages.error(request, str(exc.detail))
                continue
            until = new.created_at + ROTATION_OVERLAP
            messages.warning(request, f"{token} is replaced by {new}, whose key is shown only now: {key} "
                                      f"(the old key works until {until:%Y-%m-%d %H:%M} UTC)")

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[models.AgentToken]) -> None:
        for token in queryset:
            services.agent_token_revoke(token=token, actor=request.user, source=Source.ADMIN)


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


@admin.register(models.NodeCommand)
class NodeCommandAdmin(admin.ModelAdmin):
    list_display = ["id", "node", "kind", "state", "created_at", "created_by_name", "delivered_at", "finished_at"]
    list_filter = ["state", "kind"]
    search_fields = ["node__hostname", "kind"]
    fields = ["node", "kind", "args", "reason", "expires_at", "state", "created_by_name", "delivered_at",
              "finished_at", "result"]
    readonly_fields = ["state", "created_by_name", "delivered_at", "finished_at", "result"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj:
            return [*self.readonly_fields, "node", "kind", "args", "reason", "expires_at"]
        return self.readonly_fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            return  # commands are immutable once sent
        command = services.node_command_send(node=obj.node, kind=obj.kind, args=obj.args, actor=request.user,
                                             reason=obj.reason, expires_at=obj.expires_at, source=Source.ADMIN)
        obj.pk = command.pk
