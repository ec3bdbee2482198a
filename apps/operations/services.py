"""Fleet operations: writes. Each runs in one transaction, serialises on the
node / module / tier row (``select_for_update``), moves states with
compare-and-set, writes one audit record linked to the work it started, and
queues the command for the node agent in the same transaction (the agent sees
it when the change commits, never before and never without it).

Rules:
- one active hold (cordon or drain) per node, one quarantine per module, one
  running scale request per tier;
- the same action by the same owner again is a no-op that returns the existing
  hold (``changed=False``); a different owner's hold is a conflict (409) unless an
  operator overrides it with a reason (audited as ``*.override``);
- a drain completes only on a node report, newer than the drain's start, with
  zero requests in flight; at the deadline it stays and alerts, or is forced, as
  the drain says; scale-down drains are never forced and return the node to
  standby only when it is empty.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.common.errors import Conflict
from apps.inventory.choices import NODE_TRANSITIONS, ModuleState, NodeState
from apps.inventory.models import Module, Node, Tier
from apps.operations import autoscaler, selectors
from apps.operations.choices import (
    ACTIVE_DRAIN_STATES,
    AfterDrain,
    CommandKind,
    DeadlineAction,
    DecisionAction,
    DrainKind,
    DrainState,
    Owner,
    ScaleState,
)
from apps.operations.models import (
    AutoscalerDecision,
    AutoscalerPolicy,
    Drain,
    IdempotencyRecord,
    Quarantine,
    ScaleRequest,
)

logger = logging.getLogger(__name__)

SYSTEM = "operations"


@dataclass(frozen=True)
class Result:
    """What an action did: the hold/request it concerns and whether anything changed."""

    obj: Any
    changed: bool


# ---- helpers ---------------------------------------------------------------------------------


def _name(actor: Any) -> str:
    if getattr(actor, "is_authenticated", False):
        return str(actor.get_username())[:150]
    return str(actor or "system")[:150]


def _user(actor: Any) -> Any:
    return actor if getattr(actor, "is_authenticated", False) else None


def _send(node: Node, kind: str, args: dict[str, Any], actor: Any, reason: str, source: str) -> None:
    from apps.telemetry.services import node_command_send

    node_command_send(node=node, kind=kind, args=args, actor=actor, reason=reason, source=source)


def _lock_node(node: Node | int) -> Node:
    pk = node if isinstance(node, int) else node.pk
    return Node.objects.select_for_update(of=("self",)).select_related("tier", "rack").get(pk=pk)


def _move(node: Node, to: str, *, actor: Any, reason: str, source: str, related: Any = None,
          action: str = "") -> None:
    """Compare-and-set ``node`` from its current state to ``to`` (state machine checked)."""
    old = node.state
    if old == to:
        return
    if to not in NODE_TRANSITIONS.get(old, set()):
        raise Conflict(f"node {node.hostname} cannot go from {old} to {to}")
    now = timezone.now()
    if Node.objects.filter(pk=node.pk, state=old).update(state=to, state_changed_at=now) != 1:
        raise Conflict(f"node {node.hostname} changed state concurrently; try again")
    node.state, node.state_changed_at = to, now
    audit_record(actor=actor, action=action or f"node.{to}", target=node, reason=reason, source=source,
                 changes={"state": [old, to]}, related=related)


def _active_drain(node: Node) -> Drain | None:
    return Drain.objects.select_for_update().filter(node=node, state__in=ACTIVE_DRAIN_STATES).first()


def _check_owner(hold: Drain | Quarantine, *, owner: str, override: bool, reason: str, actor: Any,
                 what: str) -> bool:
    """Raise 409 unless ``owner`` holds ``hold`` or an operator overrides with a reason."""
    if hold.owner == owner:
        return False
    if override and owner == Owner.OPERATOR and reason.strip():
        return True
    who = hold.created_by_name or hold.owner
    text = (f"{what} is held by {hold.get_owner_display().lower()} ({who}: {hold.reason!r}); "
            f"the {owner} owner cannot change or clear it")
    if owner == Owner.OPERATOR:
        text += "; an operator may override with override=true and a reason"
    raise Conflict(text)


def _release(drain: Drain, *, actor: Any, reason: str, overridden: bool = False) -> None:
    drain.state = DrainState.RELEASED
    drain.released_at = timezone.now()
    drain.released_by_name = _name(actor)
    drain.release_reason = reason
    drain.overridden = overridden
    drain.save(update_fields=["state", "released_at", "released_by_name", "release_reason", "overridden"])


def _deadline(deadline_s: int | None, now: dt.datetime) -> dt.datetime | None:
    return now + dt.timedelta(seconds=deadline_s) if deadline_s else None


# ---- cordon, drain, uncordon, maintenance ----------------------------------------------------


@transaction.atomic
def node_cordon(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                resume_after: dt.datetime | None = None, source: str = Source.API) -> Result:
    """Stop new work reaching ``node``; requests in flight finish."""
    if not reason.strip():
        raise ValidationError({"reason": "say why the node is cordoned"})
    node = _lock_node(node)
    hold = _active_drain(node)
    if hold is not None:
        if hold.owner == owner:
            return Result(hold, False)
        _check_owner(hold, owner=owner, override=False, reason=reason, actor=actor, what=f"node {node.hostname}")
    if node.state != NodeState.ACTIVE:
        raise Conflict(f"node {node.hostname} is {node.state}; only an active node can be cordoned")
    now = timezone.now()
    hold = Drain.objects.create(node=node, kind=DrainKind.CORDON, owner=owner, state=DrainState.CORDONED,
                                reason=reason, created_by=_user(actor), created_by_name=_name(actor),
                                started_at=now, resume_after=resume_after, previous_state=node.state)
    _move(node, NodeState.CORDONED, actor=actor, reason=reason, source=source, related=hold, action="node.cordon")
    _send(node, CommandKind.CORDON, {"drain": hold.pk, "owner": owner}, actor, reason, source)
    return Result(hold, True)


@transaction.atomic
def node_drain(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
               deadline_s: int | None = 900, deadline_action: str = DeadlineAction.ALERT,
               resume_after: dt.datetime | None = None, after: str = AfterDrain.STAY,
               scale_request: ScaleRequest | None = None, source: str = Source.API) -> Result:
    """Cordon ``node``, then wait until it reports zero requests in flight
    (``drains_advance`` finishes it). The same owner draining again gets the
    existing drain back; the owner's own cordon becomes this drain."""
    if not reason.strip():
        raise ValidationError({"reason": "say why the node is drained"})
    if deadline_action not in DeadlineAction.values:
        raise ValidationError({"deadline_action": f"one of {', '.join(DeadlineAction.values)}"})
    if after == AfterDrain.STANDBY and deadline_action == DeadlineAction.FORCE:
        raise ValidationError({"deadline_action": "a drain that returns its node to standby is never forced"})
    node = _lock_node(node)
    now = timezone.now()
    hold = _active_drain(node)
    if hold is not None:
        if hold.owner != owner:
            _check_owner(hold, owner=owner, override=False, reason=reason, actor=actor,
                         what=f"node {node.hostname}")
        if hold.kind == DrainKind.DRAIN:
            return Result(hold, False)
        # The owner's cordon becomes a drain.
        hold.kind, hold.state, hold.reason = DrainKind.DRAIN, DrainState.DRAINING, reason
        hold.deadline, hold.deadline_action = _deadline(deadline_s, now), deadline_action
        hold.resume_after = resume_after or hold.resume_after
        hold.after, hold.scale_request = after, scale_request
        hold.save()
    else:
        if node.state not in (NodeState.ACTIVE, NodeState.CORDONED):
            raise Conflict(f"node {node.hostname} is {node.state}; only an active or cordoned node can be drained")
        hold = Drain.objects.create(
            node=node, kind=DrainKind.DRAIN, owner=owner, state=DrainState.DRAINING, reason=reason,
            created_by=_user(actor), created_by_name=_name(actor), started_at=now,
            deadline=_deadline(deadline_s, now), deadline_action=deadline_action, resume_after=resume_after,
            after=after, previous_state=node.state, scale_request=scale_request)
    _move(node, NodeState.DRAINING, actor=actor, reason=reason, source=source, related=hold, action="node.drain")
    _send(node, CommandKind.DRAIN, {"drain": hold.pk, "owner": owner,
                                    "deadline": hold.deadline.isoformat() if hold.deadline else None}, actor,
          reason, source)
    return Result(hold, True)


