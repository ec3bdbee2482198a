import datetime as dt
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.agents import enrolments, models, services
from apps.audit.choices import Source
from apps.common.errors import Conflict

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


@admin.register(models.BootstrapToken)
class BootstrapTokenAdmin(admin.ModelAdmin):
    """Read and revoke here; issue through the API or the enrolment page (the token is shown once)."""

    list_display = ["__str__", "tier", "uses", "used", "expires_at", "auto_approve", "created_by", "revoked_at"]
    list_filter = ["tier", "auto_approve", "revoked_at"]
    search_fields = ["key_prefix", "reason"]
    readonly_fields = ["key_prefix", "tier", "racks", "uses", "used", "expires_at", "reason", "auto_approve",
                       "created_at", "created_by", "revoked_at"]
    fields = tuple(readonly_fields)
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Revoke the selected bootstrap tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[models.BootstrapToken]) -> None:
        for token in queryset:
            enrolments.bootstrap_token_revoke(token=token, actor=request.user, source=Source.ADMIN)


@admin.register(models.Enrolment)
class EnrolmentAdmin(admin.ModelAdmin):
    """Read here; approve and reject on the enrolment page or the API (placement and verdicts)."""

    list_display = ["id", "hostname", "state", "machine_id", "rack", "slot", "node", "created_at", "decided_by"]
    list_filter = ["state", "rejoin"]
    search_fields = ["hostname", "machine_id", "location_hint"]
    readonly_fields = ["token", "state", "hostname", "machine_id", "agent_version", "facts", "modules",
                       "location_hint", "tier", "rack", "slot", "verdicts", "node", "rejoin", "agent_token",
                       "key_delivered_at", "created_at", "decided_at", "decided_by", "decision_reason"]
    fields = tuple(readonly_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
