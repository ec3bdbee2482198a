from __future__ import annotations

from typing import Any

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


# Routine machine traffic, not worth an operator's glance: agent credentials churn, agents
# answering the commands sent to them (the command's own record, naming who sent it and why,
# stays). The live pages leave it out, the audit log page hides it unless asked (chatter=true);
# the API returns every record unless asked not to (chatter=false).
CHATTER_ACTIONS = ("agent_token.", "node_command.finish")


def without_chatter(qs: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
    for prefix in CHATTER_ACTIONS:
        qs = qs.exclude(action__startswith=prefix)
    return qs


def audit_brief(event: AuditEvent) -> dict[str, Any]:
    """One record as the live pages show it (JSON-safe)."""
    return {"id": event.pk, "time": event.time.isoformat() if event.time else None, "actor": event.actor_name,
            "action": event.action, "target_type": event.target_type, "target_id": event.target_id,
            "target": event.target_repr, "reason": event.reason}


def audit_tail(*, since_id: int, upto_id: int) -> list[dict[str, Any]]:
    """Records with since_id < id <= upto_id (the newest 50 of them, chatter left out), oldest first."""
    qs = without_chatter(AuditEvent.objects.filter(pk__gt=since_id, pk__lte=upto_id)).order_by("-pk")[:50]
    return [audit_brief(e) for e in reversed(list(qs))]


def audit_recent(*, limit: int = 15, target_type: str | None = None, target_id: str | None = None
                 ) -> list[dict[str, Any]]:
    qs = without_chatter(AuditEvent.objects.order_by("-pk"))
    if target_type:
        qs = qs.filter(target_type=target_type)
    if target_id:
        qs = qs.filter(target_id=target_id)
    return [audit_brief(e) for e in qs[:limit]]


def audit_max_id() -> int:
    return int(AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0)
