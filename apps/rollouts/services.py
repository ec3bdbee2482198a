"""Writes of driver rollouts: preview (nothing written), create, and the controls (pause, resume,
abort, rollback). Each control locks the rollout, checks the request, moves it through
``transitions.py`` (the one place a rollout's state is written) and writes one audit record
linked to the rollout. The steps themselves are the controller's (``controller.py``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from celery import current_app
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import actor_identity, actor_name, audit_record
from apps.common.errors import Conflict
from apps.common.events import FLEET_GROUP, publish
from apps.inventory import scopes
from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import ModuleType, Node, Rack, Tier, VersionCombination
from apps.operations import selectors as op_selectors
from apps.operations import windows
from apps.operations.choices import ACTIVE_DRAIN_STATES, WindowActor
from apps.operations.models import Drain
from apps.rollouts import gates, planner, transitions
from apps.rollouts.choices import (
    ACTIVE_ROLLOUT_STATES,
    IN_PROGRESS_STEPS,
    OnFailure,
    RolloutState,
    Step,
)
from apps.rollouts.models import Rollout, RolloutNode
from apps.vectors.choices import RunPurpose, RunState, SuiteState
from apps.vectors.models import Suite, VectorRun

logger = logging.getLogger(__name__)

ROLLABLE_STATES = (CombinationState.VALIDATED, CombinationState.PINNED)
ADVANCE_TASK = "apps.rollouts.tasks.rollout_advance"  # sent by name: the task runs the controller


@dataclass
class Spec:
    """A create or preview request, as validated by the API (or built by tests and the bench)."""

    combination: VersionCombination
    module_type: ModuleType
    tiers: Sequence[Tier] = ()
    racks: Sequence[Rack] = ()
    nodes: Sequence[Node] = ()
    suite: Suite | None = None
    canary: int | str = 1
    wave_size: int = 4
    max_unavailable: str = "25%"
    bake_s: int = 600
    on_failure: str = OnFailure.ROLLBACK
    cohort_tolerance_pct: int = 20
    max_failures: int = 3
    drain_deadline_s: int = 900
    install_timeout_s: int = 600
    vectors_timeout_s: int = 600
    reason: str = ""
    override: Sequence[str] = ()  # failing dry-run gates the operator starts past, by name (with ``reason``)


@dataclass
class Scoped:
    planned: list[planner.PlanNode] = field(default_factory=list)
    skipped: list[tuple[Node, str]] = field(default_factory=list)
    tiers: dict[int, planner.TierBudget] = field(default_factory=dict)
    versions: dict[int, list[dict[str, str]]] = field(default_factory=dict)


def default_suite(combination: VersionCombination) -> Suite | None:
    """The suite that validated the combination, else the newest published suite."""
    run = (VectorRun.objects.filter(combination=combination, purpose=RunPurpose.VALIDATION, state=RunState.PASSED)
           .select_related("suite").order_by("-finished_at", "-pk").first())
    if run is not None:
        return run.suite
    return Suite.objects.filter(state=SuiteState.PUBLISHED).order_by("-published_at", "-pk").first()


def _check_request(spec: Spec) -> None:
    combination = spec.combination
    if combination.module_type_id != spec.module_type.pk:
        raise ValidationError({"module_type": f"combination {combination.pk} is for module type "
                                              f"{combination.module_type}, not {spec.module_type}"})
    if combination.state not in ROLLABLE_STATES:
        raise Conflict(f"combination {combination} is {combination.state}; only a validated combination is rolled "
                       "out (validate it on the gray pool first)", extra={"field": "combination",
                                                                          "state": combination.state})
    if spec.suite is not None and spec.suite.state != SuiteState.PUBLISHED:
        raise ValidationError({"suite": f"suite {spec.suite} is a draft; publish it first"})
    if spec.wave_size < 1:
        raise ValidationError({"wave_size": "at least 1 node"})
    try:
        planner.parse_canary(spec.canary)
    except planner.PlanError as exc:
        raise ValidationError({exc.field: exc.message}) from exc
    if spec.on_failure not in OnFailure.values:
        raise ValidationError({"on_failure": f"one of {', '.join(OnFailure.values)}"})
    try:
        planner.parse_max_unavailable(spec.max_unavailable)
    except planner.PlanError as exc:
        raise ValidationError({exc.field: exc.message}) from exc


def _scope_field(spec: Spec) -> str:
    return "nodes" if spec.nodes else "racks" if spec.racks else "tiers" if spec.tiers else "module_type"


def scope(spec: Spec) -> Scoped:
    """The nodes in scope holding the module type: planned (active or standby, not held, not on the
    target yet, no open critical health finding) or skipped with the reason."""
    qs = (Node.objects.filter(modules__module_type=spec.module_type).exclude(state=NodeState.RETIRED)
          .select_related("tier", "rack").distinct())
    if spec.tiers:
        qs = qs.filter(tier__in=[t.pk for t in spec.tiers])
    if spec.racks:
        qs = qs.filter(rack__in=[r.pk for r in spec.racks])
    if spec.nodes:
        qs = qs.filter(pk__in=[n.pk for n in spec.nodes])
    nodes = list(qs.order_by("tier__level", "rack__row", "rack__position", "rack__name", "slot", "hostname"))
    if not nodes:
        raise ValidationError({_scope_field(spec): f"no node in this scope holds a {spec.module_type} module"})
    holds = {d.node_id: d for d in Drain.objects.filter(node__in=nodes, state__in=ACTIVE_DRAIN_STATES)}
    critical = gates.critical_blocks(node_ids=[n.pk for n in nodes])
    target = (spec.combination.driver.version, spec.combination.framework.version)
    out = Scoped()
    for node in nodes:
        modules = [m for m in node.modules.all() if m.module_type_id == spec.module_type.pk]
        out.versions[node.pk] = [{"serial": m.serial, "driver": m.driver_version, "framework": m.framework_version}
                                 for m in sorted(modules, key=lambda m: m.slot or 0)]
        hold = holds.get(node.pk)
        if node.gray:
            out.skipped.append((node, "in the gray pool (validates combinations; never serves)"))
        elif hold is not None:
            who = hold.created_by_name or hold.owner
            out.skipped.append((node, f"held by {hold.get_owner_display().lower()} ({who}: {hold.reason!r}); "
                                      "left as it is"))
        elif node.state not in (NodeState.ACTIVE, NodeState.STANDBY):
            out.skipped.append((node, f"node is {node.state}; only active or standby nodes are upgraded"))
        elif all((m.driver_version, m.framework_version) == target for m in modules):
            out.skipped.append((node, "already on the target versions"))
        elif node.pk in critical:
            out.skipped.append((node, gates.critical_reason(critical[node.pk])))
        else:
            out.planned.append(planner.PlanNode(node.pk, node.hostname, node.tier_id,
                                                node.state == NodeState.ACTIVE))
            if node.tier_id not in out.tiers:
                load, need = op_selectors.tier_need(tier=node.tier)
                out.tiers[node.tier_id] = planner.TierBudget(
                    node.tier_id, node.tier.name, load.active_nodes, need.floor(load.min_active_nodes), need.nodes,
                    load.min_active_nodes, need.binding)
    if not out.planned:
        why = "; ".join(f"{n.hostname}: {r}" for n, r in out.skipped[:10])
        raise ValidationError({_scope_field(spec): f"no node in this scope can be upgraded: {why}"})
    return out


def _plan(spec: Spec) -> tuple[Scoped, list[planner.Wave]]:
    _check_request(spec)
    scoped = scope(spec)
    try:
        waves = planner.plan_waves(scoped.planned, scoped.tiers, canary=spec.canary, wave_size=spec.wave_size,
                                   max_unavailable=spec.max_unavailable)
    except planner.PlanError as exc:
        if exc.capacity:
            raise Conflict(exc.message, extra={"field": exc.field}) from exc
        raise ValidationError({exc.field: exc.message}) from exc
    return scoped, waves


def _require_within_scope(spec: Spec, scoped: Scoped, actor: Any) -> None:
    """A rollout's scope must sit within its starter's: a scoped user names the rollout's tiers, racks
    or nodes, and every node that selects lies within the user's scope (403 naming them)."""
    ids = [p.node_id for p in scoped.planned] + [n.pk for n, _reason in scoped.skipped]
    if not (spec.tiers or spec.racks or spec.nodes):
        scopes.require_fleet(actor=actor, what="a rollout of the whole fleet")
    scopes.require_nodes(actor=actor, nodes=scopes.nodes_for_check(ids))


