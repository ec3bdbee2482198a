"""Tier scaling and the autoscaler.

- ``tier_scale`` sets a tier's desired active node count: scale-up activates
  standby nodes at once (taking back nodes its own scale-down is still draining
  first); scale-down drains the least busy nodes and completes when each is back
  in standby, empty. The capacity guard checks a scale-down as a whole: it may not
  take the tier below ``max(min_active_nodes, need)``, unless an operator
  overrides with a reason. At most one request runs per tier.
- ``autoscaler_run`` evaluates a tier's policy (the pure ``apps.operations.autoscaler``)
  and acts through ``tier_scale``, so the guard refuses its scale-downs too; a
  scale-down takes no more drains than the remediation budget grants
  (``apps.operations.budget``); every decision is stored with its inputs and explanation.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import actor_identity, audit_record, diff, snapshot
from apps.common.errors import Conflict
from apps.inventory import scopes
from apps.inventory.choices import NodeState
from apps.inventory.models import Tier
from apps.operations import autoscaler, budget, lifecycle, selectors, windows
from apps.operations.choices import (
    ACTIVE_DRAIN_STATES,
    AfterDrain,
    DeadlineAction,
    DecisionAction,
    Owner,
    ScaleState,
    WindowActor,
)
from apps.operations.lifecycle import SYSTEM, Result
from apps.operations.models import AutoscalerDecision, AutoscalerPolicy, Drain, ScaleRequest

# ---- tier scaling ----------------------------------------------------------------------------


def _scale_step(sr: ScaleRequest, *, actor: Any, source: str, drain_deadline_s: int) -> None:
    tier = sr.tier
    active = selectors.tier_active_count(tier=tier)
    notes: list[str] = []
    if sr.desired > active:
        need = sr.desired - active
        # Take back nodes still being drained by a scale-down first: they are warm.
        reclaimable = list(Drain.objects.filter(
            node__tier=tier, state__in=ACTIVE_DRAIN_STATES, scale_request__isnull=False, after=AfterDrain.STANDBY,
        ).order_by("created_at").values_list("pk", "node_id"))
        for drain_id, node_id in reclaimable:
            if need <= 0:
                break
            node = lifecycle.lock_node(node_id)
            drain = Drain.objects.select_for_update(of=("self",)).get(pk=drain_id)
            if not drain.is_active or node.state not in (NodeState.DRAINING, NodeState.DRAINED):
                continue
            lifecycle.hold_reclaim(node=node, hold=drain, actor=actor, reason=f"reclaimed by {sr}", related=sr,
                                   source=source)
            sr.reclaimed = [*sr.reclaimed, node.hostname]
            need -= 1
        if need > 0:
            chosen, skipped = selectors.scale_up_candidates(tier=tier, count=need)
            for node in chosen:
                lifecycle.node_activate(node=node.pk, actor=actor, reason=f"activated by {sr}",
                                        related=sr, source=source, owner=sr.owner)
                sr.activated = [*sr.activated, node.hostname]
            if len(chosen) < need:
                notes.append(f"only {len(chosen)} of {need} standby nodes could be activated")
                notes += [f"{host}: {why}" for host, why in sorted(skipped.items())[:20]]
        sr.note = "; ".join(notes)
        sr.state, sr.finished_at = ScaleState.COMPLETED, timezone.now()
        sr.save()
    elif sr.desired < active:
        # The guard checked the whole scale-down in tier_scale: the drains are not checked one by one.
        for node in selectors.scale_down_candidates(tier=tier, count=active - sr.desired):
            lifecycle.node_drain(node=node, owner=sr.owner, reason=f"scale-down by {sr}: {sr.reason}".strip(": "),
                                 actor=actor, deadline_s=drain_deadline_s, deadline_action=DeadlineAction.ALERT,
                                 after=AfterDrain.STANDBY, scale_request=sr, guarded=False, source=source)
        sr.save()
    else:
        sr.state, sr.finished_at = ScaleState.COMPLETED, timezone.now()
        sr.save()


@transaction.atomic
def tier_scale(*, tier: Tier, desired: int, actor: Any, owner: str = Owner.OPERATOR, reason: str = "",
               supersede: bool = False, drain_deadline_s: int = 900, override: bool = False,
               source: str = Source.API) -> Result:
    """Set ``tier``'s desired active node count. The same desired count while a request runs returns
    it; another count is a conflict unless ``supersede``. A scale-down below the tier's floor is
    refused (409 with the numbers) unless an operator overrides with a reason."""
    tier = Tier.objects.select_for_update().get(pk=tier.pk)
    if not tier.min_active_nodes <= desired <= tier.max_active_nodes:
        raise ValidationError({"desired": f"must be between the tier's minimum {tier.min_active_nodes} and "
                                          f"maximum {tier.max_active_nodes}"})
    running = ScaleRequest.objects.select_for_update().filter(tier=tier, state=ScaleState.RUNNING).first()
    if running is not None:
        if running.desired == desired:
            return Result(running, False)
        if not supersede:
            raise Conflict(f"{tier} is already scaling to {running.desired} ({running}, by "
                           f"{running.created_by_name}); wait for it or pass supersede=true")
    active = selectors.tier_active_count(tier=tier)
    if running is None and active == desired:
        # Already there (e.g. the same scale-up a moment ago): nothing to do, nothing to record.
        last = ScaleRequest.objects.filter(tier=tier).first()
        if last is not None and last.desired == desired:
            return Result(last, False)
    numbers: dict[str, Any] = {}
    if desired < active:
        numbers = lifecycle.capacity_guard(tier=tier, owner=owner, override=override, reason=reason,
                                           nodes=active - desired)
    if running is not None:
        running.state, running.finished_at = ScaleState.SUPERSEDED, timezone.now()
        running.save(update_fields=["state", "finished_at"])
    user, name = actor_identity(actor)
    sr = ScaleRequest.objects.create(tier=tier, desired=desired, from_active=active, owner=owner, reason=reason,
                                     created_by=user, created_by_name=name)
    audit_record(actor=actor, action="tier.scale", target=tier, reason=reason, source=source,
                 changes={"active": [active, desired], **numbers}, related=sr)
    _scale_step(sr, actor=actor, source=source, drain_deadline_s=drain_deadline_s)
    return Result(sr, True)


@transaction.atomic
def scale_advance(*, scale_request_id: int) -> str:
    """Complete a scale-down once each node it drained is back in standby (or
    was taken back). Superseded requests leave their drains to the next request."""
    sr = ScaleRequest.objects.select_for_update(skip_locked=True).filter(pk=scale_request_id).first()
    if sr is None or sr.state != ScaleState.RUNNING:
        return "skipped"
    if Drain.objects.filter(scale_request=sr, state__in=ACTIVE_DRAIN_STATES).exists():
        return "waiting"
    sr.state, sr.finished_at = ScaleState.COMPLETED, timezone.now()
    sr.save(update_fields=["state", "finished_at"])
    audit_record(actor=SYSTEM, action="tier.scale_completed", target=sr.tier, source=Source.SYSTEM,
                 reason=f"released {', '.join(selectors.scale_released(sr=sr)) or 'no node'}", related=sr)
    return "completed"


# ---- the autoscaler --------------------------------------------------------------------------


def _params(policy: AutoscalerPolicy) -> autoscaler.Params:
    lo, hi = policy.bounds()
    return autoscaler.Params(target_per_node=policy.target_queue_per_node, tolerance=policy.tolerance,
                             up_window_s=policy.scale_up_window_s, down_window_s=policy.scale_down_window_s,
                             max_step=policy.max_step, scale_up_percent=policy.scale_up_percent,
                             scale_down_percent=policy.scale_down_percent, down_headroom=policy.scale_down_headroom,
                             cooldown_s=policy.cooldown_s, min_nodes=lo, max_nodes=hi)


# What makes an evaluation the same decision as the one before it (the queue depth and the inputs
# may differ: the row keeps the latest); a skip also by its reason. A scale is always a row of its own.
_SAME = ("action", "current", "raw_desired", "recommendation", "desired", "dry_run", "target_queue_per_node")
_REPEATABLE = {DecisionAction.NONE, DecisionAction.DRY_RUN, DecisionAction.SKIPPED}


def _record(**fields: Any) -> AutoscalerDecision:
    """Record an evaluation: the tier's previous decision extended when this one is the same, else a
    new row. Called under the policy's row lock, so two evaluations of a tier never interleave."""
    now = fields["time"]
    if fields["action"] in _REPEATABLE and fields.get("scale_request") is None:
        prev = AutoscalerDecision.objects.filter(tier=fields["tier"], time__lte=now).order_by("-time", "-id").first()
        same = (prev is not None and prev.scale_request_id is None and (prev.until or prev.time) <= now
                and all(getattr(prev, k) == fields.get(k) for k in _SAME)
                and (fields["action"] != DecisionAction.SKIPPED or prev.explanation == fields["explanation"]))
        if prev is not None and same:
            prev.evaluations += 1
            prev.until = now
            prev.queue_depth = fields.get("queue_depth")
            prev.explanation = fields["explanation"]
            prev.inputs = fields.get("inputs", {})
            prev.save(update_fields=["evaluations", "until", "queue_depth", "explanation", "inputs"])
            return prev
    return AutoscalerDecision.objects.create(**fields)