@transaction.atomic
def node_uncordon(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any, override: bool = False,
                  source: str = Source.API) -> Result:
    """Release the node's hold (cordon, drain or the drain under maintenance) and
    put it back to work. Another owner's hold: 409, or an audited operator override."""
    node = _lock_node(node)
    hold = _active_drain(node)
    if hold is None:
        if node.state == NodeState.ACTIVE:
            return Result(None, False)
        if node.state not in (NodeState.CORDONED, NodeState.DRAINING, NodeState.DRAINED, NodeState.MAINTENANCE):
            raise Conflict(f"node {node.hostname} is {node.state}; nothing to uncordon")
        _move(node, NodeState.ACTIVE, actor=actor, reason=reason, source=source, action="node.uncordon")
        _send(node, CommandKind.UNCORDON, {}, actor, reason, source)
        return Result(None, True)
    overridden = _check_owner(hold, owner=owner, override=override, reason=reason, actor=actor,
                              what=f"node {node.hostname}")
    _release(hold, actor=actor, reason=reason or "uncordoned", overridden=overridden)
    if overridden:
        audit_record(actor=actor, action="drain.override", target=node, reason=reason, source=source,
                     changes={"owner": [hold.owner, owner], "drain": [hold.pk, None]}, related=hold)
    _move(node, NodeState.ACTIVE, actor=actor, reason=reason, source=source, related=hold, action="node.uncordon")
    _send(node, CommandKind.UNCORDON, {"drain": hold.pk}, actor, reason, source)
    return Result(hold, True)


