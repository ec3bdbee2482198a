"""The remediation budget: the one verdict every automated actor asks before it takes a serving
node or module out, and the record of what it held back.

Who counts (automated disruptions, ``COUNTED``): health's cordons and quarantines (owner
``health``), the autoscaler's scale-down drains (owner ``autoscaler``), and the nightly and
versions-changed vector runs on serving nodes (a module each while the run is not over; read by
the vectors app's reader, registered at start-up since vectors sit above this floor). An
operator's holds are not automation. A rollout's holds are not counted either: a rollout is
started by an operator with its own ``max_unavailable`` per wave, its waves wait for change windows
and its gates stop it; counting its wave here would let a planned upgrade starve health's
remediation (or the reverse) without either being wrong about its own limit.

The limits, per tier and fleet-wide (settings ``HEALTH_*``, with health's other limits):

- ``max_unavailable``: automation holds at most this share of a tier's serving nodes at once (of
  its serving modules for module holds), at least one;
- the rate limit: at most max(3, ``actions_per_hour`` × the tier's serving nodes) automated holds
  started per tier in the last hour;
- ``fleet_max_unavailable``: at most this share of the fleet's serving nodes (modules) held by
  automation at once, at least one, whatever the tiers allow.

``ask`` takes a transaction-scoped advisory lock, so two actors asking at once are judged one after
the other; the caller takes its holds in the same transaction, before the lock is let go.

An actor refused (or granted less than it asked) does not act on the rest and records it here
(``held_back_record``); the record stands until that actor asks again and is granted
(``held_back_clear``) or for ``HELD_BACK_STALE_S`` without being renewed. Health reads the
records into its ``budget_held_back`` finding per tier.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.inventory.choices import SERVING_STATES, ModuleState
from apps.inventory.models import Module, Node, Tier
from apps.operations.choices import ACTIVE_DRAIN_STATES, Owner, WindowActor
from apps.operations.models import BudgetHeldBack, Drain, Quarantine

NODES, MODULES = "nodes", "modules"
# The owners of operations' holds that are automation, and the actor each one asks as.
OWNER_ACTORS = {Owner.HEALTH.value: WindowActor.HEALTH_ACTIONS.value,
                Owner.AUTOSCALER.value: WindowActor.SCALE_DOWN.value}
COUNTED = (WindowActor.HEALTH_ACTIONS.value, WindowActor.SCALE_DOWN.value, WindowActor.VECTOR_RUNS.value)
ACTOR = "budget"  # who writes the held-back records' audit trail
LOCK = "operations:budget"


def held_back_stale_s() -> float:
    """A held-back record not renewed for this long no longer stands (the actor stopped asking)."""
    return float(getattr(settings, "HEALTH_BUDGET_STALE_S", 900))


@dataclass(frozen=True)
class Limits:
    max_unavailable: float = 0.10  # share of a tier's serving nodes (modules) automation may hold at once
    actions_per_hour: float = 0.10  # automated holds started per tier per hour: max(3, this share of its nodes)
    fleet_max_unavailable: float = 0.10  # share of the fleet's serving nodes (modules) held by automation at once


def limits() -> Limits:
    return Limits(**{k: float(getattr(settings, f"HEALTH_{k.upper()}", v)) for k, v in Limits().__dict__.items()})


# ---- what automation holds ------------------------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """One automated hold: ``kind`` nodes or modules; ``active``: holding now; ``started_at``: when it began."""

    actor: str
    tier_id: int
    kind: str
    active: bool
    started_at: dt.datetime


Reader = Callable[[dt.datetime], Iterable[Hold]]
_READERS: dict[str, Reader] = {}


def reader_register(name: str, reader: Reader) -> None:
    """An app above this floor declares how to read its automated holds (active, or started since the
    time given). Registered once per process at start-up (the app's ``ready``)."""
    _READERS[name] = reader


def serving_counts() -> dict[int, dict[str, int]]:
    """Per tier id: serving nodes (cordoned and draining ones included) and the modules of serving nodes
    that serve or are quarantined (the limits' denominators: a hold taken does not shrink them)."""
    out: dict[int, dict[str, int]] = defaultdict(lambda: {NODES: 0, MODULES: 0})
    for tier_id in Node.objects.filter(state__in=SERVING_STATES).values_list("tier_id", flat=True):
        out[tier_id][NODES] += 1
    for tier_id in Module.objects.filter(node__state__in=SERVING_STATES,
                                         state__in=(ModuleState.HEALTHY, ModuleState.DEGRADED,
                                                    ModuleState.QUARANTINED)).values_list(
            "node__tier_id", flat=True):
        out[tier_id][MODULES] += 1
    return out


def _operations_holds(since: dt.datetime) -> list[Hold]:
    owners = list(OWNER_ACTORS)
    out = []
    for owner, tier_id, state, created in Drain.objects.filter(
            Q(state__in=ACTIVE_DRAIN_STATES) | Q(created_at__gte=since), owner__in=owners).values_list(
            "owner", "node__tier_id", "state", "created_at"):
        out.append(Hold(OWNER_ACTORS[owner], tier_id, NODES, state in ACTIVE_DRAIN_STATES, created))
    for owner, tier_id, released, created in Quarantine.objects.filter(
            Q(released_at__isnull=True) | Q(created_at__gte=since), owner__in=owners,
            module__node__isnull=False).values_list("owner", "module__node__tier_id", "released_at", "created_at"):
        out.append(Hold(OWNER_ACTORS[owner], tier_id, MODULES, released is None, created))
    return out


@dataclass
class Usage:
    """What automation holds now and started in the last hour, per tier and actor, and what serves."""

    serving: dict[int, dict[str, int]]
    held: dict[str, dict[int, Counter[str]]] = field(
        default_factory=lambda: {NODES: defaultdict(Counter), MODULES: defaultdict(Counter)})
    started: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def take(self, *, actor: str, tier_id: int, kind: str, count: int = 1) -> None:
        """Count holds just taken (the caller's own, before reading again)."""
        self.held[kind][tier_id][actor] += count
        self.started[tier_id][actor] += count


def usage(*, now: dt.datetime) -> Usage:
    since = now - dt.timedelta(hours=1)
    u = Usage(serving=serving_counts())
    holds = _operations_holds(since)
    for reader in _READERS.values():
        holds += list(reader(since))
    for h in holds:
        if h.active:
            u.held[h.kind][h.tier_id][h.actor] += 1
        if h.started_at >= since:
            u.started[h.tier_id][h.actor] += 1
    return u


# ---- the verdict --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """How many of the ``asked`` holds ``actor`` may take on the tier now (``granted``), the limit that
    decided when it is less (``limit``), ``why`` in words with the numbers, and the numbers."""

    actor: str
    tier_id: int
    kind: str
    asked: int
    granted: int
    limit: str
    why: str
    numbers: dict[str, Any]

    @property
    def allowed(self) -> bool:
        return self.granted >= self.asked

    @property
    def held_back(self) -> int:
        return self.asked - self.granted


def _by_actor(counts: Counter[str]) -> str:
    return ", ".join(f"{WindowActor(a).label.lower()} {counts[a]}" for a in COUNTED if counts.get(a)) or "none"


def judge(u: Usage, *, actor: str, tier_id: int, tier_name: str, kind: str, asked: int, lim: Limits) -> Verdict:
    """The budget's verdict on ``asked`` new ``kind`` holds by ``actor`` on the tier (pure)."""
    serving = u.serving.get(tier_id, {NODES: 0, MODULES: 0})
    tier_held = u.held[kind].get(tier_id, Counter())
    held = sum(tier_held.values())
    tier_allowed = max(1, math.floor(lim.max_unavailable * serving[kind]))
    started_counts = u.started.get(tier_id, Counter())
    started = sum(started_counts.values())
    per_hour = max(3, math.ceil(lim.actions_per_hour * serving[NODES]))
    fleet_serving = sum(s[kind] for s in u.serving.values())
    fleet_counts: Counter[str] = Counter()
    for counts in u.held[kind].values():
        fleet_counts.update(counts)
    fleet_held = sum(fleet_counts.values())
    fleet_allowed = max(1, math.floor(lim.fleet_max_unavailable * fleet_serving))
    numbers = {"kind": kind, "asked": asked, "held": held, "held_by": dict(tier_held), "serving": serving[kind],
               "max_unavailable": tier_allowed, "started_last_hour": started, "started_by": dict(started_counts),
               "per_hour": per_hour, "fleet_held": fleet_held, "fleet_held_by": dict(fleet_counts),
               "fleet_serving": fleet_serving, "fleet_max_unavailable": fleet_allowed}
    room = {"max_unavailable": tier_allowed - held, "rate": per_hour - started,
            "fleet": fleet_allowed - fleet_held}
    granted = max(0, min(asked, *room.values()))
    if granted >= asked:
        return Verdict(actor=actor, tier_id=tier_id, kind=kind, asked=asked, granted=granted, numbers=numbers,
                       limit="", why=(
            f"within the budget: automation holds {held} of {serving[kind]} serving {kind} of {tier_name} (at most "
            f"{tier_allowed}), {started} started in the last hour (at most {per_hour}), {fleet_held} of "
            f"{fleet_serving} of the fleet (at most {fleet_allowed})"))
    limit = min(room, key=lambda k: (room[k], list(room).index(k)))
    if limit == "max_unavailable":
        why = (f"max_unavailable: automation already holds {held} of {serving[kind]} serving {kind} of {tier_name} "
               f"({_by_actor(tier_held)}; at most {tier_allowed})")
    elif limit == "rate":
        why = (f"rate limit: {started} automated holds started on {tier_name} in the last hour "
               f"({_by_actor(started_counts)}; at most {per_hour})")
    else:
        why = (f"fleet-wide cap: automation already holds {fleet_held} of the fleet's {fleet_serving} serving {kind} "
               f"({_by_actor(fleet_counts)}; at most {fleet_allowed})")
    if granted:
        why += f": {granted} of {asked} granted"
    return Verdict(actor=actor, tier_id=tier_id, kind=kind, asked=asked, granted=granted, numbers=numbers,
                   limit=limit, why=why)


def _lock() -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("the budget is asked in the transaction that takes the holds")
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [LOCK])


