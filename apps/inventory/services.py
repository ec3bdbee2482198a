"""Writes to the inventory. Each runs in one transaction, validates with the
model's ``full_clean()`` (admission rules included), writes one audit record
per object and keeps the node's soft-rule warnings current."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import audit_record, diff, snapshot
from apps.common.errors import Conflict, django_errors
from apps.inventory.choices import (
    MODULE_INITIAL_STATES,
    MODULE_STATE_ACTIONS,
    NODE_INITIAL_STATES,
    NODE_STATE_ACTIONS,
    CombinationState,
    NodeState,
)
from apps.inventory.models import Module, Node, VersionCombination

M = TypeVar("M", bound=models.Model)


class BatchError(ValidationError):
    """A batch rejected whole; ``errors`` maps ``items[i].field`` to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(errors)
        self.errors = errors


def _label(instance: models.Model) -> str:
    return instance._meta.model_name or "object"


def node_refresh_warnings(node: Node) -> list[dict[str, str]]:
    """Recompute the soft admission findings stored on ``node``."""
    findings = node.admission()
    if findings.warnings != node.warnings:
        node.warnings = findings.warnings
        Node.objects.filter(pk=node.pk).update(warnings=findings.warnings)
    return findings.warnings


def _after_write(instance: models.Model, before: dict[str, Any] | None = None) -> None:
    if isinstance(instance, Node):
        node_refresh_warnings(instance)
    elif isinstance(instance, Module):
        node_ids = [pk for pk in {instance.node_id, (before or {}).get("node")} if pk is not None]
        for node in Node.objects.filter(pk__in=node_ids).select_related("tier"):
            node_refresh_warnings(node)


def _check_state(instance: models.Model, before: dict[str, Any] | None) -> None:
    """States belong to the node lifecycle (apps.operations.lifecycle): a new node starts in standby or
    maintenance, a new module healthy, degraded or failed; after that the inventory never changes them."""
    if isinstance(instance, Node):
        if before is None and instance.state not in NODE_INITIAL_STATES:
            raise ValidationError({"state": f"a new node starts in {' or '.join(NODE_INITIAL_STATES)}, not "
                                            f"{instance.state}; after that the node's actions change it"})
        if before is not None and before.get("state") != instance.state:
            raise ValidationError({"state": "read-only: " + NODE_STATE_ACTIONS.format(id=instance.pk,
                                                                                       tier=instance.tier_id)})
    elif isinstance(instance, Module):
        if before is None and instance.state not in MODULE_INITIAL_STATES:
            raise ValidationError({"state": f"a new module starts {', '.join(MODULE_INITIAL_STATES)}, not "
                                            f"{instance.state}; after that quarantine and release change it"})
        if before is not None and before.get("state") != instance.state:
            raise ValidationError({"state": "read-only: " + MODULE_STATE_ACTIONS.format(id=instance.pk)})


def _save(instance: M) -> M:
    instance.full_clean()
    try:
        with transaction.atomic():
            instance.save()
    except IntegrityError as exc:
        message = f"conflicts with existing data: {str(exc).splitlines()[0]}"
        raise ValidationError({"non_field_errors": [message]}) from exc
    return instance


@transaction.atomic
def inventory_create(*, instance: M, actor: Any, source: str = Source.API, reason: str = "") -> M:
    _check_state(instance, None)
    if isinstance(instance, Node):
        instance.state_changed_at = timezone.now()
    _save(instance)
    audit_record(actor=actor, action=f"{_label(instance)}.create", target=instance,
                 changes=diff(None, snapshot(instance)), source=source, reason=reason)
    _after_write(instance)
    return instance


@transaction.atomic
def inventory_update(*, instance: M, data: dict[str, Any], actor: Any, source: str = Source.API,
                     reason: str = "") -> M:
    locked = type(instance)._default_manager.select_for_update().get(pk=instance.pk)
    before = snapshot(locked)
    for key, value in data.items():
        setattr(locked, key, value)
    _check_state(locked, before)
    _save(locked)
    changes = diff(before, snapshot(locked))
    if changes:
        audit_record(actor=actor, action=f"{_label(locked)}.update", target=locked, changes=changes,
                     source=source, reason=reason)
    _after_write(locked, before)
    return locked


