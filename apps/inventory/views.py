"""Read-only inventory pages: version combinations and version drift. Edits go through /admin/
and the API; the node list and the node page, which show live telemetry, are the dashboard's."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.views.generic import ListView, TemplateView

from apps.common.pages import page_config
from apps.common.roles import ADMIN, has_role
from apps.common.views import ViewerRequiredMixin
from apps.inventory import selectors
from apps.inventory.models import Module

PAGE_SIZE = 50


class CombinationListView(ViewerRequiredMixin, TemplateView):
    template_name = "inventory/combinations.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="combinations", figures_url=""))
        # validating, pinning and blocking are admin actions (the API enforces it; this hides the buttons)
        ctx.update(nav="combinations", module_types=selectors.combination_overview(), figures={}, snapshot=None,
                   can_pin=has_role(self.request.user, ADMIN))
        return ctx


class DriftView(ViewerRequiredMixin, ListView):
    template_name = "inventory/drift.html"
    context_object_name = "modules"
    paginate_by = PAGE_SIZE * 2

    def get_queryset(self) -> QuerySet[Module]:
        return selectors.version_drift().order_by("module_type__vendor", "module_type__model", "node__hostname",
                                                  "slot", "serial")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        ctx.update(nav="drift", back_to_pin=selectors.drift_back_to_pin())
        return ctx
