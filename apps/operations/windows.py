"""Change windows and freezes: the admins' writes (audited) and the one reader every actor asks,
"may actor X act on scope S at time T, and if not, until when" (``verdict``).

The rules (docs/windows.md):

- windows are opt-in: an actor no window governs in a scope is unrestricted there;
- a window governs a scope when it is fleet-wide or names one of the scope's tiers or racks;
  several windows govern → inside any of them is inside;
- a freeze covering the scope beats every window: the actor only observes until it ends;
- "until when" is the next instant both hold: no freeze, and inside a governing window (its next
  opening from the cron expression in the window's own time zone, ``apps.common.cron``).

Openings are computed, never stored: a window's row is its whole definition.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from apps.audit.choices import Source
from apps.audit.services import actor_name, audit_record, diff, snapshot
from apps.common import cron
from apps.inventory.models import Node, Rack, Tier
from apps.operations.choices import WindowActor
from apps.operations.models import ChangeWindow, Freeze

NEXT_STEPS = 64  # freezes and windows alternating past this many times: "not within sight"


# ---- the scope an actor acts on ---------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    tiers: frozenset[int] = frozenset()
    racks: frozenset[int] = frozenset()

    @classmethod
    def of_nodes(cls, nodes: Iterable[Node]) -> Scope:
        nodes = list(nodes)
        return cls(tiers=frozenset(n.tier_id for n in nodes), racks=frozenset(n.rack_id for n in nodes))

    @classmethod
    def of_tier(cls, tier: Tier) -> Scope:
        """A tier and every rack that holds one of its nodes."""
        racks = Node.objects.filter(tier=tier).values_list("rack_id", flat=True).distinct()
        return cls(tiers=frozenset({tier.pk}), racks=frozenset(racks))


def _covers(tiers: set[int], racks: set[int], scope: Scope) -> bool:
    return (not tiers and not racks) or bool(tiers & scope.tiers) or bool(racks & scope.racks)


def scope_text(obj: ChangeWindow | Freeze) -> str:
    tiers = [t.name for t in obj.tiers.all()]
    racks = [r.name for r in obj.racks.all()]
    if not tiers and not racks:
        return "the fleet"
    return "; ".join(p for p in (f"tiers {', '.join(tiers)}" if tiers else "",
                                 f"racks {', '.join(racks)}" if racks else "") if p)


# ---- openings -----------------------------------------------------------------------------------


def next_opening(window: ChangeWindow, after: dt.datetime) -> dt.datetime | None:
    return cron.next_fire(cron.parse(window.cron), cron.zone(window.time_zone), after)


def open_at(window: ChangeWindow, at: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
    """(opened, closes) of the window's latest opening at or before ``at`` when it is still open then;
    None when the window is closed."""
    length = dt.timedelta(minutes=window.duration_minutes)
    opened = cron.prev_fire(cron.parse(window.cron), cron.zone(window.time_zone), at + dt.timedelta(microseconds=1))
    if opened is None or opened + length <= at:
        return None
    return opened, opened + length


def openings(window: ChangeWindow, start: dt.datetime, end: dt.datetime) -> list[tuple[dt.datetime, dt.datetime]]:
    """Every (opens, closes) that overlaps [start, end), in order, overlapping openings merged into one
    (a window firing every 5 minutes for 10 is open throughout: one span, not hundreds) (the calendar)."""
    expr, zone = cron.parse(window.cron), cron.zone(window.time_zone)
    length = dt.timedelta(minutes=window.duration_minutes)
    out: list[tuple[dt.datetime, dt.datetime]] = []
    at = start - length + dt.timedelta(microseconds=1)
    while len(out) < 2000:
        opened = cron.next_fire(expr, zone, at)
        if opened is None or opened >= end:
            break
        closes, last = opened + length, opened
        while closes < end:  # the latest opening before this one closes keeps it open longer
            later = cron.prev_fire(expr, zone, closes)
            if later is None or later <= last:
                break
            last, closes = later, later + length
        out.append((opened, closes))
        at = closes
    return out


# ---- the verdict -------------------------------------------------------------------------------


def _utc(at: dt.datetime) -> str:
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


@dataclass(frozen=True)
class Verdict:
    """Whether ``actor`` may act on the scope now; ``why`` says so in words, naming the window or
    freeze that decides; ``until``: when it may act (held) or when its window closes (inside one)."""

    actor: str
    allowed: bool
    why: str
    window: str = ""  # the window it is inside, when one governs
    governing: list[str] = field(default_factory=list)  # every window that governs it here
    freeze: Freeze | None = None
    until: dt.datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"actor": self.actor, "allowed": self.allowed, "why": self.why, "window": self.window,
                "governing": self.governing, "freeze": self.freeze.pk if self.freeze else None,
                "until": self.until.isoformat() if self.until else None}


def _rules(actor: str, scope: Scope, at: dt.datetime) -> tuple[list[ChangeWindow], list[Freeze]]:
    windows = [w for w in ChangeWindow.objects.prefetch_related("tiers", "racks")
               if actor in w.actors
               and _covers({t.pk for t in w.tiers.all()}, {r.pk for r in w.racks.all()}, scope)]
    freezes = [f for f in Freeze.objects.filter(ends_at__gt=at).prefetch_related("tiers", "racks")
               if _covers({t.pk for t in f.tiers.all()}, {r.pk for r in f.racks.all()}, scope)]
    return windows, freezes


def _next_allowed(windows: list[ChangeWindow], freezes: list[Freeze], at: dt.datetime) -> dt.datetime | None:
    t = at
    for _ in range(NEXT_STEPS):
        frozen = [f for f in freezes if f.starts_at <= t < f.ends_at]
        if frozen:
            t = max(f.ends_at for f in frozen)
            continue
        if windows and not any(open_at(w, t) for w in windows):
            nexts = [n for w in windows if (n := next_opening(w, t)) is not None]
            if not nexts:
                return None
            t = min(nexts)
            continue
        return t
    return None


def verdict(*, actor: str, scope: Scope, at: dt.datetime) -> Verdict:
    """May ``actor`` (a ``WindowActor``) act on ``scope`` at ``at``?"""
    windows, freezes = _rules(actor, scope, at)
    names = [w.name for w in windows]
    frozen = [f for f in freezes if f.starts_at <= at < f.ends_at]
    if frozen:
        freeze = max(frozen, key=lambda f: f.ends_at)
        until = _next_allowed(windows, freezes, at)
        then = f"; then {_utc(until)}" if until and until != freeze.ends_at else ""
        return Verdict(actor=actor, allowed=False, governing=names, freeze=freeze, until=until,
                       why=f"frozen until {_utc(freeze.ends_at)} ({freeze.reason}){then}: observe only")
    if not windows:
        return Verdict(actor=actor, allowed=True, why=f"no change window governs {WindowActor(actor).label.lower()} "
                                                      "here: unrestricted")
    inside = [(w, span) for w in windows if (span := open_at(w, at)) is not None]
    if inside:
        w, (_, closes) = max(inside, key=lambda pair: pair[1][1])
        return Verdict(actor=actor, allowed=True, window=w.name, governing=names, until=closes,
                       why=f"inside change window {w.name!r} (open until {_utc(closes)})")
    until = _next_allowed(windows, freezes, at)
    when = f"waiting until {_utc(until)}" if until else "no opening in sight"
    return Verdict(actor=actor, allowed=False, governing=names, until=until,
                   why=f"outside change window{'s' if len(names) > 1 else ''} "
                       f"{', '.join(repr(n) for n in names)}: {when}")


def held_nodes(*, actor: str, nodes: Iterable[Node], at: dt.datetime) -> dict[int, Verdict]:
    """The nodes among ``nodes`` that ``actor`` may not act on at ``at``, each with its verdict (one
    verdict per tier and rack)."""
    verdicts: dict[tuple[int, int], Verdict] = {}
    out: dict[int, Verdict] = {}
    for node in nodes:
        key = (node.tier_id, node.rack_id)
        if key not in verdicts:
            verdicts[key] = verdict(actor=actor, scope=Scope(tiers=frozenset({key[0]}), racks=frozenset({key[1]})),
                                    at=at)
        if not verdicts[key].allowed:
            out[node.pk] = verdicts[key]
    return out


def freeze_now(*, scope: Scope, at: dt.datetime) -> Freeze | None:
    """The freeze covering ``scope`` at ``at`` (the one ending last), or None."""
    frozen = [f for f in Freeze.objects.filter(starts_at__lte=at, ends_at__gt=at).prefetch_related("tiers", "racks")
              if _covers({t.pk for t in f.tiers.all()}, {r.pk for r in f.racks.all()}, scope)]
    return max(frozen, key=lambda f: f.ends_at) if frozen else None


# ---- reads for the page and the API -------------------------------------------------------------


def window_list() -> Any:
    return ChangeWindow.objects.prefetch_related("tiers", "racks").order_by("name")


def freeze_list() -> Any:
    return Freeze.objects.prefetch_related("tiers", "racks").order_by("starts_at", "id")


@dataclass(frozen=True)
class Span:
    kind: str  # "window" or "freeze"
    id: int
    title: str
    starts: dt.datetime
    ends: dt.datetime
    scope: str
    detail: str


def calendar(*, start: dt.datetime, days: int) -> list[Span]:
    """Every window opening and freeze that overlaps the ``days`` from ``start``, in order."""
    end = start + dt.timedelta(days=days)
    spans: list[Span] = []
    for w in window_list():
        actors = ", ".join(WindowActor(a).label.lower() for a in w.actors)
        for opens, closes in openings(w, start, end):
            spans.append(Span("window", w.pk, w.name, opens, closes, scope_text(w),
                              f"{w.cron} ({w.time_zone}), {w.duration_minutes} min: {actors}"))
    for f in freeze_list().filter(ends_at__gt=start, starts_at__lt=end):
        spans.append(Span("freeze", f.pk, "Freeze", f.starts_at, f.ends_at, scope_text(f), f.reason))
    return sorted(spans, key=lambda s: (s.starts, s.kind, s.id))


# ---- the admins' writes -------------------------------------------------------------------------


def _scope_set(obj: ChangeWindow | Freeze, tiers: list[Tier] | None, racks: list[Rack] | None) -> None:
    if tiers is not None:
        obj.tiers.set(tiers)
    if racks is not None:
        obj.racks.set(racks)


def _scope_snapshot(obj: ChangeWindow | Freeze) -> dict[str, Any]:
    return {**snapshot(obj), "tiers": sorted(t.pk for t in obj.tiers.all()),
            "racks": sorted(r.pk for r in obj.racks.all())}


@transaction.atomic
def window_save(*, window: ChangeWindow, actor: Any, tiers: list[Tier] | None = None,
                racks: list[Rack] | None = None, reason: str = "", source: str = Source.API) -> ChangeWindow:
    """Create or change a window (one audit record with what changed)."""
    created = window.pk is None
    before = None if created else _scope_snapshot(ChangeWindow.objects.select_for_update().get(pk=window.pk))
    if created:
        window.created_by_name = actor_name(actor)
    window.full_clean()
    try:
        with transaction.atomic():  # a concurrent twin that took the name between the check and here
            window.save()
    except IntegrityError as exc:
        raise ValidationError({"name": f"a window named {window.name!r} already exists"}) from exc
    _scope_set(window, tiers, racks)
    audit_record(actor=actor, action="change_window.create" if created else "change_window.update", target=window,
                 source=source, reason=reason, changes=diff(before, _scope_snapshot(window)))
    return window


@transaction.atomic
def window_delete(*, window: ChangeWindow, actor: Any, reason: str = "", source: str = Source.API) -> None:
    before = _scope_snapshot(window)
    pk, text = str(window.pk), str(window)
    deleted, _ = ChangeWindow.objects.filter(pk=window.pk).delete()
    if deleted:  # a concurrent twin already deleted it: nothing happened here, nothing to record
        audit_record(actor=actor, action="change_window.delete", target_type="changewindow", target_id=pk,
                     target_repr=text, source=source, reason=reason, changes=diff(before, None))


@transaction.atomic
def freeze_save(*, freeze: Freeze, actor: Any, tiers: list[Tier] | None = None, racks: list[Rack] | None = None,
                source: str = Source.API) -> Freeze:
    """Create or change a freeze (one audit record; its reason is the freeze's own)."""
    created = freeze.pk is None
    before = None if created else _scope_snapshot(Freeze.objects.select_for_update().get(pk=freeze.pk))
    if created:
        freeze.created_by_name = actor_name(actor)
    freeze.full_clean()
    freeze.save()
    _scope_set(freeze, tiers, racks)
    audit_record(actor=actor, action="freeze.create" if created else "freeze.update", target=freeze, source=source,
                 reason=freeze.reason, changes=diff(before, _scope_snapshot(freeze)))
    return freeze


@transaction.atomic
def freeze_delete(*, freeze: Freeze, actor: Any, reason: str = "", source: str = Source.API) -> None:
    before = _scope_snapshot(freeze)
    pk, text = str(freeze.pk), str(freeze)
    deleted, _ = Freeze.objects.filter(pk=freeze.pk).delete()
    if deleted:
        audit_record(actor=actor, action="freeze.delete", target_type="freeze", target_id=pk, target_repr=text,
                     source=source, reason=reason, changes=diff(before, None))

