"""Writes of health by people: acknowledge a finding, reset a tripped breaker, silence, edit a check. Each in
one transaction with its audit record. Opening a finding (``finding_open``, always audited) and
announcing it are here too, for the sweep and for other parts. The sweep's other writes are in
``sweep.py`` and ``actions.py``. Other parts of the control plane report findings of their own
(``finding_report``: a regression run's failed vectors) without the sweep's
hysteresis, since what they report is a verdict, not a sample."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import actor_name, audit_record
from apps.common.errors import CONFLICT, Conflict
from apps.common.events import FLEET_GROUP, EventType, node_group, publish
from apps.health import notify
from apps.health.checks import BREAKER, CHECKS, validate_params
from apps.health.choices import ACTIVE_FINDING_STATES, FindingState, Policy, Severity, Status, SubjectKind
from apps.health.models import Finding, HealthCheck, Silence
from apps.inventory import scopes
from apps.inventory.models import Module, Node, Tier

ACTOR = "health"  # who opens findings in the audit log


@transaction.atomic
def finding_acknowledge(*, finding: Finding, reason: str, actor: Any, source: str = Source.API) -> Finding:
    """Someone is on it: open → acknowledged, with who and why. 409 on a resolved finding."""
    if not reason.strip():
        raise ValidationError({"reason": "say why (what you are doing about it)"})
    scopes.require_subject(actor=actor, what="a fleet-wide finding", node=finding.node, module=finding.module,
                           tier=finding.tier)
    f = Finding.objects.select_for_update().get(pk=finding.pk)
    if f.state == FindingState.RESOLVED:
        raise Conflict(f"finding #{f.pk} is resolved (at {f.resolved_at:%Y-%m-%d %H:%M:%S}); nothing to acknowledge")
    if f.state == FindingState.ACKNOWLEDGED:
        return f
    f.state, f.acknowledged_at = FindingState.ACKNOWLEDGED, timezone.now()
    f.acknowledged_by_name, f.acknowledge_reason = actor_name(actor), reason
    f.save(update_fields=["state", "acknowledged_at", "acknowledged_by_name", "acknowledge_reason"])
    audit_record(actor=actor, action="health.finding_acknowledge", target=f.node or f.tier, reason=reason,
                 source=source, changes={"finding": f.pk, "check": f.check_name, "subject": f.subject_key},
                 related=f)
    return f


@transaction.atomic
def breaker_reset(*, finding: Finding, reason: str, actor: Any, source: str = Source.API) -> tuple[Finding, bool]:
    """An admin resets a tripped circuit breaker (it never resets by itself): the breaker finding is
    resolved, with who and why, and health acts on the tier's findings again from its next sweep (if
    the tier still fails the check that much, that sweep trips it again). Returns the finding and
    whether it changed: a reset of a breaker already reset changes nothing. 409 on another finding."""
    if not reason.strip():
        raise ValidationError({"reason": "say why the breaker may be reset (what was found and fixed)"})
    f = Finding.objects.select_for_update().get(pk=finding.pk)
    if f.check_name != BREAKER:
        raise Conflict(f"finding #{f.pk} is a {f.check_name} finding, not a tripped circuit breaker")
    if f.state == FindingState.RESOLVED:
        return f, False
    f.state, f.resolved_at = FindingState.RESOLVED, timezone.now()
    f.action = {**f.action, "result": "breaker_reset", "text": f"reset by {actor_name(actor)}: {reason}",
                "at": f.resolved_at.isoformat()}
    f.save(update_fields=["state", "resolved_at", "action"])
    audit_record(actor=actor, action="health.breaker_reset", target=f.tier, reason=reason, source=source,
                 changes={"finding": f.pk, "subject": f.subject_key, "tripped_at": f.first_seen.isoformat()},
                 related=f)
    findings_announce(findings=[f], event="resolve", now=f.resolved_at)
    return f, True


@transaction.atomic
def silence_create(*, reason: str, expires_at: dt.datetime, actor: Any, check_name: str = "",
                   node: Node | None = None, tier: Tier | None = None, source: str = Source.API) -> Silence:
    if not reason.strip():
        raise ValidationError({"reason": "say why the findings are silenced"})
    scopes.require_subject(actor=actor, what="a fleet-wide silence", node=node, tier=tier)
    if expires_at <= timezone.now():
        raise ValidationError({"expires_at": ValidationError("must be in the future", code=CONFLICT)})
    if check_name and check_name not in CHECKS:
        raise ValidationError({"check": f"no check {check_name!r} (known: {', '.join(CHECKS)})"})
    s = Silence.objects.create(check_name=check_name, node=node, tier=tier, reason=reason, expires_at=expires_at,
                               created_by_name=actor_name(actor))
    audit_record(actor=actor, action="health.silence", target=node or tier, reason=reason, source=source,
                 changes={"check": check_name or "all", "expires_at": expires_at.isoformat()}, related=s)
    return s


@transaction.atomic
def check_update(*, name: str, actor: Any, params: dict[str, Any] | None = None, policy: str | None = None,
                 enabled: bool | None = None, raise_n: int | None = None, raise_m: int | None = None,
                 clear_k: int | None = None, source: str = Source.API) -> HealthCheck:
    """Change a check's parameters (merged over its current ones), policy, hysteresis or switch.
    Field errors name the field (``params.window_min``)."""
    spec = CHECKS[name]
    row, _ = HealthCheck.objects.select_for_update().get_or_create(name=name, defaults={"policy": spec.policy})
    before = {"params": dict(row.params), "policy": row.policy, "enabled": row.enabled, "raise_n": row.raise_n,
              "raise_m": row.raise_m, "clear_k": row.clear_k}
    if params is not None:
        errors = validate_params(name, params)
        if errors:
            raise ValidationError(errors)
        current = {**spec.defaults, **row.params}
        for key, value in params.items():  # an object parameter (per-stage targets) merges key by key
            row.params[key] = {**current[key], **value} if isinstance(spec.defaults[key], dict) else value
    if policy is not None:
        if policy not in Policy.values:
            raise ValidationError({"policy": f"one of {', '.join(Policy.values)}"})
        if policy == Policy.ACT and spec.subject == SubjectKind.ENDPOINT:
            raise ValidationError({"policy": f"{name} judges an external endpoint, which is not a node: it can "
                                             f"observe or alert, not act"})
        row.policy = policy
    for field, value in (("enabled", enabled), ("raise_n", raise_n), ("raise_m", raise_m), ("clear_k", clear_k)):
        if value is not None:
            setattr(row, field, value)
    if row.raise_n > row.raise_m:
        raise ValidationError({"raise_n": f"{row.raise_n} failures cannot fit in the last {row.raise_m} evaluations"})
    row.updated_by_name = actor_name(actor)
    row.full_clean()
    row.save()
    after = {"params": row.params, "policy": row.policy, "enabled": row.enabled, "raise_n": row.raise_n,
             "raise_m": row.raise_m, "clear_k": row.clear_k}
    audit_record(actor=actor, action="health.check_update", target=row, reason=f"check {name} edited",
                 source=source, changes={k: [before[k], after[k]] for k in after if before[k] != after[k]})
    return row


def finding_open(*, finding: Finding) -> Finding:
    """Open a finding (a new one, or a resolved one raised again): save it with its audit record. The
    caller tells receivers and pages with ``findings_announce`` (the sweep once for all it opened)."""
    finding.save()
    audit_record(actor=ACTOR, action="finding.open", target=finding, source=Source.SYSTEM,
                 reason=finding.summary[:500])
    return finding


def findings_announce(*, findings: list[Finding], event: str, now: dt.datetime) -> None:
    """Notify the receivers (after commit) and push each finding's ``event`` to the fleet and its node."""
    notify.deliveries_create(findings=findings, event=event, now=now)
    for f in findings:
        publish(EventType.HEALTH_FINDING, {"id": f.pk, "event": event, "check": f.check_name,
                                           "subject": f.subject_key, "node": f.node_id, "tier": f.tier_id,
                                           "severity": f.severity, "state": f.state, "summary": f.summary},
                groups=[FLEET_GROUP] + ([node_group(f.node_id)] if f.node_id else []))


@transaction.atomic
def finding_report(*, check_name: str, module: Module, summary: str, evidence: dict[str, Any],
                   severity: str = Severity.CRITICAL, now: dt.datetime | None = None) -> Finding:
    """Open (or update) the finding ``check_name`` on ``module`` at once; notified and pushed like the
    sweep's. Each report of an open finding replaces its summary and evidence with the newest."""
    now = now or timezone.now()
    key = f"module:{module.pk}"
    f = Finding.objects.select_for_update().filter(check_name=check_name, subject_key=key,
                                                   state__in=ACTIVE_FINDING_STATES).first()
    if f is None:
        f = Finding(check_name=check_name, subject_kind=SubjectKind.MODULE, subject_key=key, node_id=module.node_id,
                    module=module, tier_id=module.node.tier_id if module.node_id and module.node else None,
                    first_seen=now, status=Status.FAIL, severity=severity, summary=summary, evidence=evidence,
                    last_seen=now)
        finding_open(finding=f)
        findings_announce(findings=[f], event="open", now=now)
        return f
    f.summary, f.evidence, f.last_seen = summary, evidence, now
    f.save()
    audit_record(actor=ACTOR, action="finding.update", target=f, source=Source.SYSTEM, reason=summary[:500])
    return f
