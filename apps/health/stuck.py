"""Stuck-state alarms: every rollout step, vector run and agent command has an expected duration; one
in the same state for more than ``FACTOR`` times it opens a ``stuck`` finding that names the object,
its state, since when and what it waits for (the step's own ``waiting_for``, the agent's last answer,
the modules a run still waits on). Drains keep their own deadline check (``drain_deadline``).

The apps that own those states sit above health, so each registers a provider at start-up
(``AppConfig.ready``): a read listing what is overdue now. The health sweep asks every provider
(not the controllers that move those states: a controller that is itself wedged must still be
caught), opens or updates one finding per overdue object and resolves the findings of objects that
moved on. A provider that raises is logged and leaves its findings as they are."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from apps.agents import selectors as agents
from apps.health import services
from apps.health.choices import ACTIVE_FINDING_STATES, FindingState, Severity, Status, SubjectKind
from apps.health.models import Finding

logger = logging.getLogger(__name__)

STUCK = "stuck"
FACTOR = 2.0  # past this many times its expected duration, a state is stuck


@dataclass(frozen=True)
class Stuck:
    """One object overdue in its state, as its owner describes it."""

    source: str  # the provider's name: "rollouts", "vectors", "commands"
    key: str  # unique within the source, e.g. "rollout_node:12"
    what: str  # the object in words: "rollout #3: n-r1-07's step"
    state: str
    since: dt.datetime
    expected_s: float
    waits_for: str
    node_id: int | None = None
    tier_id: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)


Provider = Callable[[dt.datetime, float], list[Stuck]]
_providers: dict[str, Provider] = {}


def register(source: str, provider: Provider) -> None:
    """``provider(now, factor)`` lists the source's objects in one state past ``factor`` × their expected
    duration."""
    _providers[source] = provider


def overdue_commands(now: dt.datetime, factor: float) -> list[Stuck]:
    """Agent commands an agent has taken (delivered, or acked in_progress) and not answered in time."""
    out = []
    for c, expected in agents.commands_overdue(now=now, factor=factor):
        since = c.delivered_at or c.created_at
        if c.progress_at is not None:
            message = str((c.result or {}).get("message", "")).strip()
            waits = (f"the agent's last answer: in_progress at {c.progress_at:%H:%M:%S} UTC"
                     + (f" ({message[:300]})" if message else ""))
        else:
            waits = f"an answer from {c.node.hostname}'s agent: delivered at {since:%H:%M:%S} UTC, nothing since"
        out.append(Stuck(source="commands", key=f"command:{c.pk}", what=f"command #{c.pk} {c.kind} on {c.node}",
                         state=c.state, since=since, expected_s=expected, waits_for=waits, node_id=c.node_id,
                         tier_id=c.node.tier_id, detail={"command": c.pk, "kind": c.kind}))
    return out


def _summary(s: Stuck, now: dt.datetime) -> str:
    age = (now - s.since).total_seconds()
    return (f"{s.what} has been {s.state} for {age:.0f} s since {s.since:%Y-%m-%d %H:%M:%S} UTC "
            f"(expected {s.expected_s:.0f} s): {s.waits_for or 'it does not say what it waits for'}")[:2000]


def _evidence(s: Stuck, now: dt.datetime) -> dict[str, Any]:
    return {"object": s.what, "state": s.state, "since": s.since.isoformat(),
            "stuck_s": round((now - s.since).total_seconds()), "expected_s": round(s.expected_s),
            "waits_for": s.waits_for, **s.detail}


def _subject_key(s: Stuck) -> str:
    return f"stuck:{s.source}:{s.key}"[:64]


@transaction.atomic
def sync(*, source: str, items: list[Stuck], now: dt.datetime) -> dict[str, list[Finding]]:
    """Open or update a ``stuck`` finding per item and resolve the source's others (its objects moved
    on). Announced like the sweep's findings."""
    prefix = f"stuck:{source}:"
    active = {f.subject_key: f for f in Finding.objects.select_for_update().filter(
        check_name=STUCK, subject_key__startswith=prefix, state__in=ACTIVE_FINDING_STATES)}
    opened: list[Finding] = []
    resolved: list[Finding] = []
    seen = set()
    for s in items:
        key = _subject_key(s)
        seen.add(key)
        summary, evidence = _summary(s, now), _evidence(s, now)
        score = (now - s.since).total_seconds() / max(1.0, s.expected_s)
        f = active.get(key)
        if f is None:
            f = Finding(check_name=STUCK, subject_kind=SubjectKind.NODE if s.node_id else SubjectKind.FLEET,
                        subject_key=key, node_id=s.node_id, tier_id=s.tier_id, first_seen=now, last_seen=now,
                        status=Status.FAIL, severity=Severity.WARNING, summary=summary, evidence=evidence,
                        worst_score=score)
            services.finding_open(finding=f)
            opened.append(f)
            continue
        f.summary, f.evidence, f.last_seen, f.worst_score = summary, evidence, now, max(f.worst_score, score)
        f.save(update_fields=["summary", "evidence", "last_seen", "worst_score"])
    for key, f in active.items():
        if key in seen:
            continue
        f.state, f.resolved_at = FindingState.RESOLVED, now
        f.save(update_fields=["state", "resolved_at"])
        resolved.append(f)
    if opened:
        services.findings_announce(findings=opened, event="open", now=now)
    if resolved:
        services.findings_announce(findings=resolved, event="resolve", now=now)
    return {"opened": opened, "resolved": resolved}


def sweep(*, now: dt.datetime) -> dict[str, Any]:
    """Ask every provider; a provider that raises keeps its findings as they are (and is logged)."""
    out: dict[str, Any] = {}
    for source, provider in sorted(_providers.items()):
        try:
            items = provider(now, FACTOR)
        except Exception:  # noqa: BLE001 - one owner's failing read must not stop the others'
            logger.exception("stuck-state provider %s failed", source)
            out[source] = "error"
            continue
        changes = sync(source=source, items=items, now=now)
        out[source] = {"stuck": len(items), "opened": [f.pk for f in changes["opened"]],
                       "resolved": [f.pk for f in changes["resolved"]]}
    return out
