from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from apps.audit.choices import Source
from apps.inventory import models, services
from apps.inventory.choices import (
    MODULE_INITIAL_STATES,
    MODULE_STATE_ACTIONS,
    NODE_INITIAL_STATES,
    NODE_STATE_ACTIONS,
)


class StateFormMixin:
    """The state of a node or module belongs to the node lifecycle: the admin sets where a new one
    starts and refuses a change after that with a form error naming the action to use."""

    initial_states: tuple[str, ...] = ()
    actions_text = ""

    def clean_state(self) -> str:
        form: Any = self
        state = str(form.cleaned_data["state"])
        instance = form.instance
        if instance.pk is None and state not in self.initial_states:
            raise forms.ValidationError(f"a new one starts {' or '.join(self.initial_states)}")
        if instance.pk is not None and state != instance.state:
            raise forms.ValidationError("the state is read-only here: "
                                        + self.actions_text.format(id=instance.pk,
                                                                   tier=getattr(instance, "tier_id", "")))
        return state


class NodeAdminForm(StateFormMixin, forms.ModelForm):  # type: ignore[type-arg]
    initial_states = NODE_INITIAL_STATES
    actions_text = NODE_STATE_ACTIONS

    class Meta:
        model = models.Node
        fields = "__all__"


class ModuleAdminForm(StateFormMixin, forms.ModelForm):  # type: ignore[type-arg]
    initial_states = MODULE_INITIAL_STATES
    actions_text = MODULE_STATE_ACTIONS

    class Meta:
        model = models.Module
        fields = "__all__"


class AuditedAdmin(admin.ModelAdmin):
    """Admin writes go through the inventory services: same rules, audited."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            data = {f: form.cleaned_data[f] for f in form.changed_data if f in form.cleaned_data}
            services.inventory_update(instance=obj, data=data, actor=request.user, source=Source.ADMIN)
        else:
            services.inventory_create(instance=obj, actor=request.user, source=Source.ADMIN)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.inventory_delete(instance=obj, actor=request.user, source=Source.ADMIN)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            services.inventory_delete(instance=obj, actor=request.user, source=Source.ADMIN)


@admin.register(models.Rack)
class RackAdmin(AuditedAdmin):
    list_display = ["name", "row", "position", "power_budget_w"]
    search_fields = ["name"]


@admin.register(models.Tier)
class TierAdmin(AuditedAdmin):
    list_display = ["name", "kind", "level", "min_active_nodes", "max_active_nodes"]


class ModuleInline(admin.TabularInline):
    model = models.Module
    extra = 0
    fields = ["serial", "module_type", "slot", "state", "driver_version", "framework_version"]
    readonly_fields = ["serial", "module_type", "slot", "state", "driver_version", "framework_version"]
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(models.Node)
class NodeAdmin(AuditedAdmin):
    form = NodeAdminForm
    list_display = ["hostname", "rack", "slot", "tier", "state", "cpu_clock_ghz", "ecc_memory"]
    list_filter = ["tier", "state", "rack", "ecc_memory"]
    search_fields = ["hostname", "cpu_model"]
    readonly_fields = ["warnings", "state_changed_at"]
    inlines = [ModuleInline]


@admin.register(models.ModuleType)
class ModuleTypeAdmin(AuditedAdmin):
    list_display = ["vendor", "model", "form_factor", "int8_tops", "power_w", "pcie_lanes"]


@admin.register(models.Module)
class ModuleAdmin(AuditedAdmin):
    form = ModuleAdminForm
    list_display = ["serial", "module_type", "node", "slot", "state", "driver_version", "framework_version"]
    list_filter = ["module_type", "state", "driver_version", "framework_version"]
    search_fields = ["serial", "node__hostname"]
    autocomplete_fields = ["node"]


@admin.register(models.DriverRelease)
class DriverReleaseAdmin(AuditedAdmin):
    list_display = ["vendor", "version", "released_on"]


@admin.register(models.FrameworkRelease)
class FrameworkReleaseAdmin(AuditedAdmin):
    list_display = ["name", "version", "released_on"]


@admin.register(models.VersionCombination)
class VersionCombinationAdmin(AuditedAdmin):
    list_display = ["module_type", "driver", "framework", "state", "state_changed_at"]
    list_filter = ["state", "module_type"]


@admin.register(models.ExternalEndpoint)
class ExternalEndpointAdmin(AuditedAdmin):
    list_display = ["name", "kind", "model", "url", "quota_requests_per_min", "quota_tokens_per_min", "latency_slo_ms",
                    "enabled"]


@admin.register(models.AdmissionRule)
class AdmissionRuleAdmin(AuditedAdmin):
    list_display = ["code", "enforcement", "threshold"]
