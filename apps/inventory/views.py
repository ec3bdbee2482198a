"""Read-only inventory pages: nodes, version combinations and version drift. Edits go through
/admin/ and the API; the node page, which shows live telemetry, is the dashboard's."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.views.generic import ListView, TemplateView

from apps.accounts.selectors import scope_limit_text
from apps.common.pages import page_config
from apps.common.roles import ADMIN, has_role
from apps.common.views import ViewerRequiredMixin, filter_data
from apps.inventory import scopes, selectors
from apps.inventory.choices import NodeState
from apps.inventory.filtersets import NodeFilterSet
from apps.inventory.models import Module, Node

PAGE_SIZE = 50


class NodePageFilterSet(NodeFilterSet):
    """The API's node filters plus the page's free-text search box."""

    q = django_filters.CharFilter(method="filter_q", label="Search")

    class Meta(NodeFilterSet.Meta):
        fields = [*NodeFilterSet.Meta.fields, "q"]

    def filter_q(self, queryset: QuerySet[Node], name: str, value: str) -> QuerySet[Node]:
        value = value.strip()
        if not value:
            return queryset
        serial = Module.objects.filter(node=OuterRef("pk"), serial__icontains=value)
        return queryset.filter(
            Q(hostname__icontains=value) | Q(cpu_model__icontains=value) | Q(rack__name__icontains=value)
            | Exists(serial)
        )


class NodeListView(ViewerRequiredMixin, ListView):
    template_name = "inventory/node_list.html"
    context_object_name = "nodes"
    paginate_by = PAGE_SIZE

    def get_queryset(self) -> QuerySet[Node]:
        self.filterset = NodePageFilterSet(filter_data(self.request.GET), queryset=selectors.node_list())
        if self.filterset.is_bound and not self.filterset.is_valid():
            return selectors.node_list().none()
        return self.filterset.qs.order_by("hostname")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        # operators cordon or drain a selection (static/js/pages/nodes.js: one confirmation, one API call for
        # all of them) of the nodes their scope holds: only those can be picked, as the API would refuse others
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="nodes", figures_url=""),
                   figures={}, snapshot=None)
        user, can_operate = self.request.user, ctx["dash_config"]["can_operate"]
        for n in ctx["nodes"]:
            n.acts = can_operate and scopes.may_act_on_node(actor=user, node=n)  # type: ignore[attr-defined]
        ctx.update(nodes_act=any(n.acts for n in ctx["nodes"]), scope_text=scope_limit_text(user=user))
        ctx.update(nav="nodes", filter=self.filterset, filtered=self.filterset.is_bound,
                   choices=selectors.node_filter_choices(), states=NodeState.choices,
                   selected_states=self.request.GET.getlist("state"))
        return ctx


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
