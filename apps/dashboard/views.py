"""The live dashboard pages: fleet overview ("/"), rack heat map, tier page, node page. Each
page renders its Plotly figures (built in Python) and the current snapshot, then
its module in static/js/pages/ keeps them live over the websocket."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.views.generic import DetailView, TemplateView

from apps.audit import selectors as audit
from apps.common.pages import page_config
from apps.common.views import ViewerRequiredMixin
from apps.dashboard import charts, selectors
from apps.inventory import scopes
from apps.inventory import selectors as inventory
from apps.inventory.models import Node, Tier
from apps.operations import selectors as operations


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
        )
        refusal = scopes.nodes_refusal(actor=self.request.user, nodes=[node])
        if refusal is not None:  # not offered: the API would refuse them; an operator is told why
            ctx["read_only"] = refusal if ctx["dash_config"]["can_operate"] else None
            ctx["can_operate"] = ctx["dash_config"]["can_operate"] = False
        return ctx