def ask(*, actor: str, tier: Tier, kind: str, asked: int, now: dt.datetime, lim: Limits | None = None) -> Verdict:
    """The verdict on ``asked`` new holds, read under the budget's lock: call it in the transaction that
    takes the holds, so a concurrent actor's ask waits for them to be counted."""
    return ask_each(actor=actor, asks=[(tier, kind, asked)], now=now, lim=lim)[0]


def ask_each(*, actor: str, asks: list[tuple[Tier, str, int]], now: dt.datetime,
             lim: Limits | None = None) -> list[Verdict]:
    """``ask`` for several tiers at once (one lock, one read): each grant is counted before the next
    tier is judged, so the fleet-wide cap holds across them."""
    assert actor in COUNTED, actor
    _lock()
    u, lim = usage(now=now), lim or limits()
    out = []
    for tier, kind, asked in asks:
        v = judge(u, actor=actor, tier_id=tier.pk, tier_name=tier.name, kind=kind, asked=asked, lim=lim)
        u.take(actor=actor, tier_id=tier.pk, kind=kind, count=v.granted)
        out.append(v)
    return out


# ---- what was held back -------------------------------------------------------------------------


def held_back_record(*, verdict: Verdict, tier: Tier, wanted: str, now: dt.datetime) -> BudgetHeldBack:
    """``verdict``'s actor did not take what the budget refused on ``tier``: one record per (actor,
    tier), renewed while it is held back; its start is audited."""
    fields = {"kind": verdict.kind, "wanted": wanted[:500], "asked": verdict.asked, "granted": verdict.granted,
              "limit": verdict.limit, "why": verdict.why[:1000], "numbers": verdict.numbers, "last_at": now}
    with transaction.atomic():
        row = BudgetHeldBack.objects.select_for_update().filter(actor=verdict.actor, tier=tier).first()
        if row is not None:
            for k, v in fields.items():
                setattr(row, k, v)
            row.times += 1
            row.save()
            return row
        try:
            with transaction.atomic():
                row = BudgetHeldBack.objects.create(actor=verdict.actor, tier=tier, first_at=now, **fields)
        except IntegrityError:  # a concurrent twin recorded it first: renew theirs
            row = BudgetHeldBack.objects.select_for_update().get(actor=verdict.actor, tier=tier)
            for k, v in fields.items():
                setattr(row, k, v)
            row.times += 1
            row.save()
            return row
        audit_record(actor=ACTOR, action="budget.held_back", target=tier, source=Source.SYSTEM,
                     reason=f"{WindowActor(verdict.actor).label}: {wanted}: {verdict.why}"[:1000],
                     changes={"actor": verdict.actor, "asked": verdict.asked, "granted": verdict.granted,
                              "limit": verdict.limit, **verdict.numbers})
    return row


