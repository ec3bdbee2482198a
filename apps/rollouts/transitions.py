"""Every write of a rollout's own state, in one place: start, wait for its change window (and the
window opening), pause (by an operator or on a failed gate), resume, abort, roll back, the next
wave, completed, rolled back, failed. The controls (``services.py``) lock, check and audit the
operator's request and call these; the controller (``controller.py``) calls them as the rollout
advances. Each saves what it changed, in the caller's transaction. A node's own steps are in
``nodes.py``."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.inventory import services as inventory_services
from apps.inventory.choices import CombinationState
from apps.rollouts.choices import IN_PROGRESS_STEPS, OnFailure, RolloutState, Step
from apps.rollouts.models import Rollout
from apps.rollouts.nodes import ACTOR, node_rollback_start, step_set


def start(r: Rollout, now: dt.datetime, *, window: str = "") -> None:
    """planned (or waiting for its first window) → canary: the canary starts. ``window``: the verdict
    of the change windows, in words."""
    before = r.state
    r.state, r.started_at, r.waiting_until = RolloutState.CANARY, now, None
    r.waiting_for = f"the canary starts; {window}" if window else ""
    r.save(update_fields=["state", "started_at", "waiting_until", "waiting_for"])
    audit_record(actor=ACTOR, action="rollout.start", target=r, source=Source.SYSTEM,
                 reason="the canary starts" + (f"; {window}" if window else ""),
                 changes={"state": [before, RolloutState.CANARY]})


def wait(r: Rollout, *, why: str, until: dt.datetime | None) -> None:
    """No wave is running and the change windows (or a freeze) say not now: ``waiting``, saying until
    when. One audit record when it starts waiting; the words follow the verdict after that."""
    before = r.state
    text = f"waiting for its change window: {why}"[:1000]
    if before == RolloutState.WAITING and (r.waiting_for, r.waiting_until) == (text, until):
        return
    r.state, r.waiting_for, r.waiting_until = RolloutState.WAITING, text, until
    r.save(update_fields=["state", "waiting_for", "waiting_until"])
    if before != RolloutState.WAITING:
        audit_record(actor=ACTOR, action="rollout.waiting", target=r, source=Source.SYSTEM, reason=text,
                     changes={"state": [before, RolloutState.WAITING], "wave": r.current_wave,
                              "until": until.isoformat() if until else None})


def window_opened(r: Rollout, *, window: str) -> None:
    """waiting → canary or waves: its window opened (or the freeze ended); the current wave starts."""
    state = RolloutState.CANARY if r.current_wave == 0 else RolloutState.WAVES
    r.state, r.waiting_until = state, None
    r.waiting_for = f"wave {r.current_wave} starting; {window}"[:1000]
    r.save(update_fields=["state", "waiting_until", "waiting_for"])
    audit_record(actor=ACTOR, action="rollout.window_opened", target=r, source=Source.SYSTEM,
                 reason=f"wave {r.current_wave} starts: {window}"[:4000],
                 changes={"state": [RolloutState.WAITING, state], "wave": r.current_wave})


def pause(r: Rollout, *, message: str, on: str = "") -> None:
    """No new node starts; nodes in progress finish their steps. ``on``: what it paused on, when not an
    operator's request."""
    r.paused_from, r.state, r.message, r.waiting_until = r.state, RolloutState.PAUSED, message, None
    r.waiting_for = f"paused{' on ' + on if on else ''}: waiting for resume, abort or rollback"
    r.save(update_fields=["paused_from", "state", "message", "waiting_for", "waiting_until"])


def resume(r: Rollout, *, by: str) -> None:
    """Go on where it paused: failed nodes it paused on go back to their last-known-good versions, the
    circuit breaker counts from here, and a cohort gate it paused on is passed (``by`` looked at the
    evidence and goes on)."""
    for rn in r.nodes.filter(step=Step.FAILED, needs_hand=False).select_related("node"):
        node_rollback_start(r, rn, why=f"resumed past its failure by {by}")
    r.failures_acknowledged = r.nodes.exclude(failure_kind="").count()
    r.gates = [{**g, "acknowledged": by}
               if g.get("kind") == "cohort" and g.get("wave") == r.current_wave and not g.get("ok") else g
               for g in r.gates]
    r.state, r.paused_from = r.paused_from or RolloutState.CANARY, ""
    r.message = ""
    r.save(update_fields=["state", "paused_from", "message", "failures_acknowledged", "gates"])


def abort(r: Rollout, *, why: str) -> None:
    """Stop: nodes in progress finish their steps, the rest stay on their versions (the fleet is left
    mixed, and the nodes on the target are named)."""
    for rn in r.nodes.filter(step=Step.PENDING).select_related("node"):
        rn.step, rn.reason, rn.waiting_for = Step.SKIPPED, "the rollout was aborted before its turn", ""
        rn.step_changed_at = timezone.now()
        rn.save(update_fields=["step", "reason", "waiting_for", "step_changed_at"])
    r.state, r.finished_at, r.waiting_until = RolloutState.ABORTED, timezone.now(), None
    upgraded = list(r.nodes.filter(step=Step.DONE).values_list("node__hostname", flat=True))
    r.message = why + f"; on the target: {', '.join(upgraded) or 'no node'}"
    r.waiting_for = ""
    r.save(update_fields=["state", "finished_at", "message", "waiting_for", "waiting_until"])


