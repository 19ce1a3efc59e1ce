"""TimeBasedSpotSchedule: the 5-Spot day/hour window, evaluated exactly and DST-correctly."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fivespot.api.kinds.providers import (
    DAYS_RULE,
    HOURS_RULE,
    TIMEZONE_RULE,
    TimeBasedSpotScheduleSpec,
    parse_days,
    parse_hours,
)
from fivespot.controllers.spotschedules import time_based as tb
from tests.celgo import cel_accepts

UTC = dt.timezone.utc
NY = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")


def spec(days: list[str], hours: list[str], tz: str = "America/New_York", **extra: Any) -> (
    TimeBasedSpotScheduleSpec
):
    return TimeBasedSpotScheduleSpec.model_validate(
        {"daysOfWeek": days, "hoursOfDay": hours, "timezone": tz, **extra}
    )


def at(zone: ZoneInfo, y: int, mo: int, d: int, h: int = 0, mi: int = 0, fold: int = 0) -> (
    dt.datetime
):
    return dt.datetime(y, mo, d, h, mi, tzinfo=zone, fold=fold)


def z(y: int, mo: int, d: int, h: int = 0, mi: int = 0) -> dt.datetime:
    return dt.datetime(y, mo, d, h, mi, tzinfo=UTC)


# --- syntax ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["mon"], {0}),
        (["mon-fri"], {0, 1, 2, 3, 4}),
        (["fri-mon"], {4, 5, 6, 0}),
        (["sun-sun"], {6}),
        (["mon,wed,fri"], {0, 2, 4}),
        (["mon-wed,fri"], {0, 1, 2, 4}),
        ([" sat - sun "], {5, 6}),
        (["mon", "sat-sun"], {0, 5, 6}),
        ([], set()),
    ],
)
def test_day_items_name_the_expected_weekdays(items: list[str], expected: set[int]) -> None:
    assert parse_days(items) == expected


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["9"], {9}),
        (["09"], {9}),
        (["9-17"], set(range(9, 18))),
        (["22-6"], {22, 23, 0, 1, 2, 3, 4, 5, 6}),
        (["0-9,17-23"], set(range(0, 10)) | set(range(17, 24))),
        (["0-23"], set(range(24))),
        (["23-23"], {23}),
    ],
)
def test_hour_items_name_the_expected_hours(items: list[str], expected: set[int]) -> None:
    assert parse_hours(items) == expected


@pytest.mark.parametrize(
    "item", ["monday", "Mon", "mon-", "-fri", "mon-fri-sat", "mon,,fri", "", "mon\n", "1"]
)
def test_malformed_day_item_is_rejected_with_the_accepted_syntax(item: str) -> None:
    with pytest.raises(ValidationError) as caught:
        spec([item], ["9"])
    (error,) = caught.value.errors()
    assert error["loc"] == ("daysOfWeek", 0)
    assert "a range such as mon-fri" in error["msg"]
    assert repr(item) in error["msg"]


@pytest.mark.parametrize("item", ["24", "-1", "9-", "9-17-20", "9.5", "nine", "9-24", "", "9\n"])
def test_malformed_hour_item_is_rejected_with_the_accepted_syntax(item: str) -> None:
    with pytest.raises(ValidationError) as caught:
        spec(["mon"], [item])
    (error,) = caught.value.errors()
    assert error["loc"] == ("hoursOfDay", 0)
    assert "an hour 0-23" in error["msg"]


@pytest.mark.parametrize(
    ("tz", "why"),
    [
        ("Mars/Olympus", "not in the IANA time zone database"),
        ("America", "not in the IANA time zone database"),
        ("Local", "got 'Local'"),
        ("America/New York", "got 'America/New York'"),
        ("../etc/passwd", "got '../etc/passwd'"),
        ("+05:00", "got '+05:00'"),
        ("", "got ''"),
    ],
)
def test_invalid_timezone_is_rejected_with_a_clear_message(tz: str, why: str) -> None:
    with pytest.raises(ValidationError) as caught:
        spec(["mon"], ["9"], tz)
    (error,) = caught.value.errors()
    assert error["loc"] == ("timezone",)
    assert "must be an IANA time zone name" in error["msg"] and why in error["msg"]


def test_timezone_defaults_to_utc_and_enabled_to_true() -> None:
    parsed = TimeBasedSpotScheduleSpec.model_validate({"daysOfWeek": ["mon"]})
    assert parsed.timezone == "UTC" and parsed.enabled is True and parsed.hours_of_day == ()


def test_unknown_spec_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="daysofweek"):
        TimeBasedSpotScheduleSpec.model_validate({"daysofweek": ["mon"]})


@pytest.mark.parametrize(
    "item", ["mon", "fri-mon", "mon-wed,fri", " sat - sun ", "monday", "mon-", "", "1", "mon,,fri"]
)
def test_cel_day_rule_agrees_with_the_model(item: str) -> None:
    try:
        parse_days([item])
        valid = True
    except ValueError:
        valid = False
    assert cel_accepts(DAYS_RULE, item) is valid


@pytest.mark.parametrize("item", ["9", "09", "22-6", "0-9,17-23", "24", "-1", "9-", "", "9-17-20"])
def test_cel_hour_rule_agrees_with_the_model(item: str) -> None:
    try:
        parse_hours([item])
        valid = True
    except ValueError:
        valid = False
    assert cel_accepts(HOURS_RULE, item) is valid


@pytest.mark.parametrize(
    "tz",
    ["UTC", "America/New_York", "Europe/London", "Etc/GMT+5", "America/Argentina/Buenos_Aires",
     "Mars/Olympus", "America", "Local", "America/New York", "+05:00", "", "Europe//London"],
)
def test_cel_timezone_rule_agrees_with_the_model(tz: str) -> None:
    try:
        spec(["mon"], ["9"], tz)
        valid = True
    except ValidationError:
        valid = False
    assert cel_accepts(TIMEZONE_RULE, tz) is valid


# --- activity ----------------------------------------------------------------------------------

BUSINESS = spec(["mon-fri"], ["9-17"])
NIGHTS = spec(["mon-fri"], ["22-6"])


@pytest.mark.parametrize(
    ("now", "active"),
    [
        (at(NY, 2026, 11, 30, 8, 59), False),  # Monday, a minute before 09:00
        (at(NY, 2026, 11, 30, 9, 0), True),
        (at(NY, 2026, 12, 4, 17, 59), True),  # Friday: 17 is included through 17:59
        (at(NY, 2026, 12, 4, 18, 0), False),
        (at(NY, 2026, 12, 5, 12, 0), False),  # Saturday
        (at(NY, 2026, 12, 6, 23, 59), False),  # Sunday
        (z(2026, 11, 30, 14, 0), True),  # 09:00 in New York, expressed in UTC
        (z(2026, 11, 30, 13, 59), False),
    ],
)
def test_weekday_and_hour_edges(now: dt.datetime, active: bool) -> None:
    assert tb.is_active(BUSINESS, now) is active


def test_wrapping_hour_range_is_active_after_midnight() -> None:
    assert tb.is_active(NIGHTS, at(NY, 2026, 12, 1, 3, 0))  # Tuesday 03:00
    assert tb.is_active(NIGHTS, at(NY, 2026, 12, 1, 6, 59))
    assert not tb.is_active(NIGHTS, at(NY, 2026, 12, 1, 7, 0))
    assert tb.is_active(NIGHTS, at(NY, 2026, 11, 30, 22, 0))  # Monday 22:00


def test_wrapping_hour_range_is_not_tied_to_its_start_day() -> None:
    # As in 5-Spot the day and hour sets are independent: Monday's early hours are open
    # although no Sunday night preceded them, and Friday night stops at Saturday midnight.
    assert tb.is_active(NIGHTS, at(NY, 2026, 11, 30, 2, 0))  # Monday 02:00
    assert tb.is_active(NIGHTS, at(NY, 2026, 12, 4, 23, 59))  # Friday 23:59
    assert not tb.is_active(NIGHTS, at(NY, 2026, 12, 5, 0, 0))  # Saturday 00:00
    assert tb.next_transition(NIGHTS, at(NY, 2026, 12, 4, 23, 0)) == at(NY, 2026, 12, 5)


def test_wrapping_day_range_covers_the_weekend() -> None:
    weekend = spec(["fri-mon"], ["0-23"])
    noons = [at(NY, 2026, 11, 30, 12) + dt.timedelta(days=i) for i in range(7)]  # Mon..Sun
    expected = [True, False, False, False, True, True, True]
    assert [tb.is_active(weekend, t) for t in noons] == expected


def test_night_window_has_no_transition_at_midnight() -> None:
    assert tb.next_transition(NIGHTS, at(NY, 2026, 11, 30, 23, 0)) == at(NY, 2026, 12, 1, 7, 0)


def test_comma_lists_inside_items_are_honoured() -> None:
    split = spec(["mon,wed"], ["8,12-13"])
    assert tb.is_active(split, at(NY, 2026, 12, 2, 8, 30))  # Wednesday
    assert not tb.is_active(split, at(NY, 2026, 12, 1, 8, 30))  # Tuesday
    assert not tb.is_active(split, at(NY, 2026, 12, 2, 9, 0))
    assert tb.next_transition(split, at(NY, 2026, 12, 2, 9, 0)) == at(NY, 2026, 12, 2, 12, 0)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (at(NY, 2026, 11, 30, 12, 0), at(NY, 2026, 11, 30, 18, 0)),  # inside: the close
        (at(NY, 2026, 11, 30, 8, 0), at(NY, 2026, 11, 30, 9, 0)),  # before open: the open
        (at(NY, 2026, 11, 30, 9, 0), at(NY, 2026, 11, 30, 18, 0)),  # exactly at open
        (at(NY, 2026, 11, 30, 18, 0), at(NY, 2026, 12, 1, 9, 0)),  # exactly at close
        (at(NY, 2026, 12, 4, 18, 0), at(NY, 2026, 12, 7, 9, 0)),  # Friday close: Monday
        (at(NY, 2026, 12, 5, 12, 0), at(NY, 2026, 12, 7, 9, 0)),  # weekend
        (at(NY, 2026, 11, 30, 17, 59), at(NY, 2026, 11, 30, 18, 0)),  # last minute
    ],
)
def test_next_transition_from_every_kind_of_instant(
    now: dt.datetime, expected: dt.datetime
) -> None:
    found = tb.next_transition(BUSINESS, now)
    assert found == expected and found is not None and found.tzinfo == UTC


def test_next_transition_is_strictly_after_now_even_between_seconds() -> None:
    now = at(NY, 2026, 11, 30, 17, 59) + dt.timedelta(seconds=59, microseconds=999_999)
    assert tb.next_transition(BUSINESS, now) == at(NY, 2026, 11, 30, 18, 0)
    assert tb.next_transition(BUSINESS, at(NY, 2026, 11, 30, 18)) == at(NY, 2026, 12, 1, 9)


@pytest.mark.parametrize(
    "schedule",
    [
        spec(["mon-sun"], ["0-23"]),
        spec(["fri-thu"], ["22-21"]),
        spec(["mon-fri"], ["9-17"], enabled=False),
        spec([], ["9-17"]),
        spec(["mon-fri"], []),
    ],
    ids=["around-the-clock", "wrapped-around-the-clock", "disabled", "no-days", "no-hours"],
)
def test_constant_schedule_never_transitions(schedule: TimeBasedSpotScheduleSpec) -> None:
    now = at(NY, 2026, 11, 30, 12)
    assert tb.next_transition(schedule, now) is None
    assert tb.is_active(schedule, now) is (schedule.enabled and bool(schedule.days_of_week)
                                           and bool(schedule.hours_of_day))


def test_disabled_schedule_is_inactive_inside_its_window() -> None:
    assert not tb.is_active(spec(["mon-fri"], ["9-17"], enabled=False), at(NY, 2026, 11, 30, 12))


def test_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        tb.is_active(BUSINESS, dt.datetime(2026, 11, 30, 12))


# --- daylight saving time ----------------------------------------------------------------------
# 2026: New York springs forward on Mar 8 (02:00 EST -> 03:00 EDT, 07:00Z) and falls back on
# Nov 1 (02:00 EDT -> 01:00 EST, 06:00Z); London springs forward on Mar 29 (01:00 GMT -> 02:00
# BST, 01:00Z) and falls back on Oct 25 (02:00 BST -> 01:00 GMT, 01:00Z).


@pytest.mark.parametrize(
    ("schedule", "now", "active", "expected"),
    [
        # New York spring forward: hour 2 does not exist that Sunday.
        (spec(["sun"], ["2"]), z(2026, 3, 8, 6, 30), False, z(2026, 3, 15, 6, 0)),
        (spec(["sun"], ["2-3"]), z(2026, 3, 8, 6, 30), False, z(2026, 3, 8, 7, 0)),
        (spec(["sun"], ["2-3"]), z(2026, 3, 8, 7, 0), True, z(2026, 3, 8, 8, 0)),
        (spec(["sun"], ["1"]), z(2026, 3, 8, 6, 30), True, z(2026, 3, 8, 7, 0)),
        (spec(["sun"], ["0-8"]), z(2026, 3, 8, 5, 0), True, z(2026, 3, 8, 13, 0)),
        # New York fall back: hour 1 happens twice, first EDT then EST.
        (spec(["sun"], ["1"]), z(2026, 11, 1, 5, 0), True, z(2026, 11, 1, 7, 0)),
        (spec(["sun"], ["1"]), z(2026, 11, 1, 6, 30), True, z(2026, 11, 1, 7, 0)),
        (spec(["sun"], ["0"]), z(2026, 11, 1, 4, 30), True, z(2026, 11, 1, 5, 0)),
        (spec(["sun"], ["2"]), z(2026, 11, 1, 6, 30), False, z(2026, 11, 1, 7, 0)),
        (spec(["sun"], ["0-8"]), z(2026, 11, 1, 4, 0), True, z(2026, 11, 1, 14, 0)),
        # London spring forward: hour 1 does not exist.
        (spec(["sun"], ["1"], "Europe/London"), z(2026, 3, 29, 0, 30), False,
         z(2026, 4, 5, 0, 0)),
        (spec(["sun"], ["0"], "Europe/London"), z(2026, 3, 29, 0, 30), True,
         z(2026, 3, 29, 1, 0)),
        (spec(["sun"], ["1-2"], "Europe/London"), z(2026, 3, 29, 0, 30), False,
         z(2026, 3, 29, 1, 0)),
        # London fall back: hour 1 happens twice, first BST then GMT.
        (spec(["sun"], ["1"], "Europe/London"), z(2026, 10, 25, 0, 0), True,
         z(2026, 10, 25, 2, 0)),
        (spec(["sun"], ["0"], "Europe/London"), z(2026, 10, 24, 23, 30), True,
         z(2026, 10, 25, 0, 0)),
        (spec(["sat-sun"], ["9-17"], "Europe/London"), z(2026, 10, 24, 16, 59), True,
         z(2026, 10, 24, 17, 0)),
        (spec(["sat-sun"], ["9-17"], "Europe/London"), z(2026, 10, 24, 17, 0), False,
         z(2026, 10, 25, 9, 0)),
    ],
)
def test_dst_days_follow_the_local_clock(
    schedule: TimeBasedSpotScheduleSpec, now: dt.datetime, active: bool, expected: dt.datetime
) -> None:
    assert tb.is_active(schedule, now) is active
    assert tb.next_transition(schedule, now) == expected


def test_skipped_hour_is_never_active() -> None:
    only_two = spec(["sun"], ["2"])
    for minute in range(0, 24 * 60, 15):
        instant = z(2026, 3, 8, 4) + dt.timedelta(minutes=minute)
        assert not tb.is_active(only_two, instant)


def test_repeated_hour_is_active_both_times() -> None:
    only_one = spec(["sun"], ["1"])
    assert tb.is_active(only_one, at(NY, 2026, 11, 1, 1, 30, fold=0))
    assert tb.is_active(only_one, at(NY, 2026, 11, 1, 1, 30, fold=1))
    assert not tb.is_active(only_one, at(NY, 2026, 11, 1, 2, 0))


def test_hour_ending_inside_a_repeated_stretch_is_not_active_twice() -> None:
    # Chatham falls back from 03:45 (+13:45) to 02:45 (+12:45) on Apr 5 2026, at 14:00Z: hour 2
    # ends inside the repeated 02:45-03:44, so the boundary at 03:00 takes effect once and the
    # second pass through 02:45-02:59 stays closed (documented in controllers.spotschedules.intervals).
    chatham = spec(["sun"], ["2"], "Pacific/Chatham")
    assert tb.is_active(chatham, z(2026, 4, 4, 13, 0))  # 02:45 +13:45
    assert not tb.is_active(chatham, z(2026, 4, 4, 14, 5))  # 02:50 +12:45
    assert tb.next_transition(chatham, z(2026, 4, 4, 13, 0)) == z(2026, 4, 4, 13, 15)


# --- properties --------------------------------------------------------------------------------

ORACLE_ZONES = [
    "UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu",
    "America/St_Johns", "America/Santiago",
]
ZONES = [*ORACLE_ZONES, "Pacific/Chatham"]
YEAR_2026 = (z(2026, 1, 1), z(2027, 1, 1))


@st.composite
def windows(draw: st.DrawFn, zones: list[str] = ZONES) -> TimeBasedSpotScheduleSpec:
    day_items = draw(st.lists(st.sampled_from(
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun", "mon-fri", "fri-mon", "sat-sun"]
    ), max_size=3))
    hour_items = draw(st.lists(st.builds(
        lambda a, b: f"{a}-{b}" if a != b else str(a), st.integers(0, 23), st.integers(0, 23)
    ), max_size=3))
    return spec(day_items, hour_items, draw(st.sampled_from(zones)),
                enabled=draw(st.booleans()) or draw(st.booleans()))


instants = st.datetimes(
    min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2026, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=150, deadline=None)
@given(windows(ORACLE_ZONES), instants)
def test_is_active_is_the_5spot_rule_of_local_weekday_and_hour(
    schedule: TimeBasedSpotScheduleSpec, now: dt.datetime
) -> None:
    local = now.astimezone(schedule.zone)
    expected = (
        schedule.enabled
        and local.weekday() in parse_days(schedule.days_of_week)
        and local.hour in parse_hours(schedule.hours_of_day)
    )
    assert tb.is_active(schedule, now) is expected


@settings(max_examples=150, deadline=None)
@given(windows(), instants, st.lists(st.floats(0, 1, exclude_max=True), min_size=3, max_size=3))
def test_activity_is_constant_until_next_transition_and_flips_there(
    schedule: TimeBasedSpotScheduleSpec, now: dt.datetime, fractions: list[float]
) -> None:
    state = tb.is_active(schedule, now)
    following = tb.next_transition(schedule, now)
    if following is None:
        for days in (1, 3, 7, 8):
            assert tb.is_active(schedule, now + dt.timedelta(days=days, minutes=days)) is state
        return
    assert following > now
    last = following - dt.timedelta(microseconds=1)
    for fraction in fractions:
        assert tb.is_active(schedule, min(now + (following - now) * fraction, last)) is state
    assert tb.is_active(schedule, following - dt.timedelta(microseconds=1)) is state
    assert tb.is_active(schedule, following) is not state
