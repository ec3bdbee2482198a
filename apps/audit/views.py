"""The audit log page: read-only, filtered with the API's FilterSet."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.views.generic import ListView

from apps.audit.filtersets import AuditEventFilterSet
from apps.audit.models import AuditEvent
from apps.audit.selectors import audit_event_list, audit_filter_choices
from apps.common.pages import page_config
from apps.common.views import ViewerRequiredMixin, filter_data

PAGE_SIZE = 50


class AuditLogView(ViewerRequiredMixin, ListView):
    template_name = "audit/log.html"
    context_object_name = "events"
    paginate_by = PAGE_SIZE

    def get_queryset(self) -> QuerySet[AuditEvent]:
        self.filterset = AuditEventFilterSet(filter_data(self.request.GET), queryset=audit_event_list())
        if self.filterset.is_bound and not self.filterset.is_valid():
            return audit_event_list().none()
        return self.filterset.qs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        # live: a new record re-reads the rows as the server renders them (static/js/pages/audit.js)
        ctx.update(page_config(self.request, socket="/ws/fleet/", page="audit", figures_url=""),
                   figures={}, snapshot=None)
        ctx.update(nav="audit", filter=self.filterset, choices=audit_filter_choices(),
                   filtered=self.filterset.is_bound)
        return ctx
