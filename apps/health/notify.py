"""Notifications of findings: on open, escalate and resolve, to each enabled receiver whose
severity and tier match, unless a silence covers the finding. A webhook gets Alertmanager's
webhook payload (version 4, so existing receivers work) with a Slack-compatible ``text``;
an email goes through Django's mail backend. Each is a ``Delivery`` row, sent by a task on
the health queue that retries with backoff."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import httpx
from celery import current_app
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from apps.health import selectors
from apps.health.advisor import advice
from apps.health.choices import SEVERITY_ORDER, SubjectKind
from apps.health.models import Delivery, Finding, Receiver

EVENTS = ("open", "escalate", "resolve")
ZERO_TIME = "0001-01-01T00:00:00Z"
NOTIFY_TASK = "apps.health.tasks.health_notify"  # sent by name: the task calls back into this module


def deliveries_create(*, findings: list[Finding], event: str, now: dt.datetime | None = None) -> list[Delivery]:
    """Record a delivery per matching receiver and queue each after commit. Silenced findings send nothing."""
    assert event in EVENTS
    receivers = list(Receiver.objects.filter(enabled=True))
    if not receivers or not findings:
        return []
    silences = selectors.active_silences(now=now)
    out = []
    for f in findings:
        if selectors.is_silenced(f, silences) is not None:
            continue
        for r in receivers:
            if SEVERITY_ORDER.get(f.severity, 9) > SEVERITY_ORDER.get(r.min_severity, 9):
                continue
            if r.tier_id is not None and r.tier_id != f.tier_id:
                continue
            out.append(Delivery.objects.create(finding=f, receiver=r, event=event))
    if out:
        ids = [d.pk for d in out]
        transaction.on_commit(lambda: [current_app.signature(NOTIFY_TASK, args=(i,)).delay() for i in ids])
    return out


def _labels(f: Finding) -> dict[str, str]:
    labels = {"alertname": f.check_name, "severity": f.severity, "finding": str(f.pk), "subject": f.subject_key}
    if f.node is not None:
        labels["node"] = f.node.hostname
    if f.module is not None:
        labels["module"] = f.module.serial
    if f.tier is not None:
        labels["tier"] = f.tier.name
    if f.subject_kind == SubjectKind.ENDPOINT and f.evidence.get("endpoint"):
        labels["endpoint"] = str(f.evidence["endpoint"])
    return labels


def payload(delivery: Delivery) -> dict[str, Any]:
    """Alertmanager's webhook payload (version 4) for one finding, plus a Slack-compatible ``text``."""
    f, base = delivery.finding, getattr(settings, "HEALTH_EXTERNAL_URL", "")
    resolved = delivery.event == "resolve"
    status = "resolved" if resolved else "firing"
    labels = _labels(f)
    tips = advice(f.check_name, node_id=f.node_id, tier_id=f.tier_id)
    annotations = {"summary": f.summary, "cause": tips[0]["cause"] if tips else "",
                   "confirm": tips[0]["confirm"] if tips else "", "remedy": tips[0]["remedy"] if tips else ""}
    where = (labels.get("module") or labels.get("node") or labels.get("endpoint") or labels.get("tier")
             or f.subject_key)
    text = (f"[{status.upper()}{' ESCALATED' if delivery.event == 'escalate' else ''}] {f.severity} "
            f"{f.check_name} on {where}: {f.summary}")
    if tips and not resolved:
        text += f"\nLikely: {tips[0]['cause']}\nConfirm: {tips[0]['confirm']}\nRemedy: {tips[0]['remedy']}"
    fingerprint = hashlib.sha256(f"{f.check_name}:{f.subject_key}".encode()).hexdigest()[:16]
    return {
        "version": "4", "groupKey": f"{{}}:{{alertname=\"{f.check_name}\"}}", "truncatedAlerts": 0,
        "status": status, "receiver": delivery.receiver.name, "groupLabels": {"alertname": f.check_name},
        "commonLabels": labels, "commonAnnotations": annotations, "externalURL": base,
        "alerts": [{"status": status, "labels": labels, "annotations": annotations,
                    "startsAt": f.first_seen.isoformat(),
                    "endsAt": f.resolved_at.isoformat() if resolved and f.resolved_at else ZERO_TIME,
                    "generatorURL": f"{base}/health/?check={f.check_name}", "fingerprint": fingerprint}],
        "text": text,
    }


def deliver(*, delivery_id: int) -> Delivery:
    """Send one delivery; raises on a failed attempt (the task retries), records the attempt either way."""
    d = Delivery.objects.select_related("finding__node", "finding__module", "finding__tier", "receiver").get(
        pk=delivery_id)
    if d.state != Delivery.State.PENDING:
        return d
    d.attempts += 1
    try:
        body = payload(d)
        if d.receiver.kind == Receiver.Kind.WEBHOOK:
            r = httpx.post(d.receiver.url, json=body, timeout=10)
            r.raise_for_status()
        else:
            send_mail(subject=body["text"].splitlines()[0][:200], message=body["text"],
                      from_email=None, recipient_list=[d.receiver.email])
    except Exception as exc:
        d.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        d.save(update_fields=["attempts", "last_error"])
        raise
    d.state, d.sent_at, d.last_error = Delivery.State.SENT, timezone.now(), ""
    d.save(update_fields=["attempts", "state", "sent_at", "last_error"])
    return d


def delivery_give_up(*, delivery_id: int) -> None:
    Delivery.objects.filter(pk=delivery_id, state=Delivery.State.PENDING).update(state=Delivery.State.FAILED)
