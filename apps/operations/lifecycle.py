"""The node lifecycle: the one entry point for every change of ``Node.state`` and
``Module.state``. Nothing else writes those columns (the inventory API and the
admin refuse them, naming the actions here).

Every action
- locks what it changes (tier, then node, then its hold: the same order
  everywhere) and moves the state with compare-and-set against the transition
  table below;
- keeps the hold bookkeeping: one active hold (cordon or drain, `Drain`) per
  node, one quarantine per module; owners ``operator``, ``health``, ``rollout``,
  ``autoscaler``; the same action by the same owner again returns the existing
  hold (``changed=False``); one owner never changes or clears another's hold,
  except an operator who overrides with a reason;
- applies the capacity guard (``apps.operations.capacity``) when it takes a
  serving node or module out of service: refused (409, with the numbers) below
  the tier's floor ``max(min_active_nodes, need)``, unless an operator
  overrides with a reason or health acts on a critical finding; observed
  changes (unreachable, failed) are never refused;
- writes exactly one audit record, and queues the agent's command linked to it
  (visible to the agent when the transaction commits) and the browser's event
  after commit.

One module past the house's 500 lines on purpose: the transition table, the lock
order, the hold bookkeeping and the guard's call are one state machine, and each
action reads all four; split, checking any one transition would mean reading
every part. (Which actions each state allows is declared with the states, in
``apps/inventory/choices.py``, and enforced here.)
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.agents.choices import CommandKind
from apps.agents.services import node_command_send, node_keys_revoke
from apps.audit.choices import Source
from apps.audit.models import AuditEvent
from apps.audit.services import actor_identity, actor_name, audit_record
from apps.common.errors import Conflict
from apps.common.events import FLEET_GROUP, node_group, publish
from apps.inventory.choices import MODULE_ACTIONS, NODE_ACTIONS, SERVING_STATES, ModuleState, NodeState
from apps.inventory.models import Module, Node, Tier
from apps.operations import capacity, selectors, windows
from apps.operations.choices import (
    ACTIVE_DRAIN_STATES,
    AfterDrain,
    DeadlineAction,
    DrainKind,
    DrainState,
    Owner,
)
from apps.operations.models import Drain, Quarantine, ScaleRequest

logger = logging.getLogger(__name__)

SYSTEM = "operations"
N = NodeState
M = ModuleState

# The node state machine (docs/architecture.md): the states each state may move to. A node that
# stops reporting becomes unreachable from any state the heartbeat watches, and
# returns to the state it had; maintenance and retired nodes are never marked.
_OBSERVED = {N.UNREACHABLE, N.FAILED}
HEARTBEAT_STATES = frozenset({N.STANDBY, N.ACTIVE, N.CORDONED, N.DRAINING, N.DRAINED})
NODE_TRANSITIONS: dict[str, frozenset[str]] = {
    N.STANDBY: frozenset({N.ACTIVE, N.MAINTENANCE, N.RETIRED} | _OBSERVED),
    N.ACTIVE: frozenset({N.CORDONED, N.DRAINING} | _OBSERVED),
    N.CORDONED: frozenset({N.ACTIVE, N.DRAINING} | _OBSERVED),
    N.DRAINING: frozenset({N.DRAINED, N.ACTIVE} | _OBSERVED),
    N.DRAINED: frozenset({N.MAINTENANCE, N.STANDBY, N.ACTIVE, N.RETIRED} | _OBSERVED),
    N.MAINTENANCE: frozenset({N.ACTIVE, N.STANDBY, N.RETIRED, N.FAILED}),
    N.UNREACHABLE: frozenset(HEARTBEAT_STATES | {N.MAINTENANCE, N.FAILED, N.RETIRED}),
    N.FAILED: frozenset({N.MAINTENANCE, N.RETIRED}),
    N.RETIRED: frozenset(),
}
MODULE_TRANSITIONS: dict[str, frozenset[str]] = {
    M.HEALTHY: frozenset({M.DEGRADED, M.QUARANTINED, M.FAILED}),
    M.DEGRADED: frozenset({M.HEALTHY, M.QUARANTINED, M.FAILED}),
    M.QUARANTINED: frozenset({M.HEALTHY, M.DEGRADED, M.FAILED}),
    M.FAILED: frozenset({M.HEALTHY}),
}


class CapacityRefused(Conflict):
    """409: the action would take a tier below its floor. ``extra["capacity"]`` holds the numbers."""


@dataclass(frozen=True)
class Result:
    """What an action did: the hold/request it concerns and whether anything changed."""

    obj: Any
    changed: bool


# ---- helpers ---------------------------------------------------------------------------------


def _require_reason(reason: str, what: str) -> None:
    if not reason.strip():
        raise ValidationError({"reason": f"say why the {what}"})


def _during_freeze(node: Node | None, *, owner: str, source: str, reason: str, what: str) -> dict[str, Any]:
    """An operator's own action on a node a freeze covers: it needs a reason (400 naming ``reason``
    otherwise) and its audit record says it was done during the freeze. Automated actors never get
    here: they ask ``windows.verdict`` first."""
    if node is None or owner != Owner.OPERATOR or source == Source.SYSTEM:
        return {}
    freeze = windows.freeze_now(scope=windows.Scope.of_nodes([node]), at=timezone.now())
    if freeze is None:
        return {}
    if not reason.strip():
        raise ValidationError({"reason": f"a freeze covers {what} until {freeze.ends_at:%Y-%m-%d %H:%M} UTC "
                                         f"({freeze.reason}): say why you act during it"})
    return {"during_freeze": {"freeze": freeze.pk, "reason": freeze.reason, "ends_at": freeze.ends_at.isoformat()}}


def lock_node(node: Node | int) -> Node:
    pk = node if isinstance(node, int) else node.pk
    return Node.objects.select_for_update(of=("self",)).select_related("tier", "rack").get(pk=pk)


def _lock_tier_and_node(node: Node | int) -> Node:
    """Lock the node's tier row first (capacity decisions of one tier are serialised), then the node."""
    pk = node if isinstance(node, int) else node.pk
    tier_id = Node.objects.filter(pk=pk).values_list("tier_id", flat=True).get()
    Tier.objects.select_for_update().filter(pk=tier_id).first()
    locked = lock_node(pk)
    if locked.tier_id != tier_id:  # moved to another tier meanwhile: lock that one too
        Tier.objects.select_for_update().filter(pk=locked.tier_id).first()
    return locked