def rollback_begin(r: Rollout, why: str, now: dt.datetime | None = None) -> None:
    """The rollout rolls back: every node it touched goes back, nodes not reached are skipped."""
    now = now or timezone.now()
    r.state, r.message, r.paused_from, r.waiting_until = RolloutState.ROLLING_BACK, why[:4000], "", None
    r.waiting_for = "rolling back"
    r.save(update_fields=["state", "message", "paused_from", "waiting_for", "waiting_until"])
    for rn in r.nodes.select_related("node", "vector_run").order_by("wave", "position"):
        if rn.step == Step.PENDING:
            rn.reason = "the rollout rolled back before its turn"
            step_set(r, rn, Step.SKIPPED, now, why=rn.reason)
        elif rn.step in IN_PROGRESS_STEPS or rn.step == Step.DONE or (rn.step == Step.FAILED and not rn.needs_hand):
            node_rollback_start(r, rn, why=why, now=now)


def gate_failed(r: Rollout, why: str, now: dt.datetime) -> None:
    """A gate failed: roll back or pause, per the rollout's policy (one audit record)."""
    audit_record(actor=ACTOR, action="rollout.gate_failed", target=r, source=Source.SYSTEM, reason=why[:4000],
                 changes={"policy": r.on_failure})
    if r.on_failure == OnFailure.ROLLBACK:
        rollback_begin(r, why, now)
    else:
        pause(r, message=why[:4000], on="a failed gate")


def next_wave(r: Rollout) -> None:
    """The wave passed its gates: the next one starts."""
    before = r.state
    r.current_wave += 1
    r.state, r.wave_finished_at = RolloutState.WAVES, None
    r.waiting_for = f"wave {r.current_wave} starting"
    r.save(update_fields=["current_wave", "state", "wave_finished_at", "waiting_for"])
    audit_record(actor=ACTOR, action="rollout.wave", target=r, source=Source.SYSTEM,
                 reason=f"wave {r.current_wave} of {r.wave_count - 1} starts",
                 changes={"state": [before, r.state], "wave": [r.current_wave - 1, r.current_wave]})


def rolled_back(r: Rollout, now: dt.datetime) -> None:
    """Every node it touched is back: rolling back → rolled back."""
    r.state, r.finished_at, r.waiting_for = RolloutState.ROLLED_BACK, now, ""
    r.save(update_fields=["state", "finished_at", "waiting_for"])
    audit_record(actor=ACTOR, action="rollout.rolled_back", target=r, source=Source.SYSTEM, reason=r.message,
                 changes={"state": [RolloutState.ROLLING_BACK, RolloutState.ROLLED_BACK]})


def fail(r: Rollout, now: dt.datetime, why: str, *, before: str) -> None:
    """The rollout cannot go on and cannot put things back on its own: ``failed``, with the reason."""
    r.state, r.finished_at, r.waiting_for, r.paused_from = RolloutState.FAILED, now, "", ""
    r.message = why[:4000]
    r.save(update_fields=["state", "finished_at", "waiting_for", "paused_from", "message"])
    audit_record(actor=ACTOR, action="rollout.failed", target=r, source=Source.SYSTEM, reason=r.message,
                 changes={"state": [before, RolloutState.FAILED]})


def complete(r: Rollout, now: dt.datetime) -> None:
    """The last wave passed: ``completed`` and the combination pinned, the nodes not upgraded named; or
    ``failed`` when no node could be upgraded at all."""
    rows = list(r.nodes.select_related("node"))
    if not any(rn.step == Step.DONE for rn in rows):
        # Every node was skipped or failed on its own at its turn: nothing was upgraded, nothing to pin.
        left = [f"{rn.node.hostname} ({rn.reason or rn.step})" for rn in rows]
        fail(r, now, "no node could be upgraded: " + "; ".join(left[:20]), before=r.state)
        return
    combination = r.combination
    combination.refresh_from_db(fields=["state"])
    if combination.state == CombinationState.VALIDATED:
        inventory_services.combination_set_state(combination=combination, state=CombinationState.PINNED, actor=ACTOR,
                                                 source=Source.SYSTEM, reason=f"rollout #{r.pk} completed")
    done = [rn.node.hostname for rn in rows if rn.step == Step.DONE]
    left = [f"{rn.node.hostname} ({rn.reason})" for rn in rows if rn.step != Step.DONE]
    r.state, r.finished_at, r.waiting_for = RolloutState.COMPLETED, now, ""
    r.message = (f"{len(done)} node(s) upgraded; combination pinned"
                 + (f"; not upgraded: {'; '.join(left[:20])}" if left else ""))[:4000]
    r.save(update_fields=["state", "finished_at", "waiting_for", "message"])
    audit_record(actor=ACTOR, action="rollout.completed", target=r, source=Source.SYSTEM, reason=r.message,
                 changes={"state": [RolloutState.WAVES, RolloutState.COMPLETED]})
