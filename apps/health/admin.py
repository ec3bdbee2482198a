"""Admins configure notification receivers here; findings, deliveries and silences are shown read-only
(they change through the sweep and the audited services). Check parameters change through the API,
which validates them and writes the audit record."""

from django.contrib import admin

from apps.common.admin import ReadOnlyAdmin
from apps.health.models import Delivery, Finding, HealthCheck, Receiver, Silence


@admin.register(Receiver)
class ReceiverAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "kind", "url", "email", "min_severity", "tier", "enabled"]


@admin.register(Finding)
class FindingAdmin(ReadOnlyAdmin):
    list_display = ["id", "check_name", "subject_key", "state", "severity", "status", "first_seen", "last_seen"]
    list_filter = ["state", "severity", "check_name"]


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    list_display = ["id", "finding", "receiver", "event", "state", "attempts", "created_at", "sent_at"]
    list_filter = ["state", "event"]


@admin.register(Silence)
class SilenceAdmin(ReadOnlyAdmin):
    list_display = ["id", "check_name", "node", "tier", "expires_at", "created_by_name", "reason"]


@admin.register(HealthCheck)
class HealthCheckAdmin(ReadOnlyAdmin):
    list_display = ["name", "policy", "enabled", "raise_n", "raise_m", "clear_k", "updated_at", "updated_by_name"]