def _active_hold(node: Node) -> Drain | None:
    return Drain.objects.select_for_update().filter(node=node, state__in=ACTIVE_DRAIN_STATES).first()


def _send(node: Node, kind: str, args: dict[str, Any], *, actor: Any, reason: str, source: str,
          event: AuditEvent) -> None:
    """Queue ``kind`` for the node's agent, linked to the action's audit record (no second record)."""
    node_command_send(node=node, kind=kind, args=args, actor=actor, reason=reason, source=source, audit_event=event)


def _publish_state(node: Node, old: str, now: dt.datetime, *, owner: str, reason: str) -> None:
    publish("node.state", {"id": node.pk, "hostname": node.hostname, "tier_id": node.tier_id, "state": node.state,
                           "previous": old, "owner": owner, "reason": reason, "time": now.isoformat()},
            groups=[FLEET_GROUP, node_group(node.pk)])


def _move(node: Node, to: str, *, actor: Any, action: str, reason: str, source: str, owner: str = "",
          related: Any = None, changes: dict[str, Any] | None = None,
          command: tuple[str, dict[str, Any]] | None = None) -> AuditEvent:
    """Compare-and-set ``node`` from its current state to ``to`` (which the table must allow), write the
    one audit record of the action, queue its agent command and its browser event."""
    frozen = _during_freeze(node, owner=owner, source=source, reason=reason, what=f"node {node.hostname}")
    old = node.state
    if to != old and to not in NODE_TRANSITIONS.get(old, frozenset()):
        raise Conflict(f"node {node.hostname} cannot go from {old} to {to}")
    if to in SERVING_STATES and node.gray:
        raise Conflict(f"node {node.hostname} is in the gray pool (kept for validating version combinations); "
                       "take it out of the pool before it serves")
    if to in SERVING_STATES and old not in SERVING_STATES:
        # The hard admission rules hold for every node that serves (e.g. ECC memory).
        node.state = to
        try:
            node.admission().raise_hard()
        finally:
            node.state = old
    now = timezone.now()
    if to != old:
        fields: dict[str, Any] = {"state": to, "state_changed_at": now}
        if to == N.UNREACHABLE:
            fields["unreachable_from"] = old
        elif old == N.UNREACHABLE:
            fields["unreachable_from"] = ""
        if Node.objects.filter(pk=node.pk, state=old).update(**fields) != 1:
            raise Conflict(f"node {node.hostname} changed state concurrently; try again")
        for key, value in fields.items():
            setattr(node, key, value)
    recorded: dict[str, Any] = {"state": [old, to]} if to != old else {}
    if owner:
        recorded["owner"] = owner
    recorded.update(changes or {})
    recorded.update(frozen)
    event = audit_record(actor=actor, action=action, target=node, reason=reason, source=source, changes=recorded,
                         related=related)
    if command is not None:
        _send(node, command[0], command[1], actor=actor, reason=reason, source=source, event=event)
    if to != old:
        _publish_state(node, old, now, owner=owner, reason=reason)
    return event


