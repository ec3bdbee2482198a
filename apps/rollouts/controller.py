"""The rollout controller: advances every rollout step by step from its stored state.

``rollout_advance`` is safe to call any number of times from any number of workers: the rollout
row is claimed with ``SKIP LOCKED`` (a second worker skips a rollout another is advancing), each
node's step is stored before the next is taken, and every step can be taken again (``nodes.py``).
A worker killed mid-pass loses the transaction of that pass; the next pass starts from what was
stored.

A pass moves each node a step (``nodes.py``), then the rollout itself: its gates (``gates.py``)
and its state (``transitions.py``, the one place that writes it).

Change windows (``apps.operations.windows``, actor ``rollouts``): a wave starts only when the windows
governing its nodes are open and no freeze covers them; otherwise the rollout is ``waiting``, saying
until when. A wave that has started finishes whatever the windows do (its gates, its bake).
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.common.events import FLEET_GROUP, publish
from apps.operations import windows
from apps.operations.choices import WindowActor
from apps.rollouts import gates, nodes, transitions
from apps.rollouts.choices import ACTIVE_ROLLOUT_STATES, FINAL_STEPS, IN_PROGRESS_STEPS, FailureKind, RolloutState, Step
from apps.rollouts.models import Rollout, RolloutNode

MAX_PASSES = 8


def _settled(rn: RolloutNode) -> bool:
    return rn.step in FINAL_STEPS or rn.needs_hand


def window_verdict(r: Rollout, now: dt.datetime) -> windows.Verdict:
    """What the change windows say about starting the rollout's current wave now."""
    nodes = [rn.node for rn in r.nodes.filter(wave=r.current_wave).select_related("node")]
    return windows.verdict(actor=WindowActor.ROLLOUTS, scope=windows.Scope.of_nodes(nodes), at=now)


def _window(r: Rollout, now: dt.datetime) -> None:
    """Before a wave starts: start it (or the canary) inside its window, or wait. A running wave is
    left alone: it finishes."""
    if r.state not in (RolloutState.PLANNED, RolloutState.WAITING, RolloutState.CANARY, RolloutState.WAVES):
        return
    if r.state in (RolloutState.CANARY, RolloutState.WAVES) and (
            r.wave_finished_at is not None
            or r.nodes.filter(wave=r.current_wave, started_at__isnull=False).exists()):
        return
    verdict = window_verdict(r, now)
    if not verdict.allowed:
        transitions.wait(r, why=verdict.why, until=verdict.until)
    elif r.state == RolloutState.PLANNED or (r.state == RolloutState.WAITING and r.started_at is None):
        transitions.start(r, now, window=verdict.why if verdict.governing else "")
    elif r.state == RolloutState.WAITING:
        transitions.window_opened(r, window=verdict.why)