def preview(spec: Spec) -> dict[str, Any]:
    """What a rollout would do, nothing written: the waves node by node with each node's version
    change, each tier's capacity during each wave against its floor, the skipped nodes, and the
    gates evaluated now as a dry run."""
    scoped, waves = _plan(spec)
    combination = spec.combination
    target = {"driver": combination.driver.version, "framework": combination.framework.version}
    described = planner.describe(waves, scoped.tiers, spec.max_unavailable)
    for wave in described:
        for n in wave["nodes"]:
            n["from"] = scoped.versions.get(n["node"], [])
            n["to"] = target
    suite = spec.suite or default_suite(combination)
    dry = _dry_run(spec, scoped, suite)
    canary = Node.objects.filter(pk__in=[n.node_id for n in waves[0].nodes] if waves else [])
    window = windows.verdict(actor=WindowActor.ROLLOUTS, scope=windows.Scope.of_nodes(canary), at=timezone.now())
    return {
        "combination": combination.pk, "module_type": spec.module_type.pk, "target": target,
        "suite": suite.pk if suite else None,
        "waves": described,
        "skipped": [{"node": n.pk, "hostname": n.hostname, "reason": r} for n, r in scoped.skipped],
        "tiers": [{"tier": t.tier_id, "name": t.name, "active": t.active, "floor": t.floor, "need": t.need,
                   "min_active_nodes": t.min_active_nodes, "binding": t.binding,
                   "budget": planner.budget(planner.parse_max_unavailable(spec.max_unavailable), t)}
                  for t in scoped.tiers.values()],
        "pinned": dry["downgrade"]["pinned"],
        "gates": dry,
        "failing": gates.failing(dry),
        "window": window.as_dict(),
    }


