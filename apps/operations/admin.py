from django.contrib import admin

from apps.operations.models import (
    AutoscalerDecision,
    AutoscalerPolicy,
    Drain,
    IdempotencyRecord,
    Quarantine,
    ScaleRequest,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Operations change state through services (audited); the admin only shows them."""

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Drain)
class DrainAdmin(ReadOnlyAdmin):
    list_display = ["node", "kind", "owner", "state", "reason", "created_by_name", "created_at", "deadline",
                    "deadline_action", "after"]
    list_filter = ["state", "owner", "kind", "deadline_action"]
    search_fields = ["node__hostname", "reason"]


@admin.register(Quarantine)
class QuarantineAdmin(ReadOnlyAdmin):
    list_display = ["module", "owner", "reason", "created_by_name", "created_at", "released_at"]
    list_filter = ["owner"]
    search_fields = ["module__serial", "reason"]


@admin.register(ScaleRequest)
class ScaleRequestAdmin(ReadOnlyAdmin):
    list_display = ["pk", "tier", "from_active", "desired", "owner", "state", "created_by_name", "created_at"]
    list_filter = ["state", "owner", "tier"]


@admin.register(AutoscalerPolicy)
class AutoscalerPolicyAdmin(admin.ModelAdmin):
    list_display = ["tier", "enabled", "dry_run", "target_queue_per_node", "tolerance", "scale_up_window_s",
                    "scale_down_window_s", "max_step", "cooldown_s", "min_nodes", "max_nodes"]


@admin.register(AutoscalerDecision)
class AutoscalerDecisionAdmin(ReadOnlyAdmin):
    list_display = ["time", "tier", "current", "queue_depth", "raw_desired", "desired", "action", "explanation"]
    list_filter = ["tier", "action", "dry_run"]


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "user", "key", "method", "path", "status_code"]