@transaction.atomic
def node_maintenance_enter(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                           deadline_s: int | None = 900, deadline_action: str = DeadlineAction.ALERT,
                           source: str = Source.API) -> Result:
    """A drained or standby node enters maintenance now; an active or cordoned
    node is drained first and enters maintenance when empty."""
    node = _lock_node(node)
    hold = _active_drain(node)
    if node.state == NodeState.STANDBY and hold is None:
        _move(node, NodeState.MAINTENANCE, actor=actor, reason=reason, source=source, action="node.maintenance")
        _send(node, CommandKind.MAINTENANCE, {}, actor, reason, source)
        return Result(None, True)
    if node.state == NodeState.MAINTENANCE:
        return Result(hold, False)
    if hold is not None and hold.owner != owner:
        _check_owner(hold, owner=owner, override=False, reason=reason, actor=actor, what=f"node {node.hostname}")
    if node.state == NodeState.DRAINED and hold is not None:
        _move(node, NodeState.MAINTENANCE, actor=actor, reason=reason, source=source, related=hold,
              action="node.maintenance")
        _send(node, CommandKind.MAINTENANCE, {"drain": hold.pk}, actor, reason, source)
        return Result(hold, True)
    if hold is not None and hold.kind == DrainKind.DRAIN:
        if hold.after != AfterDrain.MAINTENANCE:
            hold.after = AfterDrain.MAINTENANCE
            hold.save(update_fields=["after"])
            audit_record(actor=actor, action="drain.then_maintenance", target=node, reason=reason, source=source,
                         related=hold)
            return Result(hold, True)
        return Result(hold, False)
    return node_drain(node=node, owner=owner, reason=reason, actor=actor, deadline_s=deadline_s,
                      deadline_action=deadline_action, after=AfterDrain.MAINTENANCE, source=source)


@transaction.atomic
def node_maintenance_leave(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                           override: bool = False, source: str = Source.API) -> Result:
    """Back to work: to active if the node was drained into maintenance, to standby if it came from standby."""
    locked = _lock_node(node)
    if locked.state != NodeState.MAINTENANCE:
        raise Conflict(f"node {locked.hostname} is {locked.state}, not in maintenance")
    hold = _active_drain(locked)
    if hold is None:
        _move(locked, NodeState.STANDBY, actor=actor, reason=reason, source=source, action="node.standby")
        _send(locked, CommandKind.STANDBY, {}, actor, reason, source)
        return Result(None, True)
    return node_uncordon(node=locked, owner=owner, reason=reason, actor=actor, override=override, source=source)


# ---- module quarantine ----------------------------------------------------------------------


