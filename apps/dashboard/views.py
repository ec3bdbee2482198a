"""The live dashboard pages: fleet overview ("/"), rack heat map, tier page, node list, node page.
Each page renders its Plotly figures (built in Python) and the current snapshot, then
its module in static/js/pages/ keeps them live over the websocket."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404
from django.views import View
from django.views.generic import DetailView, ListView, TemplateView

from apps.accounts import selectors as accounts
from apps.accounts import services as account_services
from apps.accounts.choices import ListPage
from apps.audit import selectors as audit
from apps.common.pages import page_config
from apps.common.views import ViewerRequiredMixin, filter_data
from apps.dashboard import charts, selectors
from apps.inventory import scopes
from apps.inventory import selectors as inventory
from apps.inventory.choices import NodeState
from apps.inventory.filtersets import NodePageFilterSet
from apps.inventory.models import Node, Tier
from apps.operations import selectors as operations
from apps.rollouts import selectors as rollouts


def tier_offers(request: Any, *, tier_kind: str, can_operate: bool) -> dict[str, Any]:
    """Whether a page offers the whole tier's actions (scale, autoscaler) to this user: by role and by
    scope, as the API decides them; to an operator whose scope does not hold the tier, why not."""
    refusal = scopes.tier_refusal(actor=request.user, tier_kind=tier_kind) if can_operate else None
    return {"acts": can_operate and refusal is None, "read_only": refusal}


class FleetDashboardView(ViewerRequiredMixin, TemplateView):
    template_name = "dashboard/fleet.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        snapshot = selectors.live_snapshot()
        warned = inventory.nodes_with_warnings()
        common = page_config(self.request, socket="/ws/fleet/", page="fleet",
                             figures_url="/api/v1/live/figures/fleet/")
        live = {t["id"]: t for t in snapshot["tiers"]}
        tiers = inventory.tier_overview()
        can_operate = common["dash_config"]["can_operate"]
        for t in tiers:
            t["live"] = live.get(t["tier"].pk)
            t.update(tier_offers(self.request, tier_kind=t["tier"].kind, can_operate=can_operate))
        ctx.update(
            common, nav="fleet", snapshot=snapshot,
            figures=charts.fleet_figures(minutes=common["minutes"], snapshot=snapshot),
            tiers=tiers, warned_nodes=list(warned[:100]), warned_total=warned.count(),
            drift_count=inventory.version_drift().count(), events=audit.audit_recent(limit=15),
        )
        return ctx


class RackView(ViewerRequiredMixin, TemplateView):
    template_name = "dashboard/racks.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        metric = self.request.GET.get("metric", "cpu")
        metric = metric if metric in charts.RACK_METRICS else "cpu"
        snapshot = selectors.live_snapshot()
        ctx.update(
            page_config(self.request, socket="/ws/fleet/", page="racks", figures_url="", metric=metric),
            nav="racks", snapshot=snapshot,
            metric=metric, metrics=[(k, v["label"]) for k, v in charts.RACK_METRICS.items()],
            metric_specs=charts.RACK_METRICS,
            figures={"racks": charts.rack_figure(snapshot["nodes"], snapshot["node_fields"], metric)},
        )
        return ctx


class TierView(ViewerRequiredMixin, TemplateView):
    template_name = "dashboard/tier.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        tier = get_object_or_404(Tier, pk=self.kwargs["pk"])
        snapshot = selectors.live_snapshot()
        common = page_config(self.request, socket=f"/ws/tiers/{tier.pk}/", page="tier", tier_id=tier.pk,
                             figures_url=f"/api/v1/live/figures/tiers/{tier.pk}/")
        live = next(t for t in snapshot["tiers"] if t["id"] == tier.pk)
        ctx.update(
            common, nav="fleet", tier=tier, live=live, snapshot=snapshot,
            offers=tier_offers(self.request, tier_kind=tier.kind, can_operate=common["dash_config"]["can_operate"]),
            nodes=[dict(zip(snapshot["node_fields"], r, strict=True)) for r in snapshot["nodes"]
                   if r[2] == tier.pk],
            figures=charts.tier_figures(tier=tier, minutes=common["minutes"], snapshot=snapshot),
            endpoints=list(inventory.endpoint_list(tier_id=tier.pk)),
            scale_requests=list(operations.scale_request_list().filter(tier=tier).order_by("-pk")[:8]),
            decisions=list(operations.decision_list().filter(tier=tier).order_by("-pk")[:8]),
        )
        return ctx


NODE_PAGE_SIZE = 50

# The node list's columns: (heading, sort key or None, cell class). The load columns sit beside the
# state (what choosing a node to drain needs first, on a narrow screen too) and hold the newest
# report's figures, kept live from the snapshot (static/js/pages/nodes.js).
NODE_COLUMNS = [
    ("Hostname", "hostname", ""), ("State", "state", ""), ("CPU use", "cpu", "num"),
    ("Module use", "module_util", "num"), ("In flight", "in_flight", "num"), ("Tier", "tier", ""),
    ("Rack / slot", "rack", ""), ("Modules", "modules", "num"), ("CPU", None, ""), ("Memory", None, "num"),
    ("Labels", None, ""), ("Warnings", None, ""), ("Agent", None, ""),
]


def _node_view(query: QueryDict) -> QueryDict:
    """A node list query as a view: filters and sort, without empty fields or the page number."""
    return filter_data(query) or QueryDict(mutable=True)


def _node_view_check(view: QueryDict) -> tuple[NodePageFilterSet, str, str]:
    """(its filters, its sort, what is wrong with the sort or "") of a node list view."""
    filters = view.copy()
    sort = (filters.pop("sort", None) or [selectors.NODE_SORT_DEFAULT])[-1]
    error = ""
    try:
        selectors.node_sort_check(sort)
    except selectors.UnknownSort as exc:
        error = str(exc)
    return NodePageFilterSet(filters or None, queryset=inventory.node_list()), sort, error


def _filters_invalid(filterset: NodePageFilterSet) -> bool:
    return filterset.is_bound and not filterset.is_valid()


class NodeListView(ViewerRequiredMixin, ListView):
    """The node list: filters, the newest CPU, module utilisation and requests in flight of each
    node, sorted by any of them (``?sort=in_flight``, ``-`` for descending) to choose which node to
    drain. With no query it opens the user's saved view, if any."""

    template_name = "inventory/node_list.html"
    context_object_name = "nodes"
    paginate_by = NODE_PAGE_SIZE

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        if self.sort_error:
            response.status_code = 400  # a sort the page does not know is a mistake in the address
        return response

    def get_queryset(self) -> QuerySet[Node]:
        saved = accounts.saved_view_query(user=self.request.user, page=ListPage.NODES)
        self.saved = _node_view(QueryDict(saved)) if saved else None
        self.from_saved = not self.request.GET and self.saved is not None
        self.query = self.saved if self.from_saved and self.saved is not None else self.request.GET
        self.view = _node_view(self.query)
        self.filterset, self.sort, self.sort_error = _node_view_check(self.view)
        if self.sort_error or _filters_invalid(self.filterset):
            return inventory.node_list().none()
        return selectors.node_list(nodes=self.filterset.qs, sort=self.sort)

    def _columns(self) -> list[dict[str, Any]]:
        key, descending = self.sort.removeprefix("-"), self.sort.startswith("-")
        columns = []
        for heading, sort_key, css in NODE_COLUMNS:
            column: dict[str, Any] = {"heading": heading, "css": css, "key": sort_key}
            if sort_key is not None:
                link = self.view.copy()
                link["sort"] = f"-{sort_key}" if sort_key == key and not descending else sort_key
                column["href"] = "?" + link.urlencode()
                column["aria_sort"] = ("descending" if descending else "ascending") if sort_key == key else "none"
            columns.append(column)
        return columns

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        # operators cordon or drain a selection (static/js/pages/nodes.js: one confirmation, one API call per node)
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="nodes", figures_url=""),
                   figures={}, snapshot=None)
        # only the nodes the user's scope holds can be picked, as the API would refuse the others
        user, can_operate = self.request.user, ctx["dash_config"]["can_operate"]
        for n in ctx["nodes"]:
            n.acts = can_operate and scopes.may_act_on_node(actor=user, node=n)  # type: ignore[attr-defined]
        ctx.update(nodes_act=any(n.acts for n in ctx["nodes"]), scope_text=accounts.scope_limit_text(user=user))
        view_text = self.view.urlencode()
        is_saved = self.saved is not None and view_text == self.saved.urlencode()
        filters = self.view.copy()
        filters.pop("sort", None)
        ctx.update(nav="nodes", filter=self.filterset, filtered=bool(filters), params=self.query,
                   choices=inventory.node_filter_choices(), states=NodeState.choices,
                   selected_states=self.query.getlist("state"), columns=self._columns(),
                   sort=self.sort if "sort" in self.view else "", sort_error=self.sort_error,
                   view_query=view_text, saved_view=self.saved, saved_applied=self.from_saved,
                   is_saved_view=is_saved,
                   saved_pairs=[f"{k}={v}" for k, vs in self.saved.lists() for v in vs] if self.saved else [])
        return ctx