def _check_owner(hold: Drain | Quarantine, *, owner: str, override: bool, reason: str, what: str) -> bool:
    """Raise 409 unless ``owner`` holds ``hold`` or an operator overrides with a reason; True when overridden."""
    if hold.owner == owner:
        return False
    if override and owner == Owner.OPERATOR and reason.strip():
        return True
    who = hold.created_by_name or hold.owner
    text = (f"{what} is held by {hold.get_owner_display().lower()} ({who}: {hold.reason!r}); "
            f"the {owner} owner cannot change or clear it")
    if owner == Owner.OPERATOR:
        text += "; an operator may override with override=true and a reason"
    raise Conflict(text, extra={"holder": {"owner": hold.owner, "by": who, "reason": hold.reason}})


def capacity_guard(*, tier: Tier, owner: str, override: bool, reason: str, critical: bool = False,
                   nodes: int = 0, modules: int = 0) -> dict[str, Any]:
    """The capacity guard, one rule for every actor: may ``nodes`` active nodes (or ``modules`` serving
    modules) of ``tier`` go out of service? Returns the numbers to record in the action's audit
    record; raises CapacityRefused (409) naming them. The caller holds the tier's row lock."""
    load, need = selectors.tier_need(tier=tier)
    refusal = capacity.removal_check(load, need, nodes=nodes, modules=modules)
    numbers: dict[str, Any] = {"floor": need.floor(load.min_active_nodes), "need": need.nodes,
                               "binding": need.binding, "active": load.active_nodes}
    if refusal is None:
        return {"capacity": numbers}
    if critical and owner == Owner.HEALTH:
        return {"capacity": {**refusal.as_dict(), "below_floor": "critical finding"}}
    if override and owner == Owner.OPERATOR and reason.strip():
        return {"capacity": {**refusal.as_dict(), "below_floor": "operator override"}}
    text = f"refused: {refusal.message}"
    if owner == Owner.OPERATOR:
        text += " An operator may override with override=true and a reason."
    raise CapacityRefused(text, extra={"capacity": refusal.as_dict()})


def _release(hold: Drain, *, actor: Any, reason: str, overridden: bool = False) -> None:
    hold.state = DrainState.RELEASED
    hold.released_at = timezone.now()
    hold.released_by_name = actor_name(actor)
    hold.release_reason = reason
    hold.overridden = overridden
    hold.save(update_fields=["state", "released_at", "released_by_name", "release_reason", "overridden"])


def _deadline(deadline_s: int | None, now: dt.datetime) -> dt.datetime | None:
    return now + dt.timedelta(seconds=deadline_s) if deadline_s else None


# ---- cordon, drain, uncordon, maintenance ----------------------------------------------------


@transaction.atomic
def node_cordon(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                resume_after: dt.datetime | None = None, override: bool = False, critical: bool = False,
                source: str = Source.API) -> Result:
    """Stop new work reaching ``node``; requests in flight finish."""
    _require_reason(reason, "node is cordoned")
    node = _lock_tier_and_node(node)
    hold = _active_hold(node)
    if hold is not None:
        if hold.owner == owner:
            return Result(hold, False)
        _check_owner(hold, owner=owner, override=False, reason=reason, what=f"node {node.hostname}")
    if node.state not in NODE_ACTIONS["cordon"]:
        raise Conflict(f"node {node.hostname} is {node.state}; only an active node can be cordoned")
    numbers = capacity_guard(tier=node.tier, owner=owner, override=override, critical=critical,
                             reason=reason, nodes=1)
    user, name = actor_identity(actor)
    hold = Drain.objects.create(node=node, kind=DrainKind.CORDON, owner=owner, state=DrainState.CORDONED,
                                reason=reason, created_by=user, created_by_name=name,
                                started_at=timezone.now(), resume_after=resume_after, previous_state=node.state)
    _move(node, N.CORDONED, actor=actor, action="node.cordon", reason=reason, source=source, owner=owner,
          related=hold, changes=numbers, command=(CommandKind.CORDON, {"drain": hold.pk, "owner": owner}))
    return Result(hold, True)


