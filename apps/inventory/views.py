"""Read-only inventory pages: fleet overview, nodes, node detail, version
combinations and version drift. Edits go through /admin/ and the API."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404
from django.views.generic import DetailView, ListView, TemplateView

from apps.audit.selectors import audit_events_for_node
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
        from apps.dashboard.views import page_config

        # operators cordon or drain a selection (dashboard.js: one confirmation, one API call per node)
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="nodes", figures_url=""),
                   figures={}, snapshot=None)
        ctx.update(nav="nodes", filter=self.filterset, filtered=self.filterset.is_bound,
                   choices=selectors.node_filter_choices(), states=NodeState.choices,
                   selected_states=self.request.GET.getlist("state"))
        return ctx


class NodeDetailView(ViewerRequiredMixin, DetailView):
    template_name = "inventory/node_detail.html"
    context_object_name = "node"

    def get_object(self, queryset: QuerySet[Node] | None = None) -> Node:
        try:
            return selectors.node_detail(pk=self.kwargs["pk"])
        except Node.DoesNotExist:
            raise Http404("no such node") from None

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        node: Node = self.object
        modules = list(node.modules.all())
        for m in modules:
            m.drifted = selectors.module_drifted(m)  # type: ignore[attr-defined]
        lanes = sum(m.module_type.pcie_lanes for m in modules)
        power = node.cpu_power_w + sum(m.module_type.power_w for m in modules)
        ctx.update(
            nav="nodes",
            modules=modules,
            lanes_used=lanes,
            power_w=power,
            modules_power_w=power - node.cpu_power_w,
            audit_events=audit_events_for_node(node_id=node.pk, module_ids=[m.pk for m in modules])
        )
        # The live parts (apps/dashboard): history charts, state, drain, module telemetry, actions.
        from apps.dashboard.views import node_live_context

        ctx.update(node_live_context(self.request, node))
        if scopes.nodes_outside(actor=self.request.user, nodes=[node]):  # not offered: the API would refuse them
            ctx["can_operate"] = ctx["dash_config"]["can_operate"] = False
        return ctx


class CombinationListView(ViewerRequiredMixin, TemplateView):
    template_name = "inventory/combinations.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        from apps.common.roles import ADMIN, has_role
        from apps.dashboard.views import page_config

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
        ctx.update(nav="drift")
        return ctx