@transaction.atomic
def module_quarantine(*, module: Module, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                      source: str = Source.API) -> Result:
    if not reason.strip():
        raise ValidationError({"reason": "say why the module is quarantined"})
    module = Module.objects.select_for_update(of=("self",)).select_related("node").get(pk=module.pk)
    hold = Quarantine.objects.filter(module=module, released_at__isnull=True).first()
    if hold is not None:
        if hold.owner == owner:
            return Result(hold, False)
        _check_owner(hold, owner=owner, override=False, reason=reason, actor=actor, what=f"module {module.serial}")
    if module.state not in (ModuleState.HEALTHY, ModuleState.DEGRADED):
        raise Conflict(f"module {module.serial} is {module.state}; only a healthy or degraded module can be "
                       "quarantined")
    hold = Quarantine.objects.create(module=module, owner=owner, reason=reason, previous_state=module.state,
                                     created_by=_user(actor), created_by_name=_name(actor))
    before = module.state
    if Module.objects.filter(pk=module.pk, state=before).update(state=ModuleState.QUARANTINED) != 1:
        raise Conflict(f"module {module.serial} changed state concurrently; try again")
    module.state = ModuleState.QUARANTINED
    audit_record(actor=actor, action="module.quarantine", target=module, reason=reason, source=source,
                 changes={"state": [before, ModuleState.QUARANTINED]}, related=hold)
    if module.node is not None:
        _send(module.node, CommandKind.QUARANTINE_MODULE, {"serial": module.serial, "quarantine": hold.pk}, actor,
              reason, source)
    return Result(hold, True)


@transaction.atomic
def module_release(*, module: Module, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                   override: bool = False, source: str = Source.API) -> Result:
    module = Module.objects.select_for_update(of=("self",)).select_related("node").get(pk=module.pk)
    hold = Quarantine.objects.filter(module=module, released_at__isnull=True).first()
    if hold is None:
        if module.state == ModuleState.QUARANTINED:
            raise Conflict(f"module {module.serial} is quarantined outside fleet operations; change it in the "
                           "inventory")
        return Result(None, False)
    overridden = _check_owner(hold, owner=owner, override=override, reason=reason, actor=actor,
                              what=f"module {module.serial}")
    hold.released_at, hold.released_by_name = timezone.now(), _name(actor)
    hold.release_reason, hold.overridden = reason, overridden
    hold.save(update_fields=["released_at", "released_by_name", "release_reason", "overridden"])
    back = hold.previous_state or ModuleState.HEALTHY
    Module.objects.filter(pk=module.pk, state=ModuleState.QUARANTINED).update(state=back)
    audit_record(actor=actor, action="module.quarantine_override" if overridden else "module.release", target=module,
                 reason=reason, source=source, changes={"state": [module.state, back]}, related=hold)
    module.state = back
    if module.node is not None:
        _send(module.node, CommandKind.RELEASE_MODULE, {"serial": module.serial, "quarantine": hold.pk}, actor,
              reason, source)
    return Result(hold, True)


# ---- the drain controller --------------------------------------------------------------------


def _complete(drain: Drain, node: Node, *, forced: bool, in_flight: int | None, now: dt.datetime) -> None:
    drain.state, drain.drained_at, drain.forced = DrainState.DRAINED, now, forced
    if forced:
        drain.in_flight_at_force = in_flight
    drain.save(update_fields=["state", "drained_at", "forced", "in_flight_at_force"])
    text = (f"deadline passed with {in_flight} in flight: forced" if forced else "node reports zero in flight")
    _move(node, NodeState.DRAINED, actor=SYSTEM, reason=text, source=Source.SYSTEM, related=drain,
          action="drain.forced" if forced else "drain.completed")
    if drain.after == AfterDrain.MAINTENANCE:
        _move(node, NodeState.MAINTENANCE, actor=SYSTEM, reason=drain.reason, source=Source.SYSTEM, related=drain,
              action="node.maintenance")
        _send(node, CommandKind.MAINTENANCE, {"drain": drain.pk}, SYSTEM, drain.reason, Source.SYSTEM)
    elif drain.after == AfterDrain.STANDBY and not forced and in_flight == 0:
        _release(drain, actor=SYSTEM, reason="drained empty: back to standby")
        _move(node, NodeState.STANDBY, actor=SYSTEM, reason=f"released by {drain.scale_request or 'scale-down'}",
              source=Source.SYSTEM, related=drain.scale_request or drain, action="node.standby")
        _send(node, CommandKind.STANDBY, {"drain": drain.pk}, SYSTEM, drain.reason, Source.SYSTEM)


