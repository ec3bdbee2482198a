"""The audit log page: read-only, filtered with the API's FilterSet."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.views.generic import ListView

from apps.audit.filtersets import AuditEventFilterSet
from apps.audit.models import AuditEvent
from apps.audit.selectors import CHATTER_ACTIONS, audit_event_list, audit_filter_choices, without_chatter
from apps.common.pages import page_config
from apps.common.views import ViewerRequiredMixin, filter_data

PAGE_SIZE = 50


class AuditLogView(ViewerRequiredMixin, ListView):
    template_name = "audit/log.html"
    context_object_name = "events"
    paginate_by = PAGE_SIZE

    def get_queryset(self) -> QuerySet[AuditEvent]:
        # the page hides routine machine records unless asked (chatter=true); the API shows them all
        data = filter_data(self.request.GET)
        asked = (data.get("action", "") + data.get("action_prefix", "")) if data is not None else ""
        self.chatter = data is not None and (data.get("chatter") in ("true", "True", "1")
                                             or any(asked.startswith(p) for p in CHATTER_ACTIONS))
        base = audit_event_list() if self.chatter else without_chatter(audit_event_list())
        self.filterset = AuditEventFilterSet(data, queryset=base)
        if self.filterset.is_bound and not self.filterset.is_valid():
            return audit_event_list().none()
        return self.filterset.qs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        # live: a new record re-reads the rows as the server renders them (static/js/pages/audit.js)
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="audit", figures_url=""),
                   figures={}, snapshot=None)
        ctx.update(nav="audit", filter=self.filterset, choices=audit_filter_choices(),
                   filtered=self.filterset.is_bound, chatter=self.chatter)
        return ctx