def held_back_clear(*, actor: str, tier_ids: Iterable[int] | None = None, keep: Iterable[int] = (),
                    now: dt.datetime) -> list[int]:
    """``actor`` asked again and was granted on these tiers (None: every tier but ``keep``): what it was
    held back on no longer stands. Audited per record. Returns the tier ids cleared."""
    qs = BudgetHeldBack.objects.filter(actor=actor).exclude(tier_id__in=list(keep))
    if tier_ids is not None:
        qs = qs.filter(tier_id__in=list(tier_ids))
    cleared = []
    with transaction.atomic():
        for row in qs.select_for_update().select_related("tier"):
            audit_record(actor=ACTOR, action="budget.resumed", target=row.tier, source=Source.SYSTEM,
                         reason=f"{WindowActor(actor).label}: no longer held back (held back {row.times} time(s) "
                                f"since {row.first_at:%Y-%m-%d %H:%M:%S})",
                         changes={"actor": actor, "first_at": row.first_at.isoformat(),
                                  "last_at": row.last_at.isoformat(), "at": now.isoformat()})
            cleared.append(row.tier_id)
            row.delete()
    return cleared


def held_back_standing(*, now: dt.datetime) -> list[BudgetHeldBack]:
    """The held-back records that stand at ``now`` (renewed within ``held_back_stale_s``), newest first."""
    cutoff = now - dt.timedelta(seconds=held_back_stale_s())
    return list(BudgetHeldBack.objects.filter(last_at__gte=cutoff).select_related("tier").order_by("-last_at", "-id"))