def drain_advance(*, drain_id: int, now: dt.datetime | None = None) -> str:
    """One step of one drain; safe to run twice and from many workers (a drain
    another worker holds is skipped). Returns what happened, in words."""
    now = now or timezone.now()
    node_id = Drain.objects.filter(pk=drain_id).values_list("node_id", flat=True).first()
    if node_id is None:
        return "skipped"
    with transaction.atomic():
        # Lock order everywhere: node, then its drain. A node another worker or an
        # operator holds right now is skipped; the next pass comes in seconds.
        node = (Node.objects.select_for_update(skip_locked=True, of=("self",)).select_related("tier", "rack")
                .filter(pk=node_id).first())
        if node is None:
            return "busy"
        drain = Drain.objects.select_for_update(of=("self",)).select_related("scale_request").filter(
            pk=drain_id).first()
        if drain is None or not drain.is_active:
            return "skipped"
        if drain.resume_after is not None and drain.resume_after <= now:
            _release(drain, actor=SYSTEM, reason="resume-after time reached")
            if node.state in (NodeState.CORDONED, NodeState.DRAINING, NodeState.DRAINED, NodeState.MAINTENANCE):
                _move(node, NodeState.ACTIVE, actor=SYSTEM, reason="resume-after time reached",
                      source=Source.SYSTEM, related=drain, action="node.uncordon")
                _send(node, CommandKind.UNCORDON, {"drain": drain.pk}, SYSTEM, "resume-after", Source.SYSTEM)
            return "resumed"
        if drain.state != DrainState.DRAINING:
            return "holding"
        if node.state != NodeState.DRAINING:
            return f"node is {node.state}"
        status = selectors.node_report(node_id=node.pk)
        fresh = status is not None and status.time >= drain.started_at
        in_flight = status.in_flight if status is not None else None
        if fresh and in_flight == 0:
            _complete(drain, node, forced=False, in_flight=0, now=now)
            return "drained"
        if drain.deadline is not None and drain.deadline <= now:
            if drain.deadline_action == DeadlineAction.FORCE:
                _complete(drain, node, forced=True, in_flight=in_flight, now=now)
                return "forced"
            if drain.alerted_at is None:
                drain.alerted_at = now
                drain.save(update_fields=["alerted_at"])
                audit_record(actor=SYSTEM, action="drain.deadline_passed", target=node, source=Source.SYSTEM,
                             reason=selectors.drain_waiting_for(drain, now=now), related=drain)
                logger.warning("drain %s of %s passed its deadline: %s", drain.pk, node.hostname,
                               selectors.drain_waiting_for(drain, now=now))
                return "alerted"
        return "waiting"


def drains_advance(*, now: dt.datetime | None = None) -> dict[str, int]:
    """Advance every active drain (the periodic task); each drain in its own transaction,
    so a worker killed half-way leaves every drain consistent and the next run goes on."""
    counts: dict[str, int] = {}
    ids = list(Drain.objects.filter(Q(state=DrainState.DRAINING)
                                    | Q(state__in=ACTIVE_DRAIN_STATES, resume_after__isnull=False))
               .order_by("pk").values_list("pk", flat=True))
    for pk in ids:
        outcome = drain_advance(drain_id=pk, now=now)
        counts[outcome] = counts.get(outcome, 0) + 1
    for sr_id in ScaleRequest.objects.filter(state=ScaleState.RUNNING).values_list("pk", flat=True):
        scale_advance(scale_request_id=sr_id)
    return counts


# ---- tier scaling ----------------------------------------------------------------------------


