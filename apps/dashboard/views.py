"""The live dashboard pages: fleet overview ("/"), rack heat map, tier page. Each
page renders its Plotly figures (built in Python) and the current snapshot, then
static/js/dashboard.js keeps them live over the websocket."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.views.generic import TemplateView

from apps.audit import selectors as audit
from apps.common.roles import OPERATOR, has_role
from apps.common.views import PLOTLY_VERSION, ViewerRequiredMixin
from apps.dashboard import charts, selectors
from apps.inventory import selectors as inventory
from apps.inventory.choices import MODULE_STATE_COLOURS, NODE_STATE_COLOURS, ModuleState, NodeState
from apps.inventory.models import Tier
from apps.operations import selectors as operations

DEFAULT_MINUTES = 60


def minutes_from(request: Any) -> int:
    """The chosen time range (minutes), one of TIME_RANGES; the default otherwise."""
    try:
        value = int(request.GET.get("minutes", DEFAULT_MINUTES))
    except ValueError:
        return DEFAULT_MINUTES
    return value if value in {m for m, _ in selectors.TIME_RANGES} else DEFAULT_MINUTES


def page_config(request: Any, *, socket: str, page: str, figures_url: str, **extra: Any) -> dict[str, Any]:
    """What a live page needs: its websocket, where to re-fetch, the time range, the
    viewer's powers (display only: the API enforces them) and the state colours."""
    minutes = minutes_from(request)
    return {
        "minutes": minutes, "time_ranges": selectors.TIME_RANGES if figures_url else [],
        "plotly_version": PLOTLY_VERSION,
        "dash_config": {
            "page": page, "ws": socket, "minutes": minutes, "figures_url": figures_url,
            "snapshot_url": "/api/v1/live/snapshot/", "can_operate": has_role(request.user, OPERATOR),
            "state_colours": {str(k): v for k, v in NODE_STATE_COLOURS.items()},
            "state_labels": dict(NodeState.choices),
            "module_colours": {str(k): v for k, v in MODULE_STATE_COLOURS.items()},
            "module_labels": dict(ModuleState.choices), **extra,
        },
    }


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
        for t in tiers:
            t["live"] = live.get(t["tier"].pk)
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
            nodes=[dict(zip(snapshot["node_fields"], r, strict=True)) for r in snapshot["nodes"]
                   if r[2] == tier.pk],
            figures=charts.tier_figures(tier=tier, minutes=common["minutes"], snapshot=snapshot),
            endpoints=list(inventory.endpoint_list(tier_id=tier.pk)),
            scale_requests=list(operations.scale_request_list().filter(tier=tier).order_by("-pk")[:8]),
            decisions=list(operations.decision_list().filter(tier=tier).order_by("-pk")[:8]),
        )
        return ctx


def node_live_context(request: Any, node: Any) -> dict[str, Any]:
    """The node page's live parts (templates/inventory/node_detail.html)."""
    common = page_config(request, socket=f"/ws/nodes/{node.pk}/", page="node", node_id=node.pk,
                         figures_url=f"/api/v1/live/figures/nodes/{node.pk}/",
                         live_url=f"/api/v1/live/nodes/{node.pk}/")
    return {**common, "live": selectors.node_live(node=node), "snapshot": None,
            "node_events": audit.audit_recent(limit=6, target_type="node", target_id=str(node.pk)),
            "figures": charts.node_figures(node=node, minutes=common["minutes"])}