def autoscaler_run(*, tier: Tier, now: dt.datetime | None = None) -> AutoscalerDecision | None:
    """Evaluate ``tier``'s policy once and act on it (or only record, in dry run).
    One evaluation per tier at a time: a concurrent run is skipped (None). An evaluation the remediation
    budget did not hold back clears what it held back on the tier before."""
    now = now or timezone.now()
    decision = _autoscaler_evaluate(tier=tier, now=now)
    if decision is not None and not decision.inputs.get("budget"):
        budget.held_back_clear(actor=WindowActor.SCALE_DOWN, tier_ids=[tier.pk], now=now)
    return decision


def _autoscaler_evaluate(*, tier: Tier, now: dt.datetime) -> AutoscalerDecision | None:
    with transaction.atomic():
        policy = (AutoscalerPolicy.objects.select_for_update(skip_locked=True, of=("self",)).select_related("tier")
                  .filter(tier=tier).first())
        if policy is None or not policy.enabled:
            return None
        current = selectors.tier_active_count(tier=policy.tier)
        base: dict[str, Any] = {"tier": policy.tier, "time": now, "current": current,
                                "target_queue_per_node": policy.target_queue_per_node, "dry_run": policy.dry_run}
        queue = selectors.tier_queue_depth(tier=policy.tier, now=now)
        if queue is None:
            return _record(
                **base, desired=current, action=DecisionAction.SKIPPED,
                explanation="no queue depth from the gateway in the last "
                            f"{selectors.QUEUE_FRESH_S}s: keep {current}")
        running = ScaleRequest.objects.filter(tier=policy.tier, state=ScaleState.RUNNING).first()
        if running is not None and running.owner != Owner.AUTOSCALER:
            return _record(
                **base, queue_depth=queue, desired=current, action=DecisionAction.SKIPPED,
                explanation=f"{running} by {running.created_by_name} is in progress: the autoscaler waits")
        window = max(policy.scale_up_window_s, policy.scale_down_window_s)
        # a decision row stands for every evaluation from its time to its until, all of the same
        # recommendation: it is in the window if its last evaluation is
        since = now - dt.timedelta(seconds=window)
        runs = AutoscalerDecision.objects.filter(
            Q(time__gte=since) | Q(until__gte=since), tier=policy.tier, time__lte=now,
            recommendation__isnull=False).values_list("time", "until", "recommendation")
        history = [((min(until or t, now) - now).total_seconds(), r) for t, until, r in runs if r is not None]
        last = (policy.last_scaled_at - now).total_seconds() if policy.last_scaled_at else None
        d = autoscaler.decide(_params(policy), current=current, queue_depth=queue, now=0.0,
                              history=history, last_scale_at=last)
        verdict = windows.verdict(actor=WindowActor.SCALE_DOWN, scope=windows.Scope.of_tier(policy.tier), at=now)
        base["window"] = verdict.why if verdict.governing or verdict.freeze else ""
        inputs: dict[str, Any] = {"queue_depth": queue, "current": current, "ratio": d.ratio, "history": len(history),
                  "bounds": list(policy.bounds()), "tolerance": policy.tolerance,
                  "up_window_s": policy.scale_up_window_s, "down_window_s": policy.scale_down_window_s,
                  "max_step": policy.max_step, "scale_up_percent": policy.scale_up_percent,
                  "scale_down_percent": policy.scale_down_percent, "headroom": policy.scale_down_headroom,
                  "cooldown_s": policy.cooldown_s,
                  "stabilized": d.stabilized}
        action = DecisionAction.NONE
        sr = None
        if d.desired < current and not verdict.allowed:
            return _record(
                **base, queue_depth=queue, raw_desired=d.raw, recommendation=d.recommendation, desired=current,
                action=DecisionAction.SKIPPED, inputs=inputs,
                explanation=f"{d.explanation()}; not applied: scale-down {verdict.why}")
        desired, explanation = d.desired, d.explanation()
        if desired < current and not policy.dry_run:
            # The scale-down's drains are automated holds: the remediation budget decides how many it may
            # take now (its lock is held until the drains are taken, in this transaction).
            spend = budget.ask(actor=WindowActor.SCALE_DOWN, tier=policy.tier, kind=budget.NODES,
                               asked=current - desired, now=now)
            if not spend.allowed:
                wanted = f"scale down {current} -> {desired}"
                budget.held_back_record(verdict=spend, tier=policy.tier, wanted=wanted, now=now)
                inputs["budget"] = {"held_back": spend.held_back, "asked": spend.asked, "granted": spend.granted,
                                    "limit": spend.limit, "why": spend.why}
                if not spend.granted:
                    return _record(
                        **base, queue_depth=queue, raw_desired=d.raw, recommendation=d.recommendation,
                        desired=current, action=DecisionAction.SKIPPED, inputs=inputs,
                        explanation=f"{explanation}; not applied: remediation budget: {spend.why}")
                desired = current - spend.granted
                explanation += f"; remediation budget: {spend.why}: scale down {current} -> {desired} only"
        if desired != current:
            if policy.dry_run:
                action = DecisionAction.DRY_RUN
            else:
                try:
                    result = tier_scale(tier=policy.tier, desired=desired, actor=SYSTEM + ":autoscaler",
                                        owner=Owner.AUTOSCALER, reason=explanation, supersede=True,
                                        drain_deadline_s=policy.drain_deadline_s, source=Source.SYSTEM)
                except (Conflict, ValidationError) as exc:  # the capacity guard's refusal among them
                    text = exc.detail if isinstance(exc, Conflict) else "; ".join(exc.messages)
                    return _record(
                        **base, queue_depth=queue, raw_desired=d.raw, recommendation=d.recommendation,
                        desired=current, action=DecisionAction.SKIPPED, inputs=inputs,
                        explanation=f"{explanation}; not applied: {text}")
                sr = result.obj
                action = DecisionAction.SCALE_UP if desired > current else DecisionAction.SCALE_DOWN
                policy.last_scaled_at = now
                policy.save(update_fields=["last_scaled_at"])
        return _record(
            **base, queue_depth=queue, raw_desired=d.raw, recommendation=d.recommendation, desired=desired,
            action=action, explanation=explanation, inputs=inputs, scale_request=sr)