@transaction.atomic
def node_drain(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
               deadline_s: int | None = 900, deadline_action: str = DeadlineAction.ALERT,
               resume_after: dt.datetime | None = None, after: str = AfterDrain.STAY,
               scale_request: ScaleRequest | None = None, override: bool = False, critical: bool = False,
               guarded: bool = True, source: str = Source.API) -> Result:
    """Cordon ``node``, then wait until it reports zero requests in flight (the drain controller
    finishes it). The same owner draining again gets the existing drain back; the owner's own
    cordon becomes this drain. ``guarded=False`` only for a scale-down that checked the tier as a whole."""
    _require_reason(reason, "node is drained")
    if deadline_action not in DeadlineAction.values:
        raise ValidationError({"deadline_action": f"one of {', '.join(DeadlineAction.values)}"})
    if after == AfterDrain.STANDBY and deadline_action == DeadlineAction.FORCE:
        raise ValidationError({"deadline_action": "a drain that returns its node to standby is never forced"})
    node = _lock_tier_and_node(node)
    now = timezone.now()
    hold = _active_hold(node)
    numbers: dict[str, Any] = {}
    if hold is not None:
        if hold.owner != owner:
            _check_owner(hold, owner=owner, override=False, reason=reason, what=f"node {node.hostname}")
        if hold.kind == DrainKind.DRAIN:
            return Result(hold, False)
    if node.state not in NODE_ACTIONS["drain"]:  # e.g. unreachable: its hold stays until it reports again
        raise Conflict(f"node {node.hostname} is {node.state}; only an active or cordoned node can be drained")
    if hold is not None:
        # The owner's cordon becomes a drain (the node is already out of service: no guard).
        hold.kind, hold.state, hold.reason = DrainKind.DRAIN, DrainState.DRAINING, reason
        hold.started_at = now
        hold.deadline, hold.deadline_action = _deadline(deadline_s, now), deadline_action
        hold.resume_after = resume_after or hold.resume_after
        hold.after, hold.scale_request = after, scale_request
        hold.save()
    else:
        if guarded and node.state == N.ACTIVE:
            numbers = capacity_guard(tier=node.tier, owner=owner, override=override, critical=critical,
                                     reason=reason, nodes=1)
        user, name = actor_identity(actor)
        hold = Drain.objects.create(
            node=node, kind=DrainKind.DRAIN, owner=owner, state=DrainState.DRAINING, reason=reason,
            created_by=user, created_by_name=name, started_at=now,
            deadline=_deadline(deadline_s, now), deadline_action=deadline_action, resume_after=resume_after,
            after=after, previous_state=node.state, scale_request=scale_request)
    deadline = hold.deadline.isoformat() if hold.deadline else None
    _move(node, N.DRAINING, actor=actor, action="node.drain", reason=reason, source=source, owner=owner,
          related=hold, changes={**numbers, "deadline": deadline, "deadline_action": deadline_action,
                                 "then": after},
          command=(CommandKind.DRAIN, {"drain": hold.pk, "owner": owner, "deadline": deadline}))
    return Result(hold, True)


@transaction.atomic
def node_uncordon(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any, override: bool = False,
                  source: str = Source.API) -> Result:
    """Release the node's hold (cordon, drain or the drain under maintenance) and put it back to
    work. Another owner's hold: 409, or an audited operator override."""
    node = lock_node(node)
    hold = _active_hold(node)
    if hold is None:
        if node.state == N.ACTIVE:
            return Result(None, False)
        if node.state not in NODE_ACTIONS["uncordon"]:
            raise Conflict(f"node {node.hostname} is {node.state}; nothing to uncordon")
        _move(node, N.ACTIVE, actor=actor, action="node.uncordon", reason=reason, source=source, owner=owner,
              command=(CommandKind.UNCORDON, {}))
        return Result(None, True)
    if node.state == N.UNREACHABLE:
        raise Conflict(f"node {node.hostname} is unreachable; its hold stays until it reports again")
    overridden = _check_owner(hold, owner=owner, override=override, reason=reason, what=f"node {node.hostname}")
    _release(hold, actor=actor, reason=reason or "uncordoned", overridden=overridden)
    extra = {"override": {"holder": hold.owner, "by": owner}} if overridden else {}
    _move(node, N.ACTIVE, actor=actor, action="node.uncordon", reason=reason, source=source, owner=owner,
          related=hold, changes=extra, command=(CommandKind.UNCORDON, {"drain": hold.pk}))
    return Result(hold, True)


