"""Writes of the agents app: agent keys (issue, rotate, revoke) and the command channel
(send, claim, long-poll, acknowledge). Keyword-only, typed, atomic; operator-visible
actions are audited in their transaction."""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.agents.choices import ACK_STATES, FINAL_COMMAND_STATES, AgentKind, CommandKind, CommandState
from apps.agents.identity import AgentIdentity, identities, sync_query
from apps.agents.models import AgentToken, NodeCommand
from apps.audit.choices import Source
from apps.audit.models import AuditEvent
from apps.audit.services import audit_record
from apps.common.errors import Conflict
from apps.common.keys import new_key
from apps.inventory.models import Module, Node

logger = logging.getLogger(__name__)

# ---- agent tokens -----------------------------------------------------------------------------


@transaction.atomic
def agent_token_issue(*, kind: str, node: Node | None, actor: Any, note: str = "",
                      source: str = Source.API) -> tuple[AgentToken, str]:
    """Create a token; the plaintext key is returned once and never stored."""
    if kind not in AgentKind.values:
        raise ValueError(f"unknown agent kind {kind!r}")
    if (kind == AgentKind.NODE) != (node is not None):
        raise ValueError("a node token needs a node; a gateway token has none")
    key, key_hash, key_prefix = new_key()
    token = AgentToken.objects.create(
        kind=kind, node=node, key_hash=key_hash, key_prefix=key_prefix, note=note,
        created_by=str(getattr(actor, "username", None) or actor or "system")[:150],
    )
    audit_record(actor=actor, action="agent_token.issue", target=token, source=source,
                 changes={"kind": [None, kind], "node": [None, node.pk if node else None]})
    return token, key


@transaction.atomic
def agent_token_revoke(*, token: AgentToken, actor: Any, source: str = Source.API) -> AgentToken:
    updated = AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    if updated:
        audit_record(actor=actor, action="agent_token.revoke", target=token, source=source)
        key_hash = token.key_hash
        transaction.on_commit(lambda: identities.forget(key_hash))  # other processes: at their next refresh
    return token


def node_keys_revoke(*, node: Node, actor: Any, source: str = Source.API) -> list[AgentToken]:
    """Revoke every key of ``node``'s agent that still works (each revocation audited): the node is
    decommissioned, or its reinstalled agent lost them. Revoking none is not an error."""
    return [agent_token_revoke(token=token, actor=actor, source=source)
            for token in AgentToken.objects.filter(node=node, kind=AgentKind.NODE, revoked_at__isnull=True)]


MAX_ROTATION_OVERLAP_S = 30 * 24 * 3600


@transaction.atomic
def agent_token_rotate(*, token: AgentToken, overlap_s: int, actor: Any, note: str = "",
                       source: str = Source.API) -> tuple[AgentToken, str]:
    """Issue the replacement of ``token`` (same kind and node) and let the old key work for ``overlap_s``
    more seconds, so the agent can be given the new key without a gap; after that the old key is refused.
    The plaintext of the new key is returned once. A concurrent second rotation of the same key waits for
    the first (row lock) and is refused (409): one key has one replacement."""
    if not 0 <= overlap_s <= MAX_ROTATION_OVERLAP_S:
        raise ValueError(f"overlap_s must be between 0 and {MAX_ROTATION_OVERLAP_S}")
    old = AgentToken.objects.select_for_update(of=("self",)).select_related("node").get(pk=token.pk)
    now = timezone.now()
    if old.revoked_at is not None:
        raise Conflict(f"{old} is revoked: issue a new key instead")
    if old.rotated_to_id is not None:
        raise Conflict(f"{old} was rotated already (its replacement is {old.rotated_to}); "
                              "rotate the replacement instead")
    if old.expires_at is not None and old.expires_at <= now:
        raise Conflict(f"{old} has expired: issue a new key instead")
    new, key = agent_token_issue(kind=old.kind, node=old.node, actor=actor, source=source,
                                 note=note or f"rotated from {old.key_prefix}…")
    expires = now + dt.timedelta(seconds=overlap_s)
    if old.expires_at is not None:
        expires = min(expires, old.expires_at)
    old.expires_at, old.rotated_to = expires, new
    old.save(update_fields=["expires_at", "rotated_to"])
    audit_record(actor=actor, action="agent_token.rotate", target=old, source=source,
                 changes={"expires_at": [None, expires.isoformat()], "rotated_to": [None, new.pk]})
    key_hash = old.key_hash
    transaction.on_commit(lambda: identities.forget(key_hash))  # other processes: at their next refresh
    return new, key