def _dry_run(spec: Spec, scoped: Scoped, suite: Suite | None) -> dict[str, dict[str, Any]]:
    active = Rollout.objects.filter(module_type=spec.module_type, state__in=ACTIVE_ROLLOUT_STATES).first()
    return gates.dry_run(combination=spec.combination, module_type=spec.module_type, suite=suite,
                         node_ids=[p.node_id for p in scoped.planned], bake_s=spec.bake_s,
                         cohort_tolerance_pct=spec.cohort_tolerance_pct, active=active)


def _check_gates(spec: Spec, dry: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """Every dry-run gate passes, or each failing one is overridden by name: 400 for overriding a gate
    that passed, 409 naming the failing gates not overridden. Returns the overrides to record."""
    asked = list(dict.fromkeys(spec.override))
    refused = [name for name in asked if name not in gates.OVERRIDABLE_GATES]
    if refused:
        raise ValidationError({"override": [f"{name!r} is not a gate an operator may override (only "
                                            f"{', '.join(gates.OVERRIDABLE_GATES)})" for name in refused]})
    passed = [name for name in asked if dry[name]["ok"]]
    if passed:
        raise ValidationError({"override": [f"the {name} gate passes; there is nothing to override"
                                            for name in passed]})
    failing = gates.failing(dry)
    left = [name for name in failing if name not in asked]
    if left:
        named = "; ".join(f"{name}: {dry[name].get('detail', '')}" for name in left)
        how = (" Override them by name (override: [" + ", ".join(f'"{n}"' for n in left) + "]) with a reason to "
               "start anyway." if all(dry[n]["overridable"] for n in left) else "")
        raise Conflict(f"gate(s) failing: {named}.{how}",
                       extra={"field": "override", "gates": left})
    return [{"gate": name, "detail": str(dry[name].get("detail", ""))} for name in asked]


@transaction.atomic
def rollout_create(*, spec: Spec, actor: Any, source: str = Source.API) -> Rollout:
    """Plan and start a rollout: 409 unless the combination is validated, while another rollout of
    the module type is active, or while a dry-run gate fails that ``spec.override`` does not name; 400
    naming the field for bad input. The overridden gates are kept on the rollout and named in its
    audit record. Nothing is written on error."""
    ModuleType.objects.select_for_update().filter(pk=spec.module_type.pk).first()  # one create per type at once
    combination = VersionCombination.objects.select_for_update().select_related(
        "module_type", "driver", "framework").get(pk=spec.combination.pk)
    spec.combination = combination
    active = Rollout.objects.filter(module_type=spec.module_type, state__in=ACTIVE_ROLLOUT_STATES).first()
    if active is not None:
        raise Conflict(f"rollout #{active.pk} of {spec.module_type} is {active.state}; one active rollout per module "
                       "type", extra={"field": "module_type", "rollout": active.pk})
    finishing = RolloutNode.objects.filter(rollout__module_type=spec.module_type,
                                           step__in=sorted(IN_PROGRESS_STEPS | {Step.ROLLING_BACK})).first()
    if finishing is not None:
        raise Conflict(f"rollout #{finishing.rollout_id} is still finishing its in-progress nodes",
                       extra={"field": "module_type", "rollout": finishing.rollout_id})
    scoped, waves = _plan(spec)
    _require_within_scope(spec, scoped, actor)
    suite = spec.suite or default_suite(combination)
    if suite is None:
        raise ValidationError({"suite": "no published vector suite to validate upgraded nodes with"})
    overrides = _check_gates(spec, _dry_run(spec, scoped, suite))
    plan = {"waves": planner.describe(waves, scoped.tiers, spec.max_unavailable),
            "skipped": [{"node": n.pk, "hostname": n.hostname, "reason": r} for n, r in scoped.skipped]}
    user, name = actor_identity(actor)
    try:
        with transaction.atomic():
            rollout = Rollout.objects.create(
                combination=combination, module_type=spec.module_type, suite=suite,
                scope={"tiers": [t.pk for t in spec.tiers], "racks": [r.pk for r in spec.racks],
                       "nodes": [n.pk for n in spec.nodes]},
                canary=planner.canary_text(spec.canary), wave_size=spec.wave_size,
                max_unavailable=str(spec.max_unavailable),
                bake_s=spec.bake_s, on_failure=spec.on_failure, max_failures=spec.max_failures,
                cohort_tolerance_pct=spec.cohort_tolerance_pct,
                drain_deadline_s=spec.drain_deadline_s, install_timeout_s=spec.install_timeout_s,
                vectors_timeout_s=spec.vectors_timeout_s, wave_count=len(waves), reason=spec.reason, plan=plan,
                overrides=overrides,
                created_by=user, created_by_name=name,
                waiting_for="waiting for the controller to start the canary")
    except IntegrityError as exc:
        raise Conflict(f"another rollout of {spec.module_type} is active", extra={"field": "module_type"}) from exc
    rows = []
    for wave in waves:
        for i, n in enumerate(wave.nodes):
            versions = scoped.versions.get(n.node_id, [])
            lkg = versions[0] if versions else {"driver": "", "framework": ""}
            rows.append(RolloutNode(rollout=rollout, node_id=n.node_id, wave=wave.index, position=i,
                                    serving=n.serving, modules=[v["serial"] for v in versions],
                                    lkg_driver=lkg["driver"], lkg_framework=lkg["framework"],
                                    waiting_for="waiting for its wave" if wave.index else "waiting for the canary"))
    for i, (node, why) in enumerate(scoped.skipped):
        rows.append(RolloutNode(rollout=rollout, node=node, wave=None, position=i, step=Step.SKIPPED, reason=why,
                                serving=node.state == NodeState.ACTIVE,
                                modules=[v["serial"] for v in scoped.versions.get(node.pk, [])]))
    RolloutNode.objects.bulk_create(rows)
    frozen = _during_freeze([n.node_id for w in waves for n in w.nodes], reason=spec.reason,
                            what="the rollout's nodes")
    audit_record(actor=actor, action="rollout.create", target=rollout, source=source, reason=spec.reason,
                 changes={**frozen, "combination": [None, str(combination)], "waves": [None, len(waves)],
                          "nodes": [None, sum(len(w.nodes) for w in waves)],
                          "skipped": [None, len(scoped.skipped)],
                          **({"overrides": [None, [f"{o['gate']}: {o['detail']}" for o in overrides]]}
                             if overrides else {})})
    for node, why in scoped.skipped:
        audit_record(actor=actor, action="rollout.node.skipped", target=node, source=source, reason=why,
                     related=rollout)
    rollout_id = rollout.pk
    transaction.on_commit(lambda: enqueue(rollout_id))
    return rollout


def enqueue(rollout_id: int) -> None:
    try:
        current_app.signature(ADVANCE_TASK, args=(rollout_id,)).apply_async()
    except Exception as exc:  # the broker may be down: the periodic sweep advances it
        logger.warning("could not queue rollout #%s (%s); the sweep will advance it", rollout_id, exc)


def _during_freeze(node_ids: Sequence[int], *, reason: str, what: str) -> dict[str, Any]:
    """An operator's own rollout action while a freeze covers its nodes: it needs a reason (400 naming
    ``reason`` otherwise) and its audit record says it was done during the freeze."""
    nodes = Node.objects.filter(pk__in=list(node_ids)).only("id", "tier_id", "rack_id")
    freeze = windows.freeze_now(scope=windows.Scope.of_nodes(nodes), at=timezone.now())
    if freeze is None:
        return {}
    if not reason.strip():
        raise ValidationError({"reason": f"a freeze covers {what} until {freeze.ends_at:%Y-%m-%d %H:%M} UTC "
                                         f"({freeze.reason}): say why you act during it"})
    return {"during_freeze": {"freeze": freeze.pk, "reason": freeze.reason, "ends_at": freeze.ends_at.isoformat()}}


def _lock(rollout: Rollout) -> Rollout:
    return Rollout.objects.select_for_update().select_related("combination", "module_type").get(pk=rollout.pk)


def _control(rollout: Rollout, action: str, before: str, *, actor: Any, reason: str, source: str) -> None:
    frozen = _during_freeze(list(rollout.nodes.values_list("node_id", flat=True)), reason=reason,
                            what=f"rollout #{rollout.pk}'s nodes")
    audit_record(actor=actor, action=f"rollout.{action}", target=rollout, source=source, reason=reason,
                 changes={"state": [before, rollout.state], **frozen})
    publish("rollout.state", {"id": rollout.pk, "state": rollout.state, "wave": rollout.current_wave,
                              "waiting_for": rollout.waiting_for, "message": rollout.message, "control": action},
            groups=[FLEET_GROUP])
    rollout_id = rollout.pk
    transaction.on_commit(lambda: enqueue(rollout_id))


@transaction.atomic
def rollout_pause(*, rollout: Rollout, actor: Any, reason: str = "", source: str = Source.API) -> Rollout:
    """No new node starts; nodes in progress finish their steps."""
    r = _lock(rollout)
    if r.state == RolloutState.PAUSED:
        return r
    if r.state not in (RolloutState.PLANNED, RolloutState.WAITING, RolloutState.CANARY, RolloutState.WAVES):
        raise Conflict(f"rollout #{r.pk} is {r.state}; only a running rollout is paused", extra={"state": r.state})
    before = r.state
    transitions.pause(r, message=f"paused by {actor_name(actor)}" + (f": {reason}" if reason else ""))
    _control(r, "pause", before, actor=actor, reason=reason, source=source)
    return r


@transaction.atomic
def rollout_resume(*, rollout: Rollout, actor: Any, reason: str = "", source: str = Source.API) -> Rollout:
    """Go on where it paused. Failed nodes it paused on get their last-known-good versions back and the
    circuit breaker counts from here."""
    r = _lock(rollout)
    if r.state != RolloutState.PAUSED:
        raise Conflict(f"rollout #{r.pk} is {r.state}; only a paused rollout is resumed", extra={"state": r.state})
    transitions.resume(r, by=actor_name(actor))
    _control(r, "resume", RolloutState.PAUSED, actor=actor, reason=reason, source=source)
    return r


@transaction.atomic
def rollout_abort(*, rollout: Rollout, actor: Any, reason: str = "", source: str = Source.API) -> Rollout:
    """Stop: nodes in progress finish their steps, the rest stay on their versions (the fleet is left
    mixed, and the nodes are listed)."""
    r = _lock(rollout)
    if r.state not in (RolloutState.PLANNED, RolloutState.WAITING, RolloutState.CANARY, RolloutState.WAVES,
                       RolloutState.PAUSED):
        raise Conflict(f"rollout #{r.pk} is {r.state}; only a running or paused rollout is aborted",
                       extra={"state": r.state})
    before = r.state
    transitions.abort(r, why=f"aborted by {actor_name(actor)}" + (f": {reason}" if reason else ""))
    _control(r, "abort", before, actor=actor, reason=reason, source=source)
    return r


@transaction.atomic
def rollout_rollback(*, rollout: Rollout, actor: Any, reason: str = "", source: str = Source.API) -> Rollout:
    """Every upgraded node back to its last-known-good versions (the same steps)."""
    r = _lock(rollout)
    if r.state == RolloutState.ROLLING_BACK:
        return r
    if r.state not in (RolloutState.PLANNED, RolloutState.WAITING, RolloutState.CANARY, RolloutState.WAVES,
                       RolloutState.PAUSED, RolloutState.ABORTED):
        raise Conflict(f"rollout #{r.pk} is {r.state}; it cannot be rolled back", extra={"state": r.state})
    if r.state == RolloutState.ABORTED and Rollout.objects.filter(
            module_type=r.module_type, state__in=ACTIVE_ROLLOUT_STATES).exclude(pk=r.pk).exists():
        raise Conflict(f"another rollout of {r.module_type} is active; roll this one back when it ends")
    before = r.state
    transitions.rollback_begin(r, f"rollback asked by {actor_name(actor)}" + (f": {reason}" if reason else ""))
    _control(r, "rollback", before, actor=actor, reason=reason, source=source)
    return r