@transaction.atomic
def node_maintenance_enter(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                           deadline_s: int | None = 900, deadline_action: str = DeadlineAction.ALERT,
                           override: bool = False, critical: bool = False, source: str = Source.API) -> Result:
    """A drained, standby, failed or unreachable node enters maintenance now; an active or cordoned
    node is drained first and enters maintenance when empty."""
    _require_reason(reason, "node enters maintenance")
    node = _lock_tier_and_node(node)
    hold = _active_hold(node)
    if node.state == N.MAINTENANCE:
        return Result(hold, False)
    if node.state not in NODE_ACTIONS["maintenance"]:
        raise Conflict(f"node {node.hostname} is {node.state}; it cannot enter maintenance")
    if hold is not None and hold.owner != owner:
        _check_owner(hold, owner=owner, override=False, reason=reason, what=f"node {node.hostname}")
    if node.state in (N.STANDBY, N.FAILED, N.UNREACHABLE, N.DRAINED):
        _move(node, N.MAINTENANCE, actor=actor, action="node.maintenance", reason=reason, source=source,
              owner=owner, related=hold, command=(CommandKind.MAINTENANCE, {"drain": hold.pk} if hold else {}))
        return Result(hold, True)
    if hold is not None and hold.kind == DrainKind.DRAIN:
        if hold.after == AfterDrain.MAINTENANCE:
            return Result(hold, False)
        hold.after = AfterDrain.MAINTENANCE
        hold.save(update_fields=["after"])
        _move(node, node.state, actor=actor, action="drain.then_maintenance", reason=reason, source=source,
              owner=owner, related=hold, changes={"then": [AfterDrain.STAY, AfterDrain.MAINTENANCE]})
        return Result(hold, True)
    return node_drain(node=node, owner=owner, reason=reason, actor=actor, deadline_s=deadline_s,
                      deadline_action=deadline_action, after=AfterDrain.MAINTENANCE, override=override,
                      critical=critical, source=source)


@transaction.atomic
def node_maintenance_leave(*, node: Node, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                           override: bool = False, source: str = Source.API) -> Result:
    """Back to work: to active if the node was drained into maintenance, to standby otherwise."""
    locked = lock_node(node)
    if locked.state not in NODE_ACTIONS["maintenance-leave"]:
        raise Conflict(f"node {locked.hostname} is {locked.state}, not in maintenance")
    hold = _active_hold(locked)
    if hold is None:
        _move(locked, N.STANDBY, actor=actor, action="node.standby", reason=reason, source=source, owner=owner,
              command=(CommandKind.STANDBY, {}))
        return Result(None, True)
    return node_uncordon(node=locked, owner=owner, reason=reason, actor=actor, override=override, source=source)


# ---- the gray pool ------------------------------------------------------------------------------

GRAY_STATES = frozenset({N.STANDBY, N.MAINTENANCE})


@transaction.atomic
def node_gray_set(*, node: Node | int, gray: bool, actor: Any, reason: str, source: str = Source.API) -> Result:
    """Put a standby or maintenance node in the gray pool (it validates version combinations and
    never serves) or take it out. One audit record; the same request again changes nothing."""
    _require_reason(reason, "node joins or leaves the gray pool")
    node = lock_node(node)
    if node.gray == gray:
        return Result(obj=node, changed=False)
    if gray and node.state not in GRAY_STATES:
        raise Conflict(f"node {node.hostname} is {node.state}; only a standby or maintenance node joins the "
                       "gray pool (drain it to standby first)")
    if Node.objects.filter(pk=node.pk, gray=not gray).update(gray=gray) != 1:
        raise Conflict(f"node {node.hostname} changed concurrently; try again")
    node.gray = gray
    audit_record(actor=actor, action="node.gray_pool." + ("join" if gray else "leave"), target=node, reason=reason,
                 source=source, changes={"gray": [not gray, gray]})
    return Result(obj=node, changed=True)


# ---- scaling: activate a standby node, take back a scale-down drain ---------------------------


@transaction.atomic
def node_activate(*, node: Node | int, actor: Any, reason: str, related: Any = None, source: str = Source.SYSTEM,
                  owner: str = Owner.OPERATOR) -> None:
    """A standby node takes work: scale-up, or the demo seed. The hard admission rules apply."""
    node = lock_node(node)
    if node.state != N.STANDBY:
        raise Conflict(f"node {node.hostname} is {node.state}; only a standby node is activated")
    _move(node, N.ACTIVE, actor=actor, action="node.activate", reason=reason, source=source, owner=owner,
          related=related, command=(CommandKind.ACTIVATE, {"scale_request": related.pk} if related else {}))


