from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.audit.choices import Source
from apps.audit.services import snapshot
from apps.common.admin import ReadOnlyAdmin
from apps.operations.models import (
    AutoscalerDecision,
    AutoscalerPolicy,
    BudgetHeldBack,
    Drain,
    IdempotencyRecord,
    Quarantine,
    ScaleRequest,
)
from apps.operations.scaling import policy_delete, policy_save


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
    """Policy edits go through the service: validated and audited like the API's."""

    list_display = ["tier", "enabled", "dry_run", "target_queue_per_node", "tolerance", "scale_up_window_s",
                    "scale_down_window_s", "max_step", "cooldown_s", "min_nodes", "max_nodes"]

    def save_model(self, request: HttpRequest, obj: AutoscalerPolicy, form: Any, change: bool) -> None:
        before = snapshot(AutoscalerPolicy.objects.get(pk=obj.pk)) if change else None
        policy_save(policy=obj, actor=request.user, source=Source.ADMIN, created=not change, before=before)

    def delete_model(self, request: HttpRequest, obj: AutoscalerPolicy) -> None:
        policy_delete(policy=obj, actor=request.user, source=Source.ADMIN)


@admin.register(AutoscalerDecision)
class AutoscalerDecisionAdmin(ReadOnlyAdmin):
    list_display = ["time", "tier", "current", "queue_depth", "raw_desired", "desired", "action", "explanation"]
    list_filter = ["tier", "action", "dry_run"]


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "user", "key", "method", "path", "status_code"]


@admin.register(BudgetHeldBack)
class BudgetHeldBackAdmin(ReadOnlyAdmin):
    list_display = ["tier", "actor", "wanted", "limit", "asked", "granted", "first_at", "last_at", "times", "why"]
    list_filter = ["actor", "limit", "tier"]
