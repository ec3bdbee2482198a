from django.contrib import admin

from apps.simulator.models import Fault


@admin.register(Fault)
class FaultAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["kind", "node", "combination", "enabled", "started_at", "updated_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["node__hostname"]
    readonly_fields = ["started_at", "created_at", "updated_at"]