def hold_reclaim(*, node: Node, hold: Drain, actor: Any, reason: str, related: Any,
                 source: str = Source.SYSTEM) -> None:
    """A scale-up takes back a node its own scale-down is draining (both locked by the caller)."""
    _release(hold, actor=actor, reason=reason)
    _move(node, N.ACTIVE, actor=actor, action="node.uncordon", reason=reason, source=source, owner=hold.owner,
          related=related, command=(CommandKind.UNCORDON, {"scale_request": related.pk}))


# ---- the drain controller's writes ------------------------------------------------------------


def drain_complete(*, drain: Drain, node: Node, forced: bool, in_flight: int | None, now: dt.datetime,
                   holders: list[dict[str, Any]] | None = None) -> None:
    """Mark ``drain`` drained (node and drain locked by the caller), then go where the drain says:
    stay, enter maintenance, or return to standby (a scale-down, only when empty). A forced drain's
    audit names the processes still holding the node's modules."""
    drain.state, drain.drained_at, drain.forced = DrainState.DRAINED, now, forced
    if forced:
        drain.in_flight_at_force = in_flight
    drain.save(update_fields=["state", "drained_at", "forced", "in_flight_at_force"])
    text = (f"deadline passed with {in_flight if in_flight is not None else 'an unknown number of'} requests in "
            f"flight" + (f" and {len(holders)} process(es) holding its modules ({selectors.holders_text(holders)})"
                         if holders else "") + ": forced" if forced else "node reports zero in flight")
    action = "drain.forced" if forced else "drain.completed"
    if drain.after == AfterDrain.MAINTENANCE:
        _move(node, N.DRAINED, actor=SYSTEM, action=action, reason=text, source=Source.SYSTEM, owner=drain.owner,
              related=drain)
        _move(node, N.MAINTENANCE, actor=SYSTEM, action="node.maintenance", reason=drain.reason,
              source=Source.SYSTEM, owner=drain.owner, related=drain,
              command=(CommandKind.MAINTENANCE, {"drain": drain.pk}))
    elif drain.after == AfterDrain.STANDBY and not forced and in_flight == 0:
        _move(node, N.DRAINED, actor=SYSTEM, action=action, reason=text, source=Source.SYSTEM, owner=drain.owner,
              related=drain)
        _release(drain, actor=SYSTEM, reason="drained empty: back to standby")
        _move(node, N.STANDBY, actor=SYSTEM, action="node.standby", source=Source.SYSTEM, owner=drain.owner,
              reason=f"released by {drain.scale_request or 'scale-down'}", related=drain.scale_request or drain,
              command=(CommandKind.STANDBY, {"drain": drain.pk}))
    else:
        _move(node, N.DRAINED, actor=SYSTEM, action=action, reason=text, source=Source.SYSTEM, owner=drain.owner,
              related=drain)


def drain_resume(*, drain: Drain, node: Node) -> None:
    """The hold's resume-after time has come (node and drain locked by the caller)."""
    _release(drain, actor=SYSTEM, reason="resume-after time reached")
    if node.state in (N.CORDONED, N.DRAINING, N.DRAINED, N.MAINTENANCE):
        _move(node, N.ACTIVE, actor=SYSTEM, action="node.uncordon", reason="resume-after time reached",
              source=Source.SYSTEM, owner=drain.owner, related=drain,
              command=(CommandKind.UNCORDON, {"drain": drain.pk}))
    else:
        audit_record(actor=SYSTEM, action="drain.resumed", target=node, source=Source.SYSTEM, related=drain,
                     reason=f"resume-after time reached; the node is {node.state}, left as it is")


def drain_deadline_alert(*, drain: Drain, node: Node, waiting_for: str, now: dt.datetime) -> None:
    """A drain that stays at its deadline: say so once (the audit trail and the log)."""
    drain.alerted_at = now
    drain.save(update_fields=["alerted_at"])
    audit_record(actor=SYSTEM, action="drain.deadline_passed", target=node, source=Source.SYSTEM,
                 reason=waiting_for, related=drain)
    logger.warning("drain %s of %s passed its deadline: %s", drain.pk, node.hostname, waiting_for)


# ---- observed changes: the heartbeat, failures ------------------------------------------------


def node_mark_unreachable(*, node_id: int, cutoff: dt.datetime, timeout_s: float, now: dt.datetime) -> bool:
    """The heartbeat: ``node_id`` has sent nothing since ``cutoff`` → unreachable (its hold, if any,
    untouched). Rechecked under the lock, so a report that arrives meanwhile wins. Never refused."""
    with transaction.atomic():
        node = Node.objects.select_for_update(skip_locked=True, of=("self",)).select_related("tier").filter(
            pk=node_id, state__in=HEARTBEAT_STATES).first()
        if node is None:
            return False
        seen = selectors.node_last_seen(node_id=node_id)
        if seen is not None and seen >= cutoff:
            return False
        if seen is None and node.state_changed_at is not None and node.state_changed_at >= cutoff:
            return False
        silent = (f"no report for {(now - seen).total_seconds():.0f} s" if seen is not None
                  else "no report yet")
        _move(node, N.UNREACHABLE, actor=Owner.HEALTH, action="node.unreachable", source=Source.SYSTEM,
              owner=Owner.HEALTH, reason=f"{silent} (heartbeat timeout {timeout_s:g} s)",
              changes={"last_seen": seen.isoformat() if seen else None})
        return True


