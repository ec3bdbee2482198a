"""Pages: fleet operations at a glance, live (static/js/pages/operations.js re-reads the page's live
part when the fleet's events say it changed). Operators release holds and quarantines from it;
cordon, drain, quarantine and scale live on the node and tier pages. Every action posts to the
API with a confirmation and a reason."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django.views.generic import TemplateView

from apps.common.pages import page_config
from apps.common.views import ViewerRequiredMixin
from apps.operations import selectors
from apps.operations.choices import ACTIVE_DRAIN_STATES, DrainState, ScaleState


class OperationsView(ViewerRequiredMixin, TemplateView):
    template_name = "operations/overview.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        now = timezone.now()
        holds = list(selectors.drain_list().filter(state__in=ACTIVE_DRAIN_STATES).order_by("created_at"))
        for h in holds:
            h.waiting_for = selectors.drain_waiting_for(h, now=now)  # type: ignore[attr-defined]
            h.colour = DrainState.colour_of(h.state)  # type: ignore[attr-defined]
        scales = list(selectors.scale_request_list()[:15])
        for sr in scales:
            sr.progress = selectors.scale_progress(sr=sr)  # type: ignore[attr-defined]
            sr.colour = ScaleState.colour_of(sr.state)  # type: ignore[attr-defined]
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="operations", figures_url=""))
        ctx.update({
            "figures": {}, "snapshot": None,
            "nav": "operations",
            "holds": holds,
            "quarantines": list(selectors.quarantine_list().filter(released_at__isnull=True)),
            "scale_requests": scales,
            "policies": list(selectors.policy_list()),
            "decisions": list(selectors.decision_list()[:25]),
            "recent_holds": list(selectors.drain_list().exclude(state__in=ACTIVE_DRAIN_STATES)[:10]),
        })
        return ctx