def _activate(node: Node, *, sr: ScaleRequest, actor: Any, source: str) -> None:
    _move(node, NodeState.ACTIVE, actor=actor, reason=f"activated by {sr}", source=source, related=sr,
          action="node.activate")
    _send(node, CommandKind.ACTIVATE, {"scale_request": sr.pk}, actor, sr.reason, source)


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
            node = _lock_node(node_id)
            drain = Drain.objects.select_for_update(of=("self",)).get(pk=drain_id)
            if not drain.is_active or node.state not in (NodeState.DRAINING, NodeState.DRAINED):
                continue
            _release(drain, actor=actor, reason=f"reclaimed by {sr}")
            _move(node, NodeState.ACTIVE, actor=actor, reason=f"reclaimed by {sr}", source=source, related=sr,
                  action="node.uncordon")
            _send(node, CommandKind.UNCORDON, {"scale_request": sr.pk}, actor, sr.reason, source)
            sr.reclaimed = [*sr.reclaimed, node.hostname]
            need -= 1
        if need > 0:
            chosen, skipped = selectors.scale_up_candidates(tier=tier, count=need)
            for node in chosen:
                _activate(_lock_node(node.pk), sr=sr, actor=actor, source=source)
                sr.activated = [*sr.activated, node.hostname]
            if len(chosen) < need:
                notes.append(f"only {len(chosen)} of {need} standby nodes could be activated")
                notes += [f"{host}: {why}" for host, why in sorted(skipped.items())[:20]]
        sr.note = "; ".join(notes)
        sr.state, sr.finished_at = ScaleState.COMPLETED, timezone.now()
        sr.save()
    elif sr.desired < active:
        for node in selectors.scale_down_candidates(tier=tier, count=active - sr.desired):
            node_drain(node=node, owner=sr.owner, reason=f"scale-down by {sr}: {sr.reason}".strip(": "),
                       actor=actor, deadline_s=drain_deadline_s, deadline_action=DeadlineAction.ALERT,
                       after=AfterDrain.STANDBY, scale_request=sr, source=source)
        sr.save()
    else:
        sr.state, sr.finished_at = ScaleState.COMPLETED, timezone.now()
        sr.save()


@transaction.atomic
def tier_scale(*, tier: Tier, desired: int, actor: Any, owner: str = Owner.OPERATOR, reason: str = "",
               supersede: bool = False, drain_deadline_s: int = 900, source: str = Source.API) -> Result:
    """Set ``tier``'s desired active node count. The same desired count while a
    request runs returns it; another count is a conflict unless ``supersede``."""
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
        running.state, running.finished_at = ScaleState.SUPERSEDED, timezone.now()
        running.save(update_fields=["state", "finished_at"])
    active = selectors.tier_active_count(tier=tier)
    if running is None and active == desired:
        # Already there (e.g. the same scale-up a moment ago): nothing to do, nothing to record.
        last = ScaleRequest.objects.filter(tier=tier).first()
        if last is not None and last.desired == desired:
            return Result(last, False)
    sr = ScaleRequest.objects.create(tier=tier, desired=desired, from_active=active, owner=owner, reason=reason,
                                     created_by=_user(actor), created_by_name=_name(actor))
    audit_record(actor=actor, action="tier.scale", target=tier, reason=reason, source=source,
                 changes={"active": [active, desired]}, related=sr)
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


