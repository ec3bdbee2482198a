"""Cron expressions: each field's errors named, firings in the expression's own zone across
daylight-saving changes."""

from __future__ import annotations

import datetime as dt

import pytest

from apps.common import cron

UTC = dt.UTC


def _next(expr: str, zone: str, after: dt.datetime) -> dt.datetime | None:
    return cron.next_fire(cron.parse(expr), cron.zone(zone), after)


@pytest.mark.parametrize(("expr", "words"), [
    ("* * *", "5 fields"),
    ("61 * * * *", "minute field has 61, outside 0–59"),
    ("* 24 * * *", "hour field has 24"),
    ("* * 0 * *", "day of month field has 0"),
    ("* * * 13 *", "month field has 13"),
    ("* * * * funday", "day of week field has 'funday'"),
    ("*/0 * * * *", "step '0'"),
    ("5-1 * * * *", "runs backwards"),
    ("1,,2 * * * *", "empty list item"),
])
def test_it_names_the_field_that_is_wrong(expr: str, words: str) -> None:
    with pytest.raises(cron.CronError, match=words):
        cron.parse(expr)


def test_it_refuses_an_unknown_zone() -> None:
    with pytest.raises(cron.CronError, match="not a known time zone"):
        cron.zone("Mars/Olympus_Mons")


def test_it_fires_in_the_expressions_zone() -> None:
    # 13:00 UTC on Saturday 5 December: the next weekday 09:00 in Berlin (UTC+1) is Monday 08:00 UTC.
    at = _next("0 9 * * mon-fri", "Europe/Berlin", dt.datetime(2026, 12, 5, 13, 0, tzinfo=UTC))
    assert at == dt.datetime(2026, 12, 7, 8, 0, tzinfo=UTC)


def test_a_firing_at_the_instant_itself_counts() -> None:
    at = dt.datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    assert _next("0 8 * * *", "UTC", at) == at


def test_a_skipped_local_time_fires_just_after_the_jump() -> None:
    # New York springs forward at 02:00 on 8 March 2026: 02:30 does not exist; it fires at 03:30 EDT.
    at = _next("30 2 * * *", "America/New_York", dt.datetime(2026, 3, 8, 0, 0, tzinfo=UTC))
    assert at == dt.datetime(2026, 3, 8, 7, 30, tzinfo=UTC)
    # and the next day at 02:30 EDT again
    assert _next("30 2 * * *", "America/New_York", at + dt.timedelta(minutes=1)) == dt.datetime(
        2026, 3, 9, 6, 30, tzinfo=UTC)


def test_a_repeated_local_time_fires_once() -> None:
    # New York falls back at 02:00 on 1 November 2026: 01:30 happens twice; the window opens at the first.
    first = _next("30 1 * * *", "America/New_York", dt.datetime(2026, 11, 1, 0, 0, tzinfo=UTC))
    assert first == dt.datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    assert _next("30 1 * * *", "America/New_York", first + dt.timedelta(minutes=1)) == dt.datetime(
        2026, 11, 2, 6, 30, tzinfo=UTC)


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    # the 1st of the month or any Monday: after Tuesday 1 December 2026 comes Monday 7 December
    at = _next("0 0 1 * mon", "UTC", dt.datetime(2026, 12, 1, 0, 1, tzinfo=UTC))
    assert at == dt.datetime(2026, 12, 7, 0, 0, tzinfo=UTC)


def test_a_date_that_never_comes_never_fires() -> None:
    assert _next("0 0 31 2 *", "UTC", dt.datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_the_last_firing_before_an_instant() -> None:
    at = dt.datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    expr, zone = cron.parse("0 9 * * mon-fri"), cron.zone("Europe/Berlin")
    assert cron.prev_fire(expr, zone, at) == dt.datetime(2026, 12, 4, 8, 0, tzinfo=UTC)  # Friday, not Monday itself
    assert cron.prev_fire(expr, zone, at + dt.timedelta(seconds=1)) == at
    # across the spring-forward gap: 02:30 New York on 8 March 2026 fired at 03:30 EDT
    assert cron.prev_fire(cron.parse("30 2 * * *"), cron.zone("America/New_York"),
                          dt.datetime(2026, 3, 8, 8, 0, tzinfo=UTC)) == dt.datetime(2026, 3, 8, 7, 30, tzinfo=UTC)


def test_a_skipped_time_fires_after_an_earlier_existing_one_of_the_same_day() -> None:
    # 02:30 is skipped (fires 03:30 EDT = 07:30 UTC); 03:00 EDT (07:00 UTC) exists and comes first
    ny = cron.zone("America/New_York")
    assert cron.next_fire(cron.parse("0,30 2,3 * * *"), ny, dt.datetime(2026, 3, 8, 6, 1, tzinfo=UTC)) == dt.datetime(
        2026, 3, 8, 7, 0, tzinfo=UTC)