def node_mark_reachable(*, node_id: int, since: dt.datetime) -> bool:
    """Reports resumed: an unreachable node goes back to the state it had (its hold, if any, as it was)."""
    with transaction.atomic():
        node = Node.objects.select_for_update(skip_locked=True, of=("self",)).select_related("tier").filter(
            pk=node_id, state=N.UNREACHABLE).first()
        if node is None:
            return False
        seen = selectors.node_last_seen(node_id=node_id)
        if seen is None or seen < since or (node.state_changed_at and seen <= node.state_changed_at):
            return False
        back = node.unreachable_from if node.unreachable_from in HEARTBEAT_STATES else N.STANDBY
        _move(node, back, actor=Owner.HEALTH, action="node.reachable", source=Source.SYSTEM, owner=Owner.HEALTH,
              reason=f"reporting again (last report {seen:%H:%M:%S}); back to {back}")
        return True


@transaction.atomic
def node_mark_failed(*, node: Node, owner: str = Owner.HEALTH, reason: str, actor: Any,
                     source: str = Source.SYSTEM) -> Result:
    """An observed failure: never refused by the capacity guard. The hold, if any, stays."""
    _require_reason(reason, "node is marked failed")
    node = lock_node(node)
    if node.state == N.FAILED:
        return Result(None, False)
    _move(node, N.FAILED, actor=actor, action="node.failed", reason=reason, source=source, owner=owner)
    return Result(None, True)


@transaction.atomic
def node_retire(*, node: Node, reason: str, actor: Any, source: str = Source.API) -> Result:
    """Take a node out of the fleet for good (from standby, drained, maintenance or failed)."""
    _require_reason(reason, "node is retired")
    node = lock_node(node)
    if node.state == N.RETIRED:
        return Result(None, False)
    hold = _active_hold(node)
    if hold is not None:
        _release(hold, actor=actor, reason=f"retired: {reason}")
    _move(node, N.RETIRED, actor=actor, action="node.retire", reason=reason, source=source, related=hold)
    return Result(hold, True)


@transaction.atomic
def node_decommission(*, node: Node, reason: str, actor: Any, source: str = Source.API) -> Result:
    """Take a node out of the fleet for good: once it no longer serves (drained, standby, maintenance,
    failed or unreachable), revoke its agent's keys and retire it. Its history and audit trail stay; a
    retired node is in no count. A serving node is drained first (409 saying how); a retired one is
    left as it is (changed false)."""
    _require_reason(reason, "node is decommissioned")
    locked = lock_node(node)
    if locked.state == N.RETIRED:
        return Result(None, False)
    if locked.state in SERVING_STATES:
        raise Conflict(f"node {locked.hostname} is {locked.state}: drain it first (POST /api/v1/nodes/{locked.pk}"
                       "/drain/), then decommission it", extra={"state": locked.state})
    node_keys_revoke(node=locked, actor=actor, source=source)
    return node_retire(node=locked, reason=reason, actor=actor, source=source)


# ---- modules ----------------------------------------------------------------------------------


def _move_module(module: Module, to: str, *, actor: Any, action: str, reason: str, source: str, owner: str,
                 related: Any = None, changes: dict[str, Any] | None = None,
                 command: tuple[str, dict[str, Any]] | None = None) -> AuditEvent:
    frozen = _during_freeze(module.node, owner=owner, source=source, reason=reason, what=f"module {module.serial}")
    old = module.state
    if to != old and to not in MODULE_TRANSITIONS.get(old, frozenset()):
        raise Conflict(f"module {module.serial} cannot go from {old} to {to}")
    if to != old and Module.objects.filter(pk=module.pk, state=old).update(state=to) != 1:
        raise Conflict(f"module {module.serial} changed state concurrently; try again")
    module.state = to
    event = audit_record(actor=actor, action=action, target=module, reason=reason, source=source,
                         changes={**({"state": [old, to]} if to != old else {}), "owner": owner, **(changes or {}),
                                  **frozen},
                         related=related)
    if command is not None and module.node is not None:
        _send(module.node, command[0], command[1], actor=actor, reason=reason, source=source, event=event)
    if module.node_id is not None and to != old:
        publish("module.state", {"id": module.pk, "serial": module.serial, "node": module.node_id, "state": to,
                                 "previous": old, "owner": owner, "reason": reason},
                groups=[node_group(module.node_id)])
    return event


