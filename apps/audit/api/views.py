"""The audit trail, read-only: newest first, filterable (``AuditEventFilterSet``)."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import viewsets

from apps.audit.api.serializers import AuditEventSerializer
from apps.audit.filtersets import AuditEventFilterSet
from apps.audit.models import AuditEvent
from apps.audit.selectors import audit_event_list
from apps.common.permissions import IsViewer
from apps.common.values import LIST_FILTER_BACKENDS, ValuesListMixin, ValuesPagination


class AuditEventViewSet(ValuesListMixin, viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    """Who changed what, when, from where: newest first; read-only."""

    permission_classes = [IsViewer]
    pagination_class = ValuesPagination
    filter_backends = LIST_FILTER_BACKENDS
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilterSet
    search_fields = ["action", "actor_name", "target_repr", "reason", "request_id"]
    ordering_fields = ["time", "id", "action", "actor_name", "target_type"]
    ordering = ["-time", "-id"]

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_event_list()