def _rollout_step(r: Rollout, now: dt.datetime) -> None:
    rows = list(r.nodes.select_related("node", "vector_run").order_by("wave", "position"))
    if r.state in (RolloutState.CANARY, RolloutState.WAVES):
        failed = [rn for rn in rows if rn.step == Step.FAILED and rn.failure_kind == FailureKind.VERSIONS
                  and not rn.needs_hand]
        failures = sum(1 for rn in rows if rn.failure_kind) - r.failures_acknowledged
        why = ""
        if failed:
            why = (f"wave {r.current_wave}{' (canary)' if r.current_wave == 0 else ''} failed its gate: "
                   + "; ".join(rn.reason for rn in failed))
        elif failures >= r.max_failures:
            why = (f"circuit breaker: {failures} node(s) failed (limit {r.max_failures}): "
                   + "; ".join(f"{rn.node.hostname}: {rn.reason}" for rn in rows if rn.failure_kind)[:3000])
        if why:
            r.gates = [*r.gates, {"wave": r.current_wave, "at": now.isoformat(), "failed": why[:4000]}]
            r.save(update_fields=["gates"])
            transitions.gate_failed(r, why, now)
            return
        wave = [rn for rn in rows if rn.wave == r.current_wave]
        busy = [rn for rn in wave if not _settled(rn)]
        if busy:
            r.waiting_for = (f"wave {r.current_wave}: {len(busy)} node(s) in progress; "
                             + "; ".join(f"{rn.node.hostname}: {rn.waiting_for or rn.step}" for rn in busy[:5]))[:1000]
            return
        if r.wave_finished_at is None:
            r.wave_finished_at = now
            gate = gates.wave_gates(r, wave, now)
            r.gates = [*r.gates, gate]
            if not (gate["vectors"]["ok"] and gate["health"]["ok"]):
                r.save(update_fields=["gates"])
                transitions.gate_failed(r, f"wave {r.current_wave} failed its gate: {gate}", now)
                return
        until = r.wave_finished_at + dt.timedelta(seconds=r.bake_s)
        if now < until:
            r.waiting_for = (f"baking wave {r.current_wave} until {until:%H:%M:%S} UTC "
                             f"({(until - now).total_seconds():.0f} s); vectors and health passed; then the "
                             f"upgraded nodes' stage latency and errors are compared with the rest's "
                             f"(within {r.cohort_tolerance_pct} %)")
            return
        if not gates.cohort_passed(r):
            upgraded = [rn for rn in rows if rn.step == Step.DONE]
            control = [rn for rn in rows if rn.step == Step.PENDING and rn.wave is not None
                       and rn.wave > r.current_wave]
            gate = gates.cohort_gate(r, upgraded, control, r.wave_finished_at, now)
            r.gates = [*r.gates, gate]
            if not gate["ok"]:
                r.save(update_fields=["gates"])
                canary = " (canary)" if r.current_wave == 0 else ""
                transitions.gate_failed(r, f"wave {r.current_wave}{canary} failed the cohort gate over its bake "
                                           f"window: {gate['detail']}", now)
                return
            publish("rollout.gate", {"id": r.pk, "gate": gate}, groups=[FLEET_GROUP])
        if r.current_wave + 1 < r.wave_count:
            transitions.next_wave(r)
            return
        transitions.complete(r, now)
        return
    if r.state == RolloutState.ROLLING_BACK:
        busy = [rn for rn in rows if not _settled(rn) and rn.step not in (Step.DONE, Step.PENDING)]
        if busy:
            r.waiting_for = (f"rolling back {len(busy)} node(s): "
                             + "; ".join(f"{rn.node.hostname}: {rn.waiting_for or rn.step}" for rn in busy[:5]))[:1000]
            return
        stuck = [rn for rn in rows if rn.needs_hand]
        if stuck:
            # The rollback itself failed somewhere: the fleet is not back where it was.
            transitions.fail(r, now, f"{r.message}; the rollback failed on {len(stuck)} node(s), held for a check by "
                                  "hand: " + "; ".join(f"{rn.node.hostname}: {rn.reason}" for rn in stuck[:10]),
                          before=RolloutState.ROLLING_BACK)
            return
        transitions.rolled_back(r, now)
        return
    if r.state in (RolloutState.PAUSED, RolloutState.ABORTED):
        busy = [rn for rn in rows if rn.step in IN_PROGRESS_STEPS or rn.step == Step.ROLLING_BACK]
        if busy:
            r.waiting_for = (f"{r.state}: finishing {len(busy)} node(s) in progress: "
                             + "; ".join(f"{rn.node.hostname}: {rn.waiting_for or rn.step}" for rn in busy[:5]))[:1000]
        elif r.state == RolloutState.ABORTED:
            r.waiting_for = ""


def _pass(rollout_id: int) -> str | None:
    with transaction.atomic():
        r = (Rollout.objects.select_for_update(skip_locked=True, of=("self",))
             .select_related("combination", "combination__driver", "combination__framework", "module_type", "suite")
             .filter(pk=rollout_id).first())
        if r is None:
            return None
        now = timezone.now()
        before = (r.state, r.current_wave)
        for _ in range(MAX_PASSES):
            _window(r, now)
            moved = False
            for rn in (r.nodes.exclude(step__in=sorted(FINAL_STEPS)).filter(needs_hand=False)
                       .select_related("node", "vector_run").order_by("wave", "position")):
                if rn.step == Step.ROLLING_BACK:
                    moved = nodes.rollback(r, rn, now) or moved
                elif rn.step != Step.FAILED:
                    moved = nodes.forward(r, rn, now) or moved
            state = r.state
            _rollout_step(r, now)
            if not moved and r.state == state:
                break
        r.save()
        if (r.state, r.current_wave) != before:
            publish("rollout.state", {"id": r.pk, "state": r.state, "wave": r.current_wave,
                                      "waiting_for": r.waiting_for, "message": r.message}, groups=[FLEET_GROUP])
        return str(r.state)


def rollout_advance(rollout_id: int) -> str | None:
    """Advance one rollout as far as it goes now; its state (None when another worker has it)."""
    return _pass(rollout_id)


def rollouts_advance() -> dict[int, str | None]:
    """The sweep: every rollout that is active or still has nodes in progress."""
    busy = sorted(IN_PROGRESS_STEPS | {Step.ROLLING_BACK})
    ids = list(Rollout.objects.filter(Q(state__in=sorted(ACTIVE_ROLLOUT_STATES)) | Q(nodes__step__in=busy))
               .distinct().order_by("pk").values_list("pk", flat=True))
    return {pk: rollout_advance(pk) for pk in ids}
