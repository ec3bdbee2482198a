from django.db.models import QuerySet

from apps.audit.models import AuditEvent


def audit_event_list() -> QuerySet[AuditEvent]:
    return AuditEvent.objects.select_related("actor").all()


def audit_events_for(*, target_type: str, target_id: str, limit: int = 50) -> list[AuditEvent]:
    return list(audit_event_list().filter(target_type=target_type, target_id=target_id)[:limit])
