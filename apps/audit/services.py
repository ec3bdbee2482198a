"""Writing the audit trail. Call inside the transaction of the change."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

from django.db import models, transaction

from apps.audit.choices import Source
from apps.audit.models import AuditEvent
from apps.common.middleware import current_request_id


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, models.Model):
        return value.pk
    return value


def snapshot(instance: models.Model) -> dict[str, Any]:
    """The concrete field values of ``instance``, JSON-ready (FKs as ids)."""
    out: dict[str, Any] = {}
    for f in instance._meta.concrete_fields:
        if f.name in {"created_at", "updated_at"}:
            continue
        out[f.name] = _jsonable(getattr(instance, f.attname))
    return out


def diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, list[Any]]:
    before = before or {}
    after = after or {}
    keys = list(dict.fromkeys([*before.keys(), *after.keys()]))
    return {k: [before.get(k), after.get(k)] for k in keys if before.get(k) != after.get(k)}


def actor_identity(actor: Any) -> tuple[Any, str]:
    """Who acted: (the user, when a signed-in person did; None for the system) and the name kept with
    the record (the username, or the system actor's name such as ``health``; "system" when none)."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    return user, (str(user.get_username()) if user else str(actor or "system"))[:150]


def actor_name(actor: Any) -> str:
    """The name ``actor_identity`` keeps for ``actor``."""
    return actor_identity(actor)[1]


def audit_record(
    *,
    actor: Any,
    action: str,
    target: models.Model | None = None,
    target_type: str = "",
    target_id: str = "",
    target_repr: str = "",
    reason: str = "",
    changes: dict[str, Any] | None = None,
    source: str = Source.API,
    related: models.Model | None = None,
) -> AuditEvent:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    user, name = actor_identity(actor)
    if target is not None:
        target_type = target_type or target._meta.model_name or ""
        target_id = target_id or str(target.pk)
        target_repr = target_repr or str(target)[:200]
    return AuditEvent.objects.create(
        actor=user,
        actor_name=name,
        credential=getattr(user, "_cp_credential", "") if user is not None else "",
        action=action,
        target_type=target_type,
        target_id=target_id,
        target_repr=target_repr[:200],
        reason=reason,
        changes=changes or {},
        request_id=current_request_id.get(),
        source=source,
        related_type=(related._meta.model_name or "") if related is not None else "",
        related_id=str(related.pk) if related is not None else "",
    )
