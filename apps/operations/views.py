"""Pages: fleet operations at a glance, live (static/js/pages/operations.js re-reads the page's live
part when the fleet's events say it changed). Operators release holds and quarantines from it (those
within their scope); cordon, drain, quarantine and scale live on the node and tier pages. Every
action posts to the API with a confirmation and a reason."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from django.views.generic import TemplateView

from apps.accounts.selectors import scope_limit_text
from apps.common.pages import page_config
from apps.common.views import ViewerRequiredMixin
from apps.inventory import scopes
from apps.inventory.models import Rack, Tier
from apps.operations import selectors, windows
from apps.operations.choices import ACTIVE_DRAIN_STATES, DrainState, ScaleState, WindowActor


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


class WindowsView(ViewerRequiredMixin, TemplateView):
    """Change windows and freezes: the next 14 days as a calendar (UTC), the windows and freezes, and
    for admins the forms that add them and the buttons that delete them (static/js/pages/windows.js,
    through the API, with a reason)."""

    template_name = "operations/windows.html"
    days = 14

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        now = timezone.now()
        start = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        spans = windows.calendar(start=start, days=self.days)
        day = dt.timedelta(days=1)
        calendar = []
        for i in range(self.days):
            begins = start + i * day
            ends = begins + day
            cells = []
            for s in spans:
                if s.ends <= begins or s.starts >= ends:
                    continue
                a, b = max(s.starts, begins), min(s.ends, ends)
                cells.append({"kind": s.kind, "id": s.id, "title": s.title, "scope": s.scope, "detail": s.detail,
                              "left": round((a - begins) / day * 100, 3), "width": round((b - a) / day * 100, 3),
                              "text": f"{a:%H:%M}–{'24:00' if b == ends else f'{b:%H:%M}'}"})
            calendar.append({"date": begins, "today": i == 0, "spans": cells,
                             "now": round((now - begins) / day * 100, 3) if i == 0 else None})
        window_rows = list(windows.window_list())
        for w in window_rows:
            w.scope_text = windows.scope_text(w)  # type: ignore[attr-defined]
            w.next_at = windows.next_opening(w, now)  # type: ignore[attr-defined]
            w.open_until = (windows.open_at(w, now) or (None, None))[1]  # type: ignore[attr-defined]
            w.actor_labels = [WindowActor(a).label for a in w.actors]  # type: ignore[attr-defined]
        freeze_rows = list(windows.freeze_list().filter(ends_at__gt=now - dt.timedelta(days=7)))
        for f in freeze_rows:
            f.scope_text = windows.scope_text(f)  # type: ignore[attr-defined]
            f.active = f.starts_at <= now < f.ends_at  # type: ignore[attr-defined]
        ctx.update({
            "nav": "windows", "calendar": calendar, "windows": window_rows, "freezes": freeze_rows,
            "hours": [0, 6, 12, 18], "actors": WindowActor.choices,
            "tiers": list(Tier.objects.order_by("level")), "racks": list(Rack.objects.order_by("name")),
            "config": {"windows": "/api/v1/change-windows/", "freezes": "/api/v1/freezes/"},
        })
        return ctx