# ---- identities -------------------------------------------------------------------------------


def agent_identity(*, key: str) -> AgentIdentity | None:
    """The identity behind an agent key (cached per process, see ``identity.py``); None if unknown or revoked."""
    return identities.lookup(key, sync_query)


def identity_of(token: AgentToken) -> AgentIdentity:
    """An identity built from a token row (in-process callers that hold the token, not its key)."""
    modules = dict(Module.objects.filter(node_id=token.node_id).values_list("serial", "id")) if token.node_id else {}
    return AgentIdentity(token_id=token.pk, kind=token.kind, node_id=token.node_id,
                         hostname=token.node.hostname if token.node_id and token.node else None,
                         modules=modules, last_used_at=token.last_used_at)


# ---- command channel ----------------------------------------------------------------------------

_WAKE_KEY = "telemetry:commands:{node_id}"
_DB_RECHECK_S = 5.0


def _wake(node_id: int) -> None:
    """Tell long-polls of ``node_id`` to look again (a best-effort hint in Redis)."""
    try:
        cache.set(_WAKE_KEY.format(node_id=node_id), uuid.uuid4().hex, timeout=600)
    except Exception as exc:  # the hint is optional; polls still recheck the DB every few seconds
        logger.warning("could not signal commands for node %s: %s", node_id, exc)


def _wake_marker(node_id: int) -> Any:
    try:
        return cache.get(_WAKE_KEY.format(node_id=node_id))
    except Exception as exc:
        logger.warning("could not read the command signal of node %s: %s", node_id, exc)
        return None


@transaction.atomic
def node_command_send(*, node: Node, kind: str, args: dict[str, Any] | None, actor: Any, reason: str = "",
                      expires_at: dt.datetime | None = None, source: str = Source.API,
                      audit_event: AuditEvent | None = None) -> NodeCommand:
    """Queue a command for ``node``'s agent; any kind is accepted (an agent answers "unknown").
    Sent on its own, it writes its audit record; sent by an action that wrote one (``audit_event``),
    it is linked to that record instead, so one action stays one record."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    command = NodeCommand.objects.create(
        node=node, kind=kind, args=args or {}, reason=reason, expires_at=expires_at, created_by=user,
        created_by_name=(user.get_username() if user else str(actor or "system"))[:150], audit_event=audit_event,
    )
    if audit_event is None:
        command.audit_event = audit_record(
            actor=actor, action="node_command.send", target=node, reason=reason, source=source,
            changes={"command": [None, command.pk], "kind": [None, kind], "args": [None, args or {}]},
            related=command)
        NodeCommand.objects.filter(pk=command.pk).update(audit_event=command.audit_event)
    node_id = node.pk
    transaction.on_commit(lambda: _wake(node_id))
    return command


def install_versions_send(*, node: Node, driver: str, framework: str, module_type: str, modules: list[str],
                          restore: bool, work: dict[str, int], actor: Any, reason: str,
                          source: str = Source.SYSTEM) -> NodeCommand:
    """Tell ``node``'s agent to install ``driver`` + ``framework`` on its ``modules`` (serials), or to put
    back the versions they had (``restore``). ``work`` names what asked for it, e.g. ``{"rollout": 7}``
    or ``{"run": 12}``, so the agent's hooks and the answer can say so."""
    args = {**work, "driver": driver, "framework": framework, "module_type": module_type, "modules": modules,
            "restore": restore}
    return node_command_send(node=node, kind=CommandKind.INSTALL_VERSIONS, args=args, actor=actor, source=source,
                             reason=reason)


def command_redeliver_after_s() -> float:
    return float(getattr(settings, "TELEMETRY_COMMAND_REDELIVER_AFTER_S", 60))