@transaction.atomic
def inventory_delete(*, instance: models.Model, actor: Any, source: str = Source.API, reason: str = "") -> None:
    before = snapshot(instance)
    label, pk, text = _label(instance), str(instance.pk), str(instance)
    node_id = instance.node_id if isinstance(instance, Module) else None
    instance.delete()
    audit_record(actor=actor, action=f"{label}.delete", target_type=label, target_id=pk, target_repr=text,
                 changes=diff(before, None), source=source, reason=reason)
    if node_id:
        node = Node.objects.select_related("tier").filter(pk=node_id).first()
        if node is not None:
            node_refresh_warnings(node)


def bulk_create(*, instances: Sequence[M], actor: Any, source: str = Source.API,
                prepare: Callable[[int, M], None] | None = None) -> list[M]:
    """Create all of ``instances`` or none. Items are validated in order, each
    seeing the ones before it (a slot taken earlier in the batch is taken);
    every failing item is reported as ``items[i].field``."""
    errors: dict[str, list[str]] = {}
    created: list[M] = []
    with transaction.atomic():
        for i, instance in enumerate(instances):
            try:
                with transaction.atomic():
                    if prepare:
                        prepare(i, instance)
                    inventory_create(instance=instance, actor=actor, source=source)
                created.append(instance)
            except ValidationError as exc:
                for field, messages in django_errors(exc).items():
                    errors.setdefault(f"items[{i}].{field}", []).extend(messages)
        if errors:
            transaction.set_rollback(True)
    if errors:
        raise BatchError(errors)
    return created


@transaction.atomic
def combination_set_state(*, combination: VersionCombination, state: str, actor: Any,
                          source: str = Source.API, reason: str = "", by_validation: bool = False
                          ) -> VersionCombination:
    """Move a version combination; pinning demotes the type's previous pin to validated. Only a
    validation run (``by_validation``: its regression vectors on the gray pool) makes a combination
    validating or validated; by hand, validated is reachable only by unpinning."""
    locked = VersionCombination.objects.select_for_update().select_related("module_type").get(pk=combination.pk)
    if not by_validation and state != locked.state and (
            state == CombinationState.VALIDATING
            or (state == CombinationState.VALIDATED and locked.state != CombinationState.PINNED)):
        raise Conflict(f"a combination becomes {state} only through its regression vectors on the gray pool: "
                       f"POST /api/v1/version-combinations/{locked.pk}/validate/", extra={"state": locked.state})
    before = snapshot(locked)
    if state == CombinationState.PINNED and locked.state != CombinationState.PINNED:
        if locked.state != CombinationState.VALIDATED:
            raise Conflict(f"only a validated combination can be pinned or rolled out; this one is {locked.state}",
                           extra={"state": locked.state})
        previous = (VersionCombination.objects.select_for_update()
                    .filter(module_type=locked.module_type, state=CombinationState.PINNED).first())
        if previous is not None:
            prev_before = snapshot(previous)
            previous.state = CombinationState.VALIDATED
            previous.state_changed_at = timezone.now()
            previous.save(update_fields=["state", "state_changed_at"])
            audit_record(actor=actor, action="versioncombination.unpin", target=previous,
                         changes=diff(prev_before, snapshot(previous)), source=source,
                         reason=f"superseded by {locked}")
    locked.state = state
    locked.state_changed_at = timezone.now()
    _save(locked)
    audit_record(actor=actor, action=f"versioncombination.{state}", target=locked,
                 changes=diff(before, snapshot(locked)), source=source, reason=reason)
    return locked


@transaction.atomic
def combination_flag_suspect(*, combination: VersionCombination, reason: str, actor: Any,
                             source: str = Source.SYSTEM) -> VersionCombination:
    """Flag a combination suspect (a version-regression check failed on it); its state is unchanged."""
    locked = VersionCombination.objects.select_for_update().get(pk=combination.pk)
    before = snapshot(locked)
    locked.suspect, locked.suspect_reason = True, reason[:4000]
    locked.save(update_fields=["suspect", "suspect_reason"])
    audit_record(actor=actor, action="versioncombination.suspect", target=locked, source=source, reason=reason,
                 changes=diff(before, snapshot(locked)))
    return locked


__all__ = [
    "BatchError",
    "NodeState",
    "bulk_create",
    "combination_flag_suspect",
    "combination_set_state",
    "inventory_create",
    "inventory_delete",
    "inventory_update",
    "node_refresh_warnings",
]