def autoscaler_run_all(*, now: dt.datetime | None = None) -> list[AutoscalerDecision]:
    out = []
    for tier in Tier.objects.filter(autoscaler_policy__enabled=True):
        decision = autoscaler_run(tier=tier, now=now)
        if decision is not None:
            out.append(decision)
    return out



@transaction.atomic
def policy_save(*, policy: AutoscalerPolicy, actor: Any, source: str = Source.API, created: bool = False,
                before: dict[str, Any] | None = None, reason: str = "") -> AutoscalerPolicy:
    scopes.require_tier(actor=actor, tier=policy.tier)
    if before and before.get("tier") not in (None, policy.tier_id):
        scopes.require_tier(actor=actor, tier=Tier.objects.get(pk=before["tier"]))
    policy.full_clean()
    policy.save()
    audit_record(actor=actor, action="autoscaler_policy.create" if created else "autoscaler_policy.update",
                 target=policy, source=source, reason=reason, changes=diff(before, snapshot(policy)))
    return policy


@transaction.atomic
def policy_delete(*, policy: AutoscalerPolicy, actor: Any, source: str = Source.API) -> None:
    scopes.require_tier(actor=actor, tier=policy.tier)
    before = snapshot(policy)
    pk, text = str(policy.pk), str(policy)
    policy.delete()
    audit_record(actor=actor, action="autoscaler_policy.delete", target_type="autoscalerpolicy", target_id=pk,
                 target_repr=text, source=source, changes=diff(before, None))

