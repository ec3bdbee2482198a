"""Five-field cron expressions (minute hour day-of-month month day-of-week), evaluated in a time zone.

Pure: no Django. ``parse`` checks an expression and says which field is wrong; ``next_fire`` gives
the first firing at or after an instant, in the expression's zone, safe across daylight-saving
changes:

- a local time the clocks skip (spring forward) fires at the same elapsed instant, i.e. just after
  the jump (02:30 in a zone that jumps 02:00 → 03:00 fires at 03:30 local);
- a local time that happens twice (fall back) fires once, at its first occurrence.

Fields take ``*``, numbers, ranges ``a-b``, steps ``*/n`` and ``a-b/n``, lists ``a,b``, and the
English three-letter names of months and week days. Day of week: 0 or 7 is Sunday. When both the
day of month and the day of week are restricted, a day matching either fires (as classic cron).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo

MONTHS = {name: i for i, name in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
DAYS = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}

# name, lowest, highest, names
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
)

SEARCH_DAYS = 366 * 5  # a 29 February on a Monday can be years away; past this, "never"


class CronError(ValueError):
    """The expression is not valid; the message names the field and what is wrong."""


@dataclass(frozen=True)
class Cron:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday … 6 = Saturday
    days_restricted: bool
    weekdays_restricted: bool

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays


def _number(text: str, field: str, low: int, high: int, names: dict[str, int]) -> int:
    value = names.get(text.lower()) if names else None
    if value is None:
        if not text.isdigit():
            raise CronError(f"the {field} field has {text!r}, which is not a number"
                            + (f" or a name ({', '.join(names)})" if names else ""))
        value = int(text)
    if not low <= value <= high:
        raise CronError(f"the {field} field has {value}, outside {low}–{high}")
    return value


def _field(text: str, field: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        if not item:
            raise CronError(f"the {field} field {text!r} has an empty list item")
        base, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"the {field} field has the step {step_text!r}; a step is a whole number from 1")
            step = int(step_text)
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = _number(a, field, low, high, names), _number(b, field, low, high, names)
            if first > last:
                raise CronError(f"the {field} field has the range {base!r}, which runs backwards")
        else:
            first = _number(base, field, low, high, names)
            last = high if step_text else first
        out.update(range(first, last + 1, step))
    return out


def parse(expression: str) -> Cron:
    parts = expression.split()
    if len(parts) != 5:
        raise CronError(f"a cron expression has 5 fields (minute hour day-of-month month day-of-week); "
                        f"{expression!r} has {len(parts)}")
    values = [_field(part, *spec) for part, spec in zip(parts, FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in values[4])
    return Cron(minutes=tuple(sorted(values[0])), hours=tuple(sorted(values[1])), days=frozenset(values[2]),
                months=frozenset(values[3]), weekdays=weekdays,
                days_restricted=parts[2] != "*", weekdays_restricted=parts[4] != "*")


def _local_instant(day: dt.date, hour: int, minute: int, zone: ZoneInfo) -> dt.datetime:
    """The instant a local wall time means: the first of two in a repeated hour; in a skipped hour,
    the same elapsed instant (the clocks' jump applied)."""
    return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone, fold=0).astimezone(dt.UTC)


def _skipped(at: dt.datetime, wall: dt.datetime, zone: ZoneInfo) -> bool:
    """Whether the local wall time ``wall`` does not exist (the clocks jumped over it)."""
    return at.astimezone(zone).replace(tzinfo=None) != wall


def _first(cron: Cron, zone: ZoneInfo, day: dt.date, *, after: dt.datetime | None = None,
           before: dt.datetime | None = None) -> dt.datetime | None:
    """The day's first firing at or after ``after``, or (with ``before``) its last strictly before it.

    The wall times are walked in order (backwards for ``before``) and the first existing one that fits
    ends the walk; a skipped wall time fires after the jump, later than the wall order says, so it is
    kept aside and compared at the end. Hours wholly outside the bound are passed over without
    converting a time."""
    backwards = before is not None
    bound = (before if backwards else after)
    assert bound is not None
    wall_bound = bound.astimezone(zone).replace(tzinfo=None)
    hours = reversed(cron.hours) if backwards else cron.hours
    midnight = dt.datetime(day.year, day.month, day.day, tzinfo=zone)
    # No jump on this day: wall order is time order, so the wall clock alone says what fits.
    steady = midnight.utcoffset() == (midnight + dt.timedelta(days=1)).utcoffset()
    slack = dt.timedelta(0) if steady else dt.timedelta(hours=2)
    aside: list[dt.datetime] = []
    for hour in hours:
        first = dt.datetime(day.year, day.month, day.day, hour, 0)
        if not backwards and first + dt.timedelta(minutes=59) < wall_bound - slack:
            continue
        if backwards and first > wall_bound + slack:
            continue
        for minute in (reversed(cron.minutes) if backwards else cron.minutes):
            wall = first.replace(minute=minute)
            if steady and ((wall > wall_bound) if backwards else (wall < wall_bound.replace(second=0, microsecond=0))):
                continue
            at = _local_instant(day, hour, minute, zone)
            fits = at < bound if backwards else at >= bound
            if not fits:
                continue
            if _skipped(at, wall, zone):
                aside.append(at)
                continue
            aside.append(at)
            return max(aside) if backwards else min(aside)
    if not aside:
        return None
    return max(aside) if backwards else min(aside)


def next_fire(cron: Cron, zone: ZoneInfo, after: dt.datetime) -> dt.datetime | None:
    """The first firing at or after ``after`` (an aware instant), as an aware UTC instant; None when it
    never fires within the search horizon (e.g. 31 February)."""
    start = after.astimezone(dt.UTC)
    day = (start.astimezone(zone) - dt.timedelta(days=1)).date()  # a day early: a skipped hour may map later
    for _ in range(SEARCH_DAYS + 2):
        if cron.day_matches(day):
            at = _first(cron, zone, day, after=start)
            if at is not None:
                return at
        day += dt.timedelta(days=1)
    return None


def prev_fire(cron: Cron, zone: ZoneInfo, before: dt.datetime) -> dt.datetime | None:
    """The last firing strictly before ``before``, as an aware UTC instant; None within the horizon."""
    end = before.astimezone(dt.UTC)
    day = (end.astimezone(zone) + dt.timedelta(days=1)).date()
    for _ in range(SEARCH_DAYS + 2):
        if cron.day_matches(day):
            at = _first(cron, zone, day, before=end)
            if at is not None:
                return at
        day -= dt.timedelta(days=1)
    return None


def zone(name: str) -> ZoneInfo:
    """The named IANA zone; CronError when there is none of that name."""
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise CronError(f"{name!r} is not a known time zone (an IANA name such as 'Europe/Berlin' or 'UTC')") from exc
