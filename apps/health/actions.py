"""What health does about a finding whose check's policy is ``act``, within the safety
limits: cordon the node or quarantine the module through the lifecycle entry point
with owner ``health`` (so its capacity guard applies), never over another owner's
hold (the finding records that health would have acted), within the remediation
budget every automated actor shares (``apps.operations.budget``: ``max_unavailable``
of a tier and of the fleet held by automation at once, a rate limit per tier and
hour; what it held back is the tier's ``budget_held_back`` finding), and a circuit
breaker: when too much of a tier fails the same check, no action on that tier and
one fleet finding naming the most recent change.

Change windows and freezes (``apps.operations.windows``, actor ``health_actions``): outside the
windows that govern the subject's node, or during a freeze covering it, health only observes (the
finding stays open and notifies; its action says what it would do and until when). A critical
finding keeps its exception: it acts, and its note and the hold's audit record say so."""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from typing import Any

from django.db import transaction
from rest_framework.exceptions import APIException

from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.health import hysteresis, selectors
from apps.health.checks import BREAKER, BUDGET, CHECKS
from apps.health.choices import ACTIVE_FINDING_STATES, FindingState, Policy, Severity, Status, SubjectKind
from apps.health.evaluation import Evaluation, Limits, Subject, budget_limits
from apps.health.inputs import Outcome
from apps.health.models import Finding
from apps.inventory.models import Module, Node, Tier
from apps.operations import budget, lifecycle, windows
from apps.operations import selectors as operations
from apps.operations.choices import Owner, WindowActor

logger = logging.getLogger(__name__)

ACTOR = Owner.HEALTH.value
BUDGET_ACTOR = WindowActor.HEALTH_ACTIONS.value  # who health is to the remediation budget (and the windows)
# What ``act`` does per subject kind; the heartbeat has nothing to do (the lifecycle already marks the node).
NO_ACTION = frozenset({"heartbeat", "version_drift", "drain_deadline", "agent_contract"})


def _acting_checks(configs: dict[str, selectors.CheckConfig]) -> list[str]:
    return [n for n, c in configs.items() if c.enabled and c.policy == Policy.ACT and n not in NO_ACTION
            and CHECKS[n].subject in (SubjectKind.NODE, SubjectKind.MODULE)]


def breaker_evaluations(*, evals: list[Evaluation], configs: dict[str, selectors.CheckConfig], lim: Limits,
                        now: dt.datetime) -> list[Evaluation]:
    """Per tier and acting check: does more than ``breaker`` of the tier's serving nodes fail it?"""
    acting = _acting_checks(configs)
    if not acting:
        return []
    serving = selectors.serving_counts()
    failing: dict[tuple[int, str], set[int]] = defaultdict(set)
    for e in evals:
        if e.check in acting and e.outcome.status == Status.FAIL and e.subject.tier_id is not None \
                and hysteresis.raising(e.mem, n=configs[e.check].raise_n) and e.subject.node_id is not None:
            failing[(e.subject.tier_id, e.check)].add(e.subject.node_id)
    tiers = dict(Tier.objects.values_list("id", "name"))
    change = None
    out = []
    for tier_id, tier_name in tiers.items():
        total = serving[tier_id]["nodes"] if tier_id in serving else 0
        for check in acting:
            bad = failing.get((tier_id, check), set())
            share = len(bad) / total if total else 0.0
            subject = Subject(SubjectKind.TIER, f"tier:{tier_id}:{check}", tier_id=tier_id, label=tier_name)
            if len(bad) >= lim.breaker_min_nodes and share > lim.breaker:
                if change is None:
                    change = selectors.recent_change(before=now)
                what = ("no recorded change" if change is None else
                        f"{change.action} {change.target_repr} by {change.actor_name} "
                        f"at {change.time:%Y-%m-%d %H:%M:%S}")
                ev: dict[str, Any] = {"check": check, "failing_nodes": len(bad), "serving_nodes": total,
                                      "share": round(share, 3), "breaker": lim.breaker,
                                      "recent_change": None if change is None else {
                                          "action": change.action, "target": change.target_repr,
                                          "by": change.actor_name, "time": change.time.isoformat(),
                                          "audit_event": change.pk}}
                outcome = Outcome(Status.FAIL, f"{len(bad)} of {total} serving nodes of {tier_name} fail {check} "
                                               f"({share:.0%} > {lim.breaker:.0%}): health takes no action on this "
                                               f"tier. Most recent change: {what}", ev, score=share)
            else:
                outcome = Outcome(Status.PASS, f"{len(bad)} of {total} nodes fail {check}")
            out.append(Evaluation(BREAKER, subject, outcome, Severity.CRITICAL))
    return out


def _tripped() -> set[tuple[int, str]]:
    out = set()
    for key in Finding.objects.filter(check_name=BREAKER, state__in=ACTIVE_FINDING_STATES).values_list(
            "subject_key", flat=True):
        _, tier_id, check = key.split(":", 2)
        out.add((int(tier_id), check))
    return out