def _lock_module(module: Module, *, tier_too: bool) -> Module:
    if tier_too and module.node_id is not None:
        _lock_tier_and_node(module.node_id)
    return Module.objects.select_for_update(of=("self",)).select_related("node", "node__tier").get(pk=module.pk)


@transaction.atomic
def module_quarantine(*, module: Module, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                      override: bool = False, critical: bool = False, source: str = Source.API) -> Result:
    """Take one module out of service while its node keeps serving on the others."""
    _require_reason(reason, "module is quarantined")
    module = _lock_module(module, tier_too=True)
    hold = Quarantine.objects.filter(module=module, released_at__isnull=True).first()
    if hold is not None:
        if hold.owner == owner:
            return Result(hold, False)
        _check_owner(hold, owner=owner, override=False, reason=reason, what=f"module {module.serial}")
    if module.state not in MODULE_ACTIONS["quarantine"]:
        raise Conflict(f"module {module.serial} is {module.state}; only a healthy or degraded module can be "
                       "quarantined")
    numbers: dict[str, Any] = {}
    if module.node is not None and module.node.state == N.ACTIVE:
        numbers = capacity_guard(tier=module.node.tier, owner=owner, override=override, critical=critical,
                                 reason=reason, modules=1)
    user, name = actor_identity(actor)
    hold = Quarantine.objects.create(module=module, owner=owner, reason=reason, previous_state=module.state,
                                     created_by=user, created_by_name=name)
    _move_module(module, M.QUARANTINED, actor=actor, action="module.quarantine", reason=reason, source=source,
                 owner=owner, related=hold, changes=numbers,
                 command=(CommandKind.QUARANTINE_MODULE, {"serial": module.serial, "quarantine": hold.pk}))
    return Result(hold, True)


@transaction.atomic
def module_release(*, module: Module, owner: str = Owner.OPERATOR, reason: str, actor: Any,
                   override: bool = False, source: str = Source.API) -> Result:
    """Release a quarantine: its owner, or an operator override with a reason."""
    module = _lock_module(module, tier_too=False)
    hold = Quarantine.objects.filter(module=module, released_at__isnull=True).first()
    if hold is None:
        return Result(None, False)
    overridden = _check_owner(hold, owner=owner, override=override, reason=reason, what=f"module {module.serial}")
    hold.released_at, hold.released_by_name = timezone.now(), actor_name(actor)
    hold.release_reason, hold.overridden = reason, overridden
    hold.save(update_fields=["released_at", "released_by_name", "release_reason", "overridden"])
    back = hold.previous_state if hold.previous_state in (M.HEALTHY, M.DEGRADED) else M.HEALTHY
    to = back if module.state == M.QUARANTINED else module.state
    _move_module(module, to, actor=actor, action="module.release", reason=reason, source=source, owner=owner,
                 related=hold, changes={"override": {"holder": hold.owner, "by": owner}} if overridden else None,
                 command=(CommandKind.RELEASE_MODULE, {"serial": module.serial, "quarantine": hold.pk}))
    return Result(hold, True)


@transaction.atomic
def module_mark(*, module: Module, state: str, owner: str = Owner.HEALTH, reason: str, actor: Any,
                source: str = Source.SYSTEM) -> Result:
    """An observed module condition: degraded, failed, or healthy again. Never refused by the
    capacity guard (broken capacity is not capacity); a quarantine, if any, stays."""
    _require_reason(reason, f"module is marked {state}")
    if state not in (M.HEALTHY, M.DEGRADED, M.FAILED):
        raise ValidationError({"state": f"one of {M.HEALTHY}, {M.DEGRADED}, {M.FAILED}"})
    module = _lock_module(module, tier_too=False)
    if module.state == state:
        return Result(None, False)
    if module.state == M.QUARANTINED and state != M.FAILED:
        hold = Quarantine.objects.filter(module=module, released_at__isnull=True).first()
        if hold is not None and state in (M.HEALTHY, M.DEGRADED):  # back to this state on release
            hold.previous_state = state
            hold.save(update_fields=["previous_state"])
        return Result(hold, False)
    _move_module(module, state, actor=actor, action=f"module.{state}", reason=reason, source=source, owner=owner)
    return Result(None, True)
