"""Pages: fleet operations at a glance, live (static/js/pages/operations.js re-reads the page's live
part when the fleet's events say it changed). Operators release holds and quarantines from it (those
within their scope); cordon, drain, quarantine and scale live on the node and tier pages. Every
action posts to the API with a confirmation and a reason."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django.views.generic import TemplateView

from apps.accounts.selectors import scope_limit_text
from apps.common.pages import page_config
from apps.common.views import ViewerRequiredMixin
from apps.inventory import scopes
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
        quarantines = list(selectors.quarantine_list().filter(released_at__isnull=True))
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="operations", figures_url=""))
        # Releasing a hold or a quarantine is offered where the API would take it: the operator's role
        # and the node within its scope (scopes.may_act_on_node, the rule the API checks).
        user, can_operate = self.request.user, ctx["dash_config"]["can_operate"]
        for h in holds:
            h.acts = can_operate and scopes.may_act_on_node(actor=user, node=h.node)  # type: ignore[attr-defined]
        for q in quarantines:
            q.acts = can_operate and scopes.may_act_on_node(actor=user, node=q.module.node)  # type: ignore[attr-defined]
        ctx.update({
            "figures": {}, "snapshot": None,
            "nav": "operations",
            "holds": holds, "holds_act": any(h.acts for h in holds),  # type: ignore[attr-defined]
            "quarantines": quarantines, "quarantines_act": any(q.acts for q in quarantines),  # type: ignore[attr-defined]
            "scope_text": scope_limit_text(user=user),
            "scale_requests": scales,
            "policies": list(selectors.policy_list()),
            "decisions": list(selectors.decision_list()[:25]),
            "recent_holds": list(selectors.drain_list().exclude(state__in=ACTIVE_DRAIN_STATES)[:10]),
        })
        return ctx