def _note(finding: Finding, result: str, text: str, now: dt.datetime, **extra: Any) -> None:
    finding.action = {"result": result, "text": text, "at": now.isoformat(), **extra}
    finding.save(update_fields=["action", "holds"])


class _HeldBack(Exception):
    """The budget, read under its lock, refused what its snapshot allowed (another actor took it meanwhile)."""

    def __init__(self, verdict: budget.Verdict) -> None:
        super().__init__(verdict.why)
        self.verdict = verdict


def act(*, configs: dict[str, selectors.CheckConfig], lim: Limits, now: dt.datetime) -> list[dict[str, Any]]:
    """Act on the findings of acting checks that health has not acted on yet, within the remediation
    budget (``apps.operations.budget``); what the budget held back is recorded per tier (and what no
    longer is, cleared)."""
    done: list[dict[str, Any]] = []
    for f in Finding.objects.filter(check_name=BREAKER, state__in=ACTIVE_FINDING_STATES, action={}).select_related(
            "tier"):
        with transaction.atomic():
            audit_record(actor=ACTOR, action="health.breaker_tripped", target=f.tier, source=Source.SYSTEM,
                         reason=f.summary, changes={"finding": f.pk, **f.evidence}, related=f)
            _note(f, "breaker", "no action on this tier while the breaker is tripped", now)
    acting = _acting_checks(configs)
    candidates = [f for f in Finding.objects.filter(
        check_name__in=acting, state__in=ACTIVE_FINDING_STATES, status=Status.FAIL,
        subject_kind__in=(SubjectKind.NODE, SubjectKind.MODULE)).select_related("node", "module", "module__node")
        if f.action.get("result") in (None, "held_back")]
    held_back: dict[int, tuple[budget.Verdict, str, int]] = {}  # per tier: the first refusal, what, how many
    if candidates:
        _act_on(candidates, lim=lim, now=now, done=done, held_back=held_back)
    tiers = Tier.objects.in_bulk(list(held_back))
    for tier_id, (verdict, what, n) in held_back.items():
        if tier_id in tiers:
            budget.held_back_record(verdict=verdict, tier=tiers[tier_id], now=now,
                                    wanted=what + (f" (and {n - 1} more)" if n > 1 else ""))
    budget.held_back_clear(actor=BUDGET_ACTOR, keep=held_back, now=now)
    return done


def _act_on(candidates: list[Finding], *, lim: Limits, now: dt.datetime, done: list[dict[str, Any]],
            held_back: dict[int, tuple[budget.Verdict, str, int]]) -> None:
    candidates.sort(key=lambda f: (f.severity != Severity.CRITICAL, f.first_seen))
    tripped = _tripped()
    blim = budget_limits(lim)
    use = budget.usage(now=now)
    tiers = Tier.objects.in_bulk()
    held = operations.holders(node_ids=[f.node_id for f in candidates if f.node_id],
                              module_ids=[f.module_id for f in candidates if f.module_id])

    def hold_back(f: Finding, verdict: budget.Verdict, what: str) -> None:
        _note(f, "held_back", f"{verdict.why}: would {what}", now, budget=verdict.numbers)
        first, text, n = held_back.get(f.tier_id or 0, (verdict, what, 0))
        held_back[f.tier_id or 0] = (first, text, n + 1)

    for f in candidates:
        tier_id = f.tier_id or 0
        tier = tiers.get(tier_id)
        on_module = f.subject_kind == SubjectKind.MODULE
        holder = held["modules"].get(f.module_id or 0) if on_module else held["nodes"].get(f.node_id or 0)
        what = (f"quarantine module {f.module}" if on_module else f"cordon node {f.node}")
        if (tier_id, f.check_name) in tripped:
            _note(f, "held_back", f"circuit breaker tripped for {f.check_name} on this tier: would {what}", now)
            continue
        if holder is not None and holder["owner"] != ACTOR:
            text = (f"would have {'quarantined' if on_module else 'cordoned'} {f.module if on_module else f.node}; "
                    f"held by {holder['owner']} ({holder['by']}: {holder['reason']!r}), left alone")
            with transaction.atomic():
                target: Any = f.module if on_module else f.node
                audit_record(actor=ACTOR, action="health.would_have_acted", target=target, source=Source.SYSTEM,
                             reason=text, changes={"finding": f.pk, "holder": holder}, related=f)
                _note(f, "would_have_acted", text, now, holder=holder)
            done.append({"finding": f.pk, "result": "would_have_acted"})
            continue
        kind = budget.MODULES if on_module else budget.NODES
        verdict = budget.judge(use, actor=BUDGET_ACTOR, tier_id=tier_id, tier_name=tier.name if tier else "no tier",
                               kind=kind, asked=1, lim=blim)
        if not verdict.allowed:
            hold_back(f, verdict, what)
            continue
        critical = f.severity == Severity.CRITICAL
        node = f.node or (f.module.node if f.module is not None else None)
        window = windows.verdict(actor=WindowActor.HEALTH_ACTIONS,
                                 scope=windows.Scope.of_nodes([node] if node is not None else []), at=now)
        exception = ""
        if not window.allowed:
            if not critical:
                _note(f, "held_back", f"observe only ({window.why}): would {what}", now,
                      until=window.until.isoformat() if window.until else None)
                continue
            exception = (f"critical: acts despite {'the freeze' if window.freeze else 'its change window'} "
                         f"({window.why})")
        reason = (f"health finding #{f.pk} ({f.check_name}): {f.summary}"
                  + (f"; {exception}" if exception else ""))[:1000]
        try:
            with transaction.atomic():  # the budget's lock is held until the hold is taken
                if tier is not None:
                    verdict = budget.ask(actor=BUDGET_ACTOR, tier=tier, kind=kind, asked=1, now=now, lim=blim)
                    if not verdict.allowed:
                        raise _HeldBack(verdict)
                if on_module:
                    result = lifecycle.module_quarantine(module=Module.objects.get(pk=f.module_id or 0), owner=ACTOR,
                                                         reason=reason, actor=ACTOR, critical=critical,
                                                         source=Source.SYSTEM)
                else:
                    result = lifecycle.node_cordon(node=Node.objects.get(pk=f.node_id or 0), owner=ACTOR,
                                                   reason=reason, actor=ACTOR, critical=critical,
                                                   source=Source.SYSTEM)
        except _HeldBack as exc:
            hold_back(f, exc.verdict, what)
            continue
        except APIException as exc:  # refused: capacity floor, another owner meanwhile, a state it cannot leave
            _note(f, "refused", f"{what} refused: {exc.detail}", now)
            done.append({"finding": f.pk, "result": "refused"})
            continue
        f.holds = True
        _note(f, "acted", f"{'quarantined' if on_module else 'cordoned'} by health"
              + (f"; {exception}" if exception else ""), now, hold=getattr(result.obj, "pk", None))
        if result.changed:
            use.take(actor=BUDGET_ACTOR, tier_id=tier_id, kind=kind)
        done.append({"finding": f.pk, "result": "acted"})