class NodeSavedView(ViewerRequiredMixin, View):
    """Keep the node list's current filters and sort as the user's default view, or forget it."""

    def post(self, request: HttpRequest) -> HttpResponse:
        if request.POST.get("clear"):
            if account_services.saved_view_clear(user=request.user, page=ListPage.NODES):  # type: ignore[arg-type]
                messages.success(request, "Saved view cleared: the node list opens with every node.")
            return HttpResponseRedirect("/nodes/")
        view = _node_view(QueryDict(request.POST.get("query", "")))
        filterset, _, error = _node_view_check(view)
        if _filters_invalid(filterset):
            error = "Filter errors: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in filterset.errors.items())
        if error or not view:
            messages.error(request, error or "Nothing to save: choose filters or a sort first.")
            return HttpResponseRedirect("/nodes/?" + view.urlencode() if view else "/nodes/")
        account_services.saved_view_save(user=request.user, page=ListPage.NODES,  # type: ignore[arg-type]
                                         query=view.urlencode())
        messages.success(request, "Saved: the node list now opens with this view.")
        return HttpResponseRedirect("/nodes/")


class NodeDetailView(ViewerRequiredMixin, DetailView):
    """The node page: the inventory's record of the node and its modules, and its live parts
    (state, hold, actions, history charts, module telemetry), which read telemetry and
    operations: so the page lives here, above both."""

    template_name = "inventory/node_detail.html"
    context_object_name = "node"

    def get_object(self, queryset: Any = None) -> Node:
        try:
            return inventory.node_detail(pk=self.kwargs["pk"])
        except Node.DoesNotExist:
            raise Http404("no such node") from None

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        node: Node = self.object
        modules = list(node.modules.all())
        for m in modules:
            m.drifted = inventory.module_drifted(m)  # type: ignore[attr-defined]
        lanes = sum(m.module_type.pcie_lanes for m in modules)
        power = node.cpu_power_w + sum(m.module_type.power_w for m in modules)
        common = page_config(self.request, socket=f"/ws/nodes/{node.pk}/", page="node", node_id=node.pk,
                             figures_url=f"/api/v1/live/figures/nodes/{node.pk}/",
                             live_url=f"/api/v1/live/nodes/{node.pk}/")
        ctx.update(
            common, nav="nodes", modules=modules, lanes_used=lanes, power_w=power,
            modules_power_w=power - node.cpu_power_w,
            audit_events=audit.audit_events_for_node(node_id=node.pk, module_ids=[m.pk for m in modules]),
            live=selectors.node_live(node=node), snapshot=None,
            node_events=audit.audit_recent(limit=6, target_type="node", target_id=str(node.pk)),
            figures=charts.node_figures(node=node, minutes=common["minutes"]),
            rollout_skip=rollouts.node_skip_finding(node_id=node.pk),
            holders=operations.node_holders(node_id=node.pk),
        )
        refusal = scopes.nodes_refusal(actor=self.request.user, nodes=[node])
        if refusal is not None:  # not offered: the API would refuse them; an operator is told why
            ctx["read_only"] = refusal if ctx["dash_config"]["can_operate"] else None
            ctx["can_operate"] = ctx["dash_config"]["can_operate"] = False
        return ctx