def autoscaler_run(*, tier: Tier, now: dt.datetime | None = None) -> AutoscalerDecision | None:
    """Evaluate ``tier``'s policy once and act on it (or only record, in dry run).
    One evaluation per tier at a time: a concurrent run is skipped (None)."""
    now = now or timezone.now()
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
            return AutoscalerDecision.objects.create(
                **base, desired=current, action=DecisionAction.SKIPPED,
                explanation="no queue depth from the gateway in the last "
                            f"{selectors.QUEUE_FRESH_S}s: keep {current}")
        running = ScaleRequest.objects.filter(tier=policy.tier, state=ScaleState.RUNNING).first()
        if running is not None and running.owner != Owner.AUTOSCALER:
            return AutoscalerDecision.objects.create(
                **base, queue_depth=queue, desired=current, action=DecisionAction.SKIPPED,
                explanation=f"{running} by {running.created_by_name} is in progress: the autoscaler waits")
        window = max(policy.scale_up_window_s, policy.scale_down_window_s)
        history = [((t - now).total_seconds(), r) for t, r in AutoscalerDecision.objects.filter(
            tier=policy.tier, time__gte=now - dt.timedelta(seconds=window), time__lte=now,
            recommendation__isnull=False).values_list("time", "recommendation") if r is not None]
        last = (policy.last_scaled_at - now).total_seconds() if policy.last_scaled_at else None
        d = autoscaler.decide(_params(policy), current=current, queue_depth=queue, now=0.0,
                              history=history, last_scale_at=last)
        inputs = {"queue_depth": queue, "current": current, "ratio": d.ratio, "history": len(history),
                  "bounds": list(policy.bounds()), "tolerance": policy.tolerance,
                  "up_window_s": policy.scale_up_window_s, "down_window_s": policy.scale_down_window_s,
                  "max_step": policy.max_step, "scale_up_percent": policy.scale_up_percent,
                  "scale_down_percent": policy.scale_down_percent, "headroom": policy.scale_down_headroom,
                  "cooldown_s": policy.cooldown_s,
                  "stabilized": d.stabilized}
        action = DecisionAction.NONE
        sr = None
        if d.desired != current:
            if policy.dry_run:
                action = DecisionAction.DRY_RUN
            else:
                try:
                    result = tier_scale(tier=policy.tier, desired=d.desired, actor=SYSTEM + ":autoscaler",
                                        owner=Owner.AUTOSCALER, reason=d.explanation(), supersede=True,
                                        drain_deadline_s=policy.drain_deadline_s, source=Source.SYSTEM)
                except (Conflict, ValidationError) as exc:
                    text = exc.detail if isinstance(exc, Conflict) else "; ".join(exc.messages)
                    return AutoscalerDecision.objects.create(
                        **base, queue_depth=queue, raw_desired=d.raw, recommendation=d.recommendation,
                        desired=current, action=DecisionAction.SKIPPED, inputs=inputs,
                        explanation=f"{d.explanation()}; not applied: {text}")
                sr = result.obj
                action = DecisionAction.SCALE_UP if d.desired > current else DecisionAction.SCALE_DOWN
                policy.last_scaled_at = now
                policy.save(update_fields=["last_scaled_at"])
        return AutoscalerDecision.objects.create(
            **base, queue_depth=queue, raw_desired=d.raw, recommendation=d.recommendation, desired=d.desired,
            action=action, explanation=d.explanation(), inputs=inputs, scale_request=sr)


def autoscaler_run_all(*, now: dt.datetime | None = None) -> list[AutoscalerDecision]:
    out = []
    for tier in Tier.objects.filter(autoscaler_policy__enabled=True):
        decision = autoscaler_run(tier=tier, now=now)
        if decision is not None:
            out.append(decision)
    return out


def idempotency_purge(*, older_than_s: int = 86400, now: dt.datetime | None = None) -> int:
    """Forget stored Idempotency-Key replies older than a day (clients retry within minutes)."""
    now = now or timezone.now()
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=now - dt.timedelta(seconds=older_than_s)).delete()
    return deleted


def operations_retention(*, now: dt.datetime | None = None, decisions_days: float = 7.0) -> dict[str, int]:
    """Hourly: forget old Idempotency-Key replies, and autoscaler decisions older than a week
    (one per tier every 10 s) except those that started a scale request."""
    now = now or timezone.now()
    decisions, _ = AutoscalerDecision.objects.filter(
        time__lt=now - dt.timedelta(days=decisions_days), scale_request__isnull=True).delete()
    return {"idempotency_keys": idempotency_purge(now=now), "autoscaler_decisions": decisions}


@transaction.atomic
def policy_save(*, policy: AutoscalerPolicy, actor: Any, source: str = Source.API, created: bool = False,
                before: dict[str, Any] | None = None, reason: str = "") -> AutoscalerPolicy:
    from apps.audit.services import diff, snapshot

    policy.full_clean()
    policy.save()
    audit_record(actor=actor, action="autoscaler_policy.create" if created else "autoscaler_policy.update",
                 target=policy, source=source, reason=reason, changes=diff(before, snapshot(policy)))
    return policy


@transaction.atomic
def policy_delete(*, policy: AutoscalerPolicy, actor: Any, source: str = Source.API) -> None:
    from apps.audit.services import diff, snapshot

    before = snapshot(policy)
    pk, text = str(policy.pk), str(policy)
    policy.delete()
    audit_record(actor=actor, action="autoscaler_policy.delete", target_type="autoscalerpolicy", target_id=pk,
                 target_repr=text, source=source, changes=diff(before, None))