def budget_evaluations(*, now: dt.datetime) -> list[Evaluation]:
    """Per tier: does the remediation budget hold an automated actor back (``BUDGET``)? The newest record
    gives the finding its numbers; the others are named beside it."""
    rows: dict[int, list[Any]] = defaultdict(list)
    for r in budget.held_back_standing(now=now):
        rows[r.tier_id].append(r)
    out = []
    for tier_id, tier_name in Tier.objects.values_list("id", "name"):
        subject = Subject(SubjectKind.TIER, f"tier:{tier_id}", tier_id=tier_id, label=tier_name)
        if not rows.get(tier_id):
            out.append(Evaluation(BUDGET, subject, Outcome(Status.PASS, "the budget holds nothing back"),
                                  Severity.WARNING))
            continue
        newest, *others = rows[tier_id]
        who = WindowActor(newest.actor).label
        ev: dict[str, Any] = {"actor": who, "wanted": newest.wanted, "limit": newest.limit, **newest.numbers,
                              "granted": newest.granted, "since": newest.first_at.isoformat(), "times": newest.times}
        summary = f"{who} held back on {tier_name}: {newest.wanted}: {newest.why}"
        if others:
            ev["also_held_back"] = [f"{WindowActor(o.actor).label}: {o.wanted} ({o.limit})" for o in others]
            summary += "; also held back: " + "; ".join(ev["also_held_back"])
        out.append(Evaluation(BUDGET, subject, Outcome(Status.FAIL, summary[:2000], ev,
                                                       score=float(sum(r.times for r in rows[tier_id]))),
                              Severity.WARNING))
    return out


def release_due(*, now: dt.datetime) -> list[int]:
    """Release health's hold of resolved findings whose cool-down has passed, unless the subject has
    another active finding."""
    released = []
    for f in Finding.objects.filter(state=FindingState.RESOLVED, holds=True, release_after__lte=now):
        if Finding.objects.filter(subject_key=f.subject_key, state__in=ACTIVE_FINDING_STATES).exists():
            continue
        reason = f"health finding #{f.pk} ({f.check_name}) resolved at {f.resolved_at:%H:%M:%S}; cool-down passed"
        try:
            if f.module_id:
                lifecycle.module_release(module=Module.objects.get(pk=f.module_id), owner=ACTOR, reason=reason,
                                         actor=ACTOR, source=Source.SYSTEM)
            elif f.node_id:
                lifecycle.node_uncordon(node=Node.objects.get(pk=f.node_id), owner=ACTOR, reason=reason, actor=ACTOR,
                                        source=Source.SYSTEM)
        except APIException as exc:  # someone else holds it now, or it moved on: nothing of ours to release
            logger.info("health: not releasing for finding %s: %s", f.pk, exc.detail)
        f.holds = False
        f.action = {**f.action, "released_at": now.isoformat()}
        f.save(update_fields=["holds", "action"])
        released.append(f.pk)
    return released
