from django.db.models import Q, QuerySet

from apps.audit.models import AuditEvent


def audit_event_list() -> QuerySet[AuditEvent]:
    return AuditEvent.objects.select_related("actor").all()


def audit_events_for(*, target_type: str, target_id: str, limit: int = 50) -> list[AuditEvent]:
    return list(audit_event_list().filter(target_type=target_type, target_id=target_id)[:limit])


def audit_events_for_node(*, node_id: int, module_ids: list[int], limit: int = 50) -> list[AuditEvent]:
    """The trail of a node and of the modules it holds now, newest first."""
    where = Q(target_type="node", target_id=str(node_id))
    if module_ids:
        where |= Q(target_type="module", target_id__in=[str(i) for i in module_ids])
    return list(audit_event_list().filter(where)[:limit])


def audit_filter_choices() -> dict[str, list[str]]:
    """The actions and target types that occur in the log, for the page's filter menus."""
    return {
        "actions": list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()),
        "target_types": list(
            AuditEvent.objects.order_by("target_type").values_list("target_type", flat=True).distinct()
        ),
    }