def node_command_claim(*, node: Node, limit: int = 50) -> list[NodeCommand]:
    """Pending commands of ``node``, oldest first, marked delivered (safe with concurrent polls).

    Delivery is at-least-once: a command delivered but not acknowledged within
    TELEMETRY_COMMAND_REDELIVER_AFTER_S (an agent that died between fetch and
    ack), or in progress without a new ``in_progress`` ack for that long (an
    agent that died running it), is delivered again. Agents act on commands
    idempotently by id.
    """
    now = timezone.now()
    stale = now - dt.timedelta(seconds=command_redeliver_after_s())
    with transaction.atomic():
        commands = list(
            NodeCommand.objects.select_for_update(skip_locked=True)
            .filter(Q(state=CommandState.PENDING) | Q(state=CommandState.DELIVERED, delivered_at__lt=stale)
                    | Q(state=CommandState.IN_PROGRESS, progress_at__lt=stale), node=node)
            .exclude(expires_at__lte=now)
            .order_by("created_at", "id")[:limit]
        )
        if commands:
            NodeCommand.objects.filter(pk__in=[c.pk for c in commands]).update(
                state=CommandState.DELIVERED, delivered_at=now
            )
            for c in commands:
                c.state, c.delivered_at = CommandState.DELIVERED, now
    return commands


def node_commands_wait(*, node: Node, wait_s: float, poll_s: float = 0.25) -> list[NodeCommand]:
    """Long-poll: claim pending commands, waiting up to ``wait_s`` for one to arrive.

    While waiting it watches a Redis hint set on commit of ``node_command_send``
    and rechecks the database every few seconds; between checks it gives its
    database connection back, so idle polls of a whole fleet hold none.
    """
    deadline = time.monotonic() + wait_s
    marker = _wake_marker(node.pk)
    commands = node_command_claim(node=node)
    last_db = time.monotonic()
    while not commands and time.monotonic() < deadline:
        if not connection.in_atomic_block:
            connection.close()
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
        current = _wake_marker(node.pk)
        now = time.monotonic()
        if current != marker or now - last_db >= _DB_RECHECK_S or now >= deadline:
            marker, last_db = current, now
            commands = node_command_claim(node=node)
    return commands


@transaction.atomic
def node_command_ack(*, node: Node, command_id: int, status: str, result: dict[str, Any] | None) -> NodeCommand:
    """Record the agent's answer. ``in_progress`` (sent again while the agent works) keeps the
    command from being redelivered and shows its progress; it is not audited. The same final
    answer twice is accepted; a different answer to a finished command is a conflict; a late
    ``in_progress`` after the final answer changes nothing. Another node's command does not exist."""
    if status not in ACK_STATES:
        raise ValueError(f"status must be one of {', '.join(ACK_STATES)}")
    command = NodeCommand.objects.select_for_update().filter(node=node, pk=command_id).first()
    if command is None:
        raise NodeCommand.DoesNotExist(f"no command {command_id} for {node.hostname}")
    now = timezone.now()
    if command.state in FINAL_COMMAND_STATES:
        if command.state == status or status == CommandState.IN_PROGRESS:
            return command
        raise Conflict(f"command {command_id} already finished as {command.state}")
    before = command.state
    command.state = status
    command.result = result or {}
    command.delivered_at = command.delivered_at or now
    if status == CommandState.IN_PROGRESS:
        command.progress_at = now
        command.save(update_fields=["state", "result", "delivered_at", "progress_at"])
        return command
    command.finished_at = now
    command.save(update_fields=["state", "result", "finished_at", "delivered_at"])
    audit_record(actor=f"agent:{node.hostname}", action="node_command.finish", target=node, source=Source.SYSTEM,
                 changes={"command": [command.pk, command.pk], "state": [before, status]}, related=command)
    return command


def node_commands_retention(*, now: dt.datetime, finished_before: dt.datetime) -> dict[str, int]:
    """Delete commands that finished before ``finished_before``; expire those still waiting past their
    ``expires_at``. Part of the telemetry retention run (the rollup retention applies to commands)."""
    deleted = NodeCommand.objects.filter(state__in=FINAL_COMMAND_STATES, finished_at__lt=finished_before).delete()[0]
    expired = NodeCommand.objects.filter(
        state__in=[CommandState.PENDING, CommandState.DELIVERED], expires_at__lt=now
    ).update(state=CommandState.EXPIRED, finished_at=now)
    return {"nodecommand": deleted, "expired_commands": expired}
