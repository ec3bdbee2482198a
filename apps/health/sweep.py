"""The health sweep: evaluate every enabled check on the whole fleet, keep each
subject's recent outcomes, raise and resolve findings with hysteresis, then act
within the safety limits (``actions.py``). What it works on (subjects, evaluations, limits) is
in ``evaluation.py``; a finding is opened and announced by ``services.finding_open``.

A check that raises an exception on a subject gives that subject ``unknown`` and
one ``checker`` finding naming the check; the sweep goes on with the others."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from apps.health import actions, hysteresis, selectors, services, stuck
from apps.health.checks import BREAKER, BUDGET, CHECKER, CHECKS
from apps.health.choices import ACTIVE_FINDING_STATES, SEVERITY_ORDER, FindingState, Severity, Status, SubjectKind
from apps.health.evaluation import Evaluation, Limits, Subject, limits
from apps.health.inputs import Outcome
from apps.health.models import CheckState, Finding
from apps.inventory.choices import ModuleState, NodeState

logger = logging.getLogger(__name__)


def _subjects(nodes: list[Any], modules: list[Any], tiers: list[Any], kind: str) -> list[tuple[Subject, Any]]:
    if kind == SubjectKind.NODE:
        return [(Subject(kind, f"node:{n.id}", node_id=n.id, tier_id=n.tier_id, label=n.hostname), n) for n in nodes]
    if kind == SubjectKind.MODULE:
        return [(Subject(kind, f"module:{m.id}", node_id=m.node_id, module_id=m.id, tier_id=m.tier_id,
                         label=m.serial), m) for m in modules]
    if kind == SubjectKind.ENDPOINT:  # not a node: findings and notifications only, never a hold
        return [(Subject(kind, f"endpoint:{e.id}", tier_id=e.tier_id, label=e.name), e)
                for t in tiers for e in t.endpoints]
    return [(Subject(kind, f"tier:{t.id}", tier_id=t.id, label=t.name), t) for t in tiers]


def evaluate(*, now: dt.datetime, configs: dict[str, selectors.CheckConfig], lim: Limits
             ) -> tuple[list[Evaluation], dict[str, list[str]]]:
    """Run every enabled check on every subject it applies to. Returns the evaluations and, per check,
    the errors it raised."""
    window = max([int(c.params[key]) for c in configs.values()
                  if c.enabled and (key := CHECKS[c.name].window_key)] or [5])
    stale_s = float(configs["heartbeat"].params["timeout_s"])
    nodes, modules, tiers, ctx = selectors.sweep_inputs(now=now, window_min=window, stale_s=stale_s)
    out: list[Evaluation] = []
    errors: dict[str, list[str]] = {}
    subjects: dict[str, list[tuple[Subject, Any]]] = {}
    for name, cfg in configs.items():
        if not cfg.enabled:
            continue
        spec = CHECKS[name]
        errors[name] = []
        if spec.subject not in subjects:
            subjects[spec.subject] = _subjects(nodes, modules, tiers, spec.subject)
        for subject, view in subjects[spec.subject]:
            if spec.subject == SubjectKind.MODULE:
                if spec.capability and spec.capability not in view.capabilities:
                    continue  # the module type does not report it: never a finding for what it lacks
                if view.node_state in (NodeState.MAINTENANCE, NodeState.FAILED) or view.state == ModuleState.FAILED:
                    continue
            try:
                outcome = spec.fn(view, cfg.params, ctx)
            except Exception as exc:  # a broken check must not stop the sweep
                logger.exception("health check %s failed on %s", name, subject.key)
                errors[name].append(f"{subject.label}: {type(exc).__name__}: {exc}")
                outcome = Outcome(Status.UNKNOWN, f"the check raised {type(exc).__name__}: {exc}")
            if outcome is None:
                continue
            out.append(Evaluation(name, subject, outcome, outcome.severity or spec.severity))
    return out, errors


def _checker_evaluations(errors: dict[str, list[str]]) -> list[Evaluation]:
    out = []
    for name, errs in errors.items():
        subject = Subject(SubjectKind.FLEET, f"check:{name}", label=f"check {name}")
        if errs:
            outcome = Outcome(Status.FAIL, f"the {name} check raised an error on {len(errs)} subject(s): {errs[0]}",
                              {"check": name, "errors": errs[:10], "count": len(errs)}, score=len(errs))
        else:
            outcome = Outcome(Status.PASS, f"the {name} check ran without error")
        out.append(Evaluation(CHECKER, subject, outcome, Severity.CRITICAL))
    return out


def _hysteresis_of(name: str, configs: dict[str, selectors.CheckConfig]) -> tuple[int, int, int]:
    if name in (CHECKER, BREAKER):
        return 1, 1, 3
    if name == BUDGET:  # a verdict, not a sample: open when held back, resolve when nothing is
        return 1, 1, 1
    c = configs[name]
    return c.raise_n, c.raise_m, c.clear_k


def _apply(evals: list[Evaluation], configs: dict[str, selectors.CheckConfig], now: dt.datetime,
           lim: Limits) -> dict[str, list[Finding]]:
    """Remember the outcomes and open, update, reopen or resolve findings. Returns the findings
    opened and resolved in this sweep."""
    checks = {e.check for e in evals}
    states = {(r[1], r[2]): r for r in CheckState.objects.filter(check_name__in=checks).values_list(
        "pk", "check_name", "subject_key", "history", "pass_streak", "unknown_streak", "last_status", "last_summary")}
    active: dict[tuple[str, str], Finding | None] = {(x.check_name, x.subject_key): x for x in Finding.objects.filter(
        check_name__in=checks, state__in=ACTIVE_FINDING_STATES)}
    recent = {}
    for old in Finding.objects.filter(check_name__in=checks, state=FindingState.RESOLVED,
                                      resolved_at__gte=now - dt.timedelta(seconds=lim.flap_window_s)
                                      ).order_by("resolved_at"):
        recent[(old.check_name, old.subject_key)] = old  # the newest wins
    new_states: list[CheckState] = []
    changed_states: list[tuple[Any, ...]] = []
    opened: list[Finding] = []
    resolved: list[Finding] = []
    escalated: list[Finding] = []
    dirty: dict[int, Finding] = {}
    seen_last: list[int] = []
    for e in evals:
        n, m, k = _hysteresis_of(e.check, configs)
        f = active.get((e.check, e.subject.key))
        needed = k * (lim.flap_clear_factor if f is not None and f.flapping else 1)
        st = states.get((e.check, e.subject.key))
        if (f is None and st is not None and e.outcome.status == Status.PASS and st[4] >= needed
                and st[6] == Status.PASS and st[3] == "p" * min(m, len(st[3])) and len(st[3]) == m):
            e.mem = hysteresis.Memory(st[3], st[4], st[5])  # steady and healthy: nothing to change
            continue
        before = hysteresis.Memory(st[3], st[4], st[5]) if st else hysteresis.Memory()
        mem = e.mem = hysteresis.remember(before, e.outcome.status, m=m, pass_cap=needed,
                                            unknown_cap=lim.unknown_after)
        # A healthy subject's row stops changing once its window is full of passes (streaks are capped
        # and a pass keeps no summary): a steady fleet costs reads, not writes.
        summary = "" if e.outcome.status == Status.PASS else e.outcome.summary[:2000]
        row = (mem.history, mem.pass_streak, mem.unknown_streak, e.outcome.status, summary)
        if st is None:
            new_states.append(CheckState(check_name=e.check, subject_key=e.subject.key, history=row[0],
                                         pass_streak=row[1], unknown_streak=row[2], last_status=row[3],
                                         last_summary=row[4], updated_at=now))
        elif st[3:] != row:
            changed_states.append((st[0], *row))

        bad = e.outcome.status in (Status.FAIL, Status.WARN)
        cannot = (e.outcome.status == Status.UNKNOWN and not e.outcome.stale
                  and mem.unknown_streak >= lim.unknown_after)
        if f is None and (hysteresis.raising(mem, n=n) and bad or cannot):
            f = recent.pop((e.check, e.subject.key), None)
            if f is not None:  # back soon after resolving: the same finding again, maybe flapping
                f.state, f.resolved_at, f.reopened = FindingState.OPEN, None, f.reopened + 1
                f.flapping = f.flapping or f.reopened >= lim.flap_after
                f.acknowledged_at, f.acknowledged_by_name, f.acknowledge_reason = None, "", ""
                f.worst_score = -1.0
            else:
                f = Finding(check_name=e.check, subject_kind=e.subject.kind, subject_key=e.subject.key,
                            node_id=e.subject.node_id, module_id=e.subject.module_id, tier_id=e.subject.tier_id,
                            first_seen=now, worst_score=-1.0)
            f.status = Status.UNKNOWN if cannot and not bad else Status.FAIL
            f.severity = e.severity if bad else Severity.WARNING
            f.summary, f.evidence, f.last_seen = e.outcome.summary, e.outcome.evidence, now
            f.worst_score = e.outcome.score
            if f.status == Status.UNKNOWN:
                f.summary = f"cannot evaluate for {mem.unknown_streak} sweeps: {e.outcome.summary}"
            services.finding_open(finding=f)
            active[(e.check, e.subject.key)] = f
            opened.append(f)
            continue
        if f is None:
            continue
        changed = False
        if bad:
            if "quiet_since" in f.evidence:  # failing again: no longer quiet
                f.evidence = {k: v for k, v in f.evidence.items() if k != "quiet_since"}
                changed = True
            f.last_seen = now
            seen_last.append(f.pk)
            if f.status == Status.UNKNOWN:
                f.status, changed = Status.FAIL, True
            if SEVERITY_ORDER[e.severity] < SEVERITY_ORDER[f.severity]:
                f.severity, changed = e.severity, True
                escalated.append(f)
            if e.outcome.score > f.worst_score:
                f.summary, f.evidence, f.worst_score = e.outcome.summary, e.outcome.evidence, e.outcome.score
                changed = True
        if hysteresis.clearing(mem, k=needed) and e.check == BREAKER:
            # A tripped breaker never resets by itself, however quiet the tier becomes: an admin
            # looks at what tripped it and resets it (services.breaker_reset). It says since when it is quiet.
            if "quiet_since" not in f.evidence:
                f.evidence = {**f.evidence, "quiet_since": now.isoformat()}
                changed = True
        elif hysteresis.clearing(mem, k=needed):
            f.state, f.resolved_at, changed = FindingState.RESOLVED, now, True
            if f.holds:
                f.release_after = now + dt.timedelta(seconds=lim.cooldown_s)
            resolved.append(f)
        if changed:
            dirty[f.pk] = f
    if seen_last:
        Finding.objects.filter(pk__in=seen_last).update(last_seen=now)
    for f in dirty.values():  # few: a worse evaluation, an escalation, a resolution
        f.save(update_fields=["last_seen", "status", "severity", "summary", "evidence", "worst_score", "state",
                              "resolved_at", "release_after"])
    CheckState.objects.bulk_create(new_states, batch_size=5000)
    if changed_states:
        cols = list(zip(*changed_states, strict=True))
        with connection.cursor() as cur:
            cur.execute(
                "UPDATE health_checkstate s SET history = u.h, pass_streak = u.p, unknown_streak = u.u, "
                "last_status = u.st, last_summary = u.sm, updated_at = %s "
                "FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %s::text[], %s::text[]) "
                "AS u(id, h, p, u, st, sm) WHERE s.id = u.id", [now, *[list(c) for c in cols]])
    return {"opened": opened, "resolved": resolved, "escalated": escalated}


def sweep(*, now: dt.datetime | None = None) -> dict[str, Any]:
    """One sweep of the fleet. Returns counts (evaluations, findings opened/resolved, actions)."""
    now = now or timezone.now()
    lim = limits()
    configs = selectors.check_configs()
    evals, errors = evaluate(now=now, configs=configs, lim=lim)
    evals += _checker_evaluations(errors)
    with transaction.atomic():
        changes = _apply(evals, configs, now, lim)
        breakers = actions.breaker_evaluations(evals=evals, configs=configs, lim=lim, now=now)
        changes_b = _apply(breakers, configs, now, lim)
        for event, key in (("open", "opened"), ("escalate", "escalated"), ("resolve", "resolved")):
            services.findings_announce(findings=changes[key] + changes_b[key], event=event, now=now)
    done = actions.act(configs=configs, lim=lim, now=now)
    released = actions.release_due(now=now)
    with transaction.atomic():  # after the actions: what the budget held back in this sweep too
        changes_h = _apply(actions.budget_evaluations(now=now), configs, now, lim)
        for event, key in (("open", "opened"), ("escalate", "escalated"), ("resolve", "resolved")):
            services.findings_announce(findings=changes_h[key], event=event, now=now)
    opened = changes["opened"] + changes_b["opened"] + changes_h["opened"]
    resolved = changes["resolved"] + changes_b["resolved"] + changes_h["resolved"]
    overdue = stuck.sweep(now=now)
    return {"evaluations": len(evals), "opened": [f.pk for f in opened],
            "resolved": [f.pk for f in resolved], "actions": done,
            "released": released, "errors": {k: len(v) for k, v in errors.items() if v}, "stuck": overdue}
