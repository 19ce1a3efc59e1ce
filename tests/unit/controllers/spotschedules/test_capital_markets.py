"""CapitalMarketsSchedule: minute-precision sessions, holidays, early closes and late opens."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cel_expr_python import cel
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fivespot.api.kinds.providers import (
    CLOCK_RULE,
    CLOSE_CLOCK_RULE,
    DATE_PATTERN,
    EARLY_CLOSE_FORM_RULE,
    OVERNIGHT_FORM_RULE,
    SESSION_FORM_RULE,
    SESSION_ORDER_RULE,
    CapitalMarketsScheduleSpec,
    EarlyClose,
    SessionTimes,
    TradingSession,
)
from fivespot.controllers.spotschedules import capital_markets as cm

UTC = dt.timezone.utc
NY = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")


def cms(**fields: Any) -> CapitalMarketsScheduleSpec:
    return CapitalMarketsScheduleSpec.model_validate(fields)


def at(zone: ZoneInfo, y: int, mo: int, d: int, h: int = 0, mi: int = 0, fold: int = 0) -> (
    dt.datetime
):
    return dt.datetime(y, mo, d, h, mi, tzinfo=zone, fold=fold)


def z(y: int, mo: int, d: int, h: int = 0, mi: int = 0) -> dt.datetime:
    return dt.datetime(y, mo, d, h, mi, tzinfo=UTC)


NYSE = cms(
    timezone="America/New_York",
    sessions=[{"days": "mon-fri", "open": "09:30", "close": "16:00"}],
    holidays=["2026-01-01", "2026-01-19", "2026-04-03", "2026-11-26", "2026-12-25"],
    earlyCloses=[
        {"date": "2026-11-27", "close": "13:00"},
        {"date": "2026-12-24", "close": "13:00"},
    ],
)


@pytest.mark.parametrize(
    ("now", "active"),
    [
        (at(NY, 2026, 11, 25, 9, 29), False),  # Wednesday before the open
        (at(NY, 2026, 11, 25, 9, 30), True),
        (at(NY, 2026, 11, 25, 15, 59), True),
        (at(NY, 2026, 11, 25, 16, 0), False),
        (at(NY, 2026, 11, 26, 12, 0), False),  # Thanksgiving
        (at(NY, 2026, 11, 27, 12, 59), True),  # early close day
        (at(NY, 2026, 11, 27, 13, 0), False),
        (at(NY, 2026, 11, 28, 12, 0), False),  # Saturday
        (z(2026, 11, 25, 14, 30), True),  # 09:30 EST in UTC
        (z(2026, 7, 1, 13, 30), True),  # 09:30 EDT in UTC
        (z(2026, 7, 1, 13, 29), False),
    ],
)
def test_nyse_regular_session_holidays_and_early_close(now: dt.datetime, active: bool) -> None:
    assert cm.is_active(NYSE, now) is active


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # inside a session: its close
        (at(NY, 2026, 11, 25, 12, 0), at(NY, 2026, 11, 25, 16, 0)),
        # before the open: the open
        (at(NY, 2026, 11, 25, 7, 0), at(NY, 2026, 11, 25, 9, 30)),
        # exactly at the open: that day's close
        (at(NY, 2026, 11, 25, 9, 30), at(NY, 2026, 11, 25, 16, 0)),
        # exactly at the close: the next trading day's open, skipping Thanksgiving
        (at(NY, 2026, 11, 25, 16, 0), at(NY, 2026, 11, 27, 9, 30)),
        # on a holiday: the next open
        (at(NY, 2026, 11, 26, 10, 0), at(NY, 2026, 11, 27, 9, 30)),
        # inside an early-close session: the early close
        (at(NY, 2026, 11, 27, 10, 0), at(NY, 2026, 11, 27, 13, 0)),
        # at the early close: Monday's open
        (at(NY, 2026, 11, 27, 13, 0), at(NY, 2026, 11, 30, 9, 30)),
        # on a weekend: Monday's open
        (at(NY, 2026, 11, 29, 23, 59), at(NY, 2026, 11, 30, 9, 30)),
        # Friday holiday before a weekend (Good Friday): Thursday close -> Monday open
        (at(NY, 2026, 4, 2, 16, 0), at(NY, 2026, 4, 6, 9, 30)),
        # Monday holiday after a weekend (MLK day): Friday close -> Tuesday open
        (at(NY, 2026, 1, 16, 16, 0), at(NY, 2026, 1, 20, 9, 30)),
        # Christmas Eve early close, then Christmas: -> Dec 28
        (at(NY, 2026, 12, 24, 13, 0), at(NY, 2026, 12, 28, 9, 30)),
        # the calendar is only what the spec lists: without 2027 holidays, Friday Jan 1 trades
        (at(NY, 2026, 12, 31, 16, 0), at(NY, 2027, 1, 1, 9, 30)),
    ],
)
def test_next_transition_from_every_kind_of_instant(
    now: dt.datetime, expected: dt.datetime
) -> None:
    found = cm.next_transition(NYSE, now)
    assert found == expected and found is not None and found.tzinfo == UTC


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # New York springs forward Sunday Mar 8: Friday's close is 21:00Z, Monday's open 13:30Z.
        (z(2026, 3, 6, 21, 0), z(2026, 3, 9, 13, 30)),
        (z(2026, 3, 9, 13, 30), z(2026, 3, 9, 20, 0)),
        # and falls back Sunday Nov 1: Friday's close is 20:00Z, Monday's open 14:30Z.
        (z(2026, 10, 30, 20, 0), z(2026, 11, 2, 14, 30)),
        (z(2026, 11, 2, 14, 30), z(2026, 11, 2, 21, 0)),
    ],
)
def test_nyse_boundaries_move_in_utc_across_dst(now: dt.datetime, expected: dt.datetime) -> None:
    assert cm.next_transition(NYSE, now) == expected


LSE = cms(
    timezone="Europe/London",
    sessions=[{"days": "mon-fri", "open": "08:00", "close": "16:30"}],
    holidays=["2026-04-03", "2026-04-06"],
)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # London springs forward Sunday Mar 29: Friday closes 16:30Z, Monday opens 07:00Z.
        (z(2026, 3, 27, 16, 30), z(2026, 3, 30, 7, 0)),
        # Easter: Good Friday and Easter Monday are both holidays around the weekend.
        (z(2026, 4, 2, 15, 30), z(2026, 4, 7, 7, 0)),
        # London falls back Sunday Oct 25: Friday closes 15:30Z, Monday opens 08:00Z.
        (z(2026, 10, 23, 15, 30), z(2026, 10, 26, 8, 0)),
    ],
)
def test_london_boundaries_across_dst_and_easter(now: dt.datetime, expected: dt.datetime) -> None:
    assert cm.next_transition(LSE, now) == expected


def test_open_time_in_the_skipped_hour_opens_when_the_clock_jumps() -> None:
    # 02:30 does not exist in New York on Mar 8 2026; the clock reads 03:00 EDT at 07:00Z.
    night = cms(timezone="America/New_York",
                sessions=[{"days": "sun", "open": "02:30", "close": "05:00"}])
    assert not cm.is_active(night, z(2026, 3, 8, 6, 59))
    assert cm.next_transition(night, z(2026, 3, 8, 6, 0)) == z(2026, 3, 8, 7, 0)
    assert cm.is_active(night, z(2026, 3, 8, 7, 0))
    # the next week the same session opens at a real 02:30 EDT
    assert cm.next_transition(night, z(2026, 3, 8, 9, 0)) == z(2026, 3, 15, 6, 30)


def test_now_exactly_at_the_spring_forward_jump() -> None:
    night = cms(timezone="America/New_York",
                sessions=[{"days": "sun", "open": "01:30", "close": "02:30"}])
    # 01:30 EST is 06:30Z; 02:30 never shows, so the session closes when the clock jumps.
    assert cm.is_active(night, z(2026, 3, 8, 6, 59))
    assert not cm.is_active(night, z(2026, 3, 8, 7, 0))
    assert cm.next_transition(night, z(2026, 3, 8, 6, 30)) == z(2026, 3, 8, 7, 0)


def test_boundary_in_the_repeated_hour_takes_effect_at_its_first_occurrence() -> None:
    # Nov 1 2026, New York: 01:00-01:59 happens as EDT (05:00Z) and again as EST (06:00Z).
    early = cms(timezone="America/New_York",
                sessions=[{"days": "sun", "open": "00:00", "close": "01:30"}])
    assert cm.is_active(early, z(2026, 11, 1, 5, 29))
    assert not cm.is_active(early, z(2026, 11, 1, 5, 30))
    assert not cm.is_active(early, z(2026, 11, 1, 6, 15))  # 01:15 EST: not reopened
    assert cm.next_transition(early, z(2026, 11, 1, 5, 0)) == z(2026, 11, 1, 5, 30)
    late = cms(timezone="America/New_York",
               sessions=[{"days": "sun", "open": "01:30", "close": "03:00"}])
    assert cm.is_active(late, z(2026, 11, 1, 6, 15))  # still open through the repeat
    assert cm.next_transition(late, z(2026, 11, 1, 5, 30)) == z(2026, 11, 1, 8, 0)


def test_sessions_that_touch_at_midnight_are_one_stretch() -> None:
    globex = cms(
        timezone="America/Chicago",
        sessions=[
            {"days": "sun-thu", "open": "17:00", "close": "24:00"},
            {"days": "mon-fri", "open": "00:00", "close": "16:00"},
        ],
    )
    chicago = ZoneInfo("America/Chicago")
    sunday_evening = at(chicago, 2026, 11, 29, 18)
    assert cm.next_transition(globex, sunday_evening) == at(chicago, 2026, 11, 30, 16)
    assert cm.next_transition(globex, at(chicago, 2026, 12, 4, 16)) == at(chicago, 2026, 12, 6, 17)
    assert not cm.is_active(globex, at(chicago, 2026, 12, 5, 12))


def test_lunch_break_is_two_sessions() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    tse = cms(
        timezone="Asia/Tokyo",
        sessions=[
            {"days": "mon-fri", "open": "09:00", "close": "11:30"},
            {"days": "mon-fri", "open": "12:30", "close": "15:30"},
        ],
    )
    assert cm.next_transition(tse, at(tokyo, 2026, 12, 1, 10)) == at(tokyo, 2026, 12, 1, 11, 30)
    assert cm.next_transition(tse, at(tokyo, 2026, 12, 1, 11, 30)) == at(tokyo, 2026, 12, 1, 12, 30)


def test_late_open_holds_the_session_until_its_time() -> None:
    delayed = cms(**{**NYSE.model_dump(by_alias=True, exclude_none=True),
                     "lateOpens": [{"date": "2026-12-02", "open": "10:30"}]})
    assert not cm.is_active(delayed, at(NY, 2026, 12, 2, 10, 0))
    assert cm.next_transition(delayed, at(NY, 2026, 12, 1, 16)) == at(NY, 2026, 12, 2, 10, 30)


def test_holiday_on_a_weekend_changes_nothing() -> None:
    with_saturday = cms(**{**NYSE.model_dump(by_alias=True, exclude_none=True),
                           "holidays": ["2026-11-28"]})
    friday_close = at(NY, 2026, 11, 27, 16)
    assert cm.next_transition(with_saturday, friday_close) == at(NY, 2026, 11, 30, 9, 30)


def test_early_close_after_the_normal_close_changes_nothing() -> None:
    odd = cms(timezone="America/New_York",
              sessions=[{"days": "mon-fri", "open": "09:30", "close": "16:00"}],
              earlyCloses=[{"date": "2026-12-02", "close": "17:00"}])
    assert cm.next_transition(odd, at(NY, 2026, 12, 2, 12)) == at(NY, 2026, 12, 2, 16)


def test_5spot_hour_sessions_and_close_hour_keep_their_meaning() -> None:
    legacy = cms(
        timezone="America/New_York",
        sessions=[{"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-16"]}],
        holidays=["2026-11-26"],
        earlyCloses=[{"date": "2026-11-27", "closeHour": 13}],
    )
    assert cm.is_active(legacy, at(NY, 2026, 11, 25, 16, 59))  # 16 is included through 16:59
    assert cm.next_transition(legacy, at(NY, 2026, 11, 25, 12)) == at(NY, 2026, 11, 25, 17)
    assert cm.is_active(legacy, at(NY, 2026, 11, 27, 13, 59))  # open through the end of 13
    assert cm.next_transition(legacy, at(NY, 2026, 11, 27, 10)) == at(NY, 2026, 11, 27, 14)


def test_both_session_forms_combine() -> None:
    mixed = cms(
        timezone="UTC",
        sessions=[
            {"days": "mon", "open": "09:30", "close": "10:00"},
            {"daysOfWeek": ["mon"], "hoursOfDay": ["10"]},
        ],
    )
    assert cm.next_transition(mixed, z(2026, 11, 30, 9, 45)) == z(2026, 11, 30, 11, 0)


@pytest.mark.parametrize(
    "schedule",
    [
        cms(timezone="America/New_York"),
        cms(timezone="UTC", sessions=[{"days": "mon-sun", "open": "00:00", "close": "24:00"}]),
    ],
    ids=["no-sessions", "around-the-clock"],
)
def test_constant_market_never_transitions(schedule: CapitalMarketsScheduleSpec) -> None:
    assert cm.next_transition(schedule, z(2026, 11, 30, 12)) is None


def test_transition_beyond_a_year_is_not_reported() -> None:
    # Mondays only, every Monday of the coming 55 weeks a holiday.
    mondays = [(dt.date(2026, 11, 30) + dt.timedelta(weeks=w)).isoformat() for w in range(55)]
    sparse = cms(timezone="UTC", sessions=[{"days": "mon", "open": "09:00", "close": "10:00"}],
                 holidays=mondays)
    assert cm.next_transition(sparse, z(2026, 11, 29, 12)) is None
    within = cms(timezone="UTC", sessions=[{"days": "mon", "open": "09:00", "close": "10:00"}],
                 holidays=mondays[:50])
    assert cm.next_transition(within, z(2026, 11, 29, 12)) == z(2027, 11, 15, 9)


# --- spec validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "message"),
    [
        ({"days": "mon-fri", "open": "16:30", "close": "16:00"}, "open must be earlier"),
        ({"days": "mon-fri", "open": "09:30", "close": "09:30"}, "open must be earlier"),
        ({"days": "mon-fri", "open": "09:30"}, "a session is either"),
        ({"days": "mon-fri", "open": "09:30", "close": "16:00", "hoursOfDay": ["9"]},
         "a session is either"),
        ({"daysOfWeek": ["mon"]}, "a session is either"),
        ({}, "a session is either"),
        ({"days": "mon-fri", "open": "9:30", "close": "16:00"}, "HH:MM"),
        ({"days": "mon-fri", "open": "24:00", "close": "24:00"}, "HH:MM"),
        ({"days": "mon-fri", "open": "09:30", "close": "24:01"}, "HH:MM"),
        ({"days": "weekdays", "open": "09:30", "close": "16:00"}, "a range such as mon-fri"),
        ({"daysOfWeek": ["mon"], "hoursOfDay": ["9-25"]}, "an hour 0-23"),
    ],
)
def test_malformed_session_is_rejected_with_a_clear_message(
    session: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        cms(sessions=[session])
    assert any(message in e["msg"] and e["loc"][:2] == ("sessions", 0)
               for e in caught.value.errors())


@pytest.mark.parametrize(
    ("fields", "loc", "message"),
    [
        ({"holidays": ["2026-02-30"]}, ("holidays", 0), "day is out of range"),
        ({"holidays": ["2026-1-1"]}, ("holidays", 0), "YYYY-MM-DD"),
        ({"holidays": ["2026-12-25", "2026-12-25"]}, ("holidays",), "listed twice"),
        ({"earlyCloses": [{"date": "2026-11-27"}]}, ("earlyCloses", 0), "exactly one of close"),
        ({"earlyCloses": [{"date": "2026-11-27", "close": "13:00", "closeHour": 13}]},
         ("earlyCloses", 0), "exactly one of close"),
        ({"earlyCloses": [{"date": "2026-11-27", "closeHour": 24}]},
         ("earlyCloses", 0, "closeHour"), "less than or equal to 23"),
        ({"earlyCloses": [{"date": "2026-11-27", "close": "13:00"},
                          {"date": "2026-11-27", "close": "12:00"}]},
         ("earlyCloses",), "listed twice"),
        ({"lateOpens": [{"date": "2026-11-27", "open": "24:00"}]},
         ("lateOpens", 0, "open"), "HH:MM"),
        ({"timezone": "New_York"}, ("timezone",), "not in the IANA time zone database"),
        ({"exchange": "XNYS"}, ("exchange",), "Extra inputs are not permitted"),
    ],
)
def test_malformed_calendar_is_rejected_with_a_clear_message(
    fields: dict[str, Any], loc: tuple[Any, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        cms(**fields)
    assert any(e["loc"] == loc and message in e["msg"] for e in caught.value.errors()), (
        caught.value.errors()
    )


_CEL = cel.NewEnv(variables={"self": cel.Type.DYN})


def cel_accepts(rule: str, value: object) -> bool:
    result = _CEL.compile(rule).eval(data={"self": value})
    return result.type().name() != "ERROR" and result.value() is True


@pytest.mark.parametrize(
    "session",
    [
        {"days": "mon-fri", "open": "09:30", "close": "16:00"},
        {"days": "mon-fri", "open": "00:00", "close": "24:00"},
        {"daysOfWeek": ["mon-fri"], "hoursOfDay": ["9-16"]},
        {"days": "mon-fri", "open": "16:30", "close": "16:00"},
        {"days": "mon-fri", "open": "09:30"},
        {"days": "mon", "open": "09:30", "close": "16:00", "daysOfWeek": ["mon"]},
        {"daysOfWeek": ["mon"]},
        {"hoursOfDay": ["9"], "open": "09:30"},
        {"days": "mon-fri", "open": "17:00", "close": "16:00", "opensPreviousDay": True},
        {"days": "mon-fri", "open": "17:00", "close": "17:00", "opensPreviousDay": True},
        {"days": "mon-fri", "open": "17:00", "close": "18:00", "opensPreviousDay": True},
        {"days": "mon-fri", "open": "17:00", "close": "24:00", "opensPreviousDay": True},
        {"days": "mon-fri", "open": "09:00", "close": "16:00", "opensPreviousDay": False},
        {"days": "mon-fri", "open": "17:00", "close": "16:00", "opensPreviousDay": False},
        {"daysOfWeek": ["mon"], "hoursOfDay": ["9"], "opensPreviousDay": True},
    ],
)
def test_cel_session_rules_agree_with_the_model(session: dict[str, Any]) -> None:
    try:
        TradingSession.model_validate(session)
        valid = True
    except ValidationError:
        valid = False
    assert (cel_accepts(SESSION_FORM_RULE, session)
            and cel_accepts(SESSION_ORDER_RULE, session)
            and cel_accepts(OVERNIGHT_FORM_RULE, session)) is valid


@pytest.mark.parametrize(
    "times",
    [{"open": "09:30", "close": "17:00"}, {"open": "17:00", "close": "09:30"},
     {"open": "17:00", "close": "09:30", "opensPreviousDay": True},
     {"open": "09:30", "close": "17:00", "opensPreviousDay": True}],
)
def test_cel_special_session_rule_agrees_with_the_model(times: dict[str, Any]) -> None:
    try:
        SessionTimes.model_validate(times)
        valid = True
    except ValidationError:
        valid = False
    assert cel_accepts(SESSION_ORDER_RULE, times) is valid


NY_OVERNIGHT = {"timezone": "America/New_York",
                "sessions": [{"days": "mon-fri", "open": "18:00", "close": "17:00",
                              "opensPreviousDay": True}]}


def test_an_overnight_session_belongs_to_the_date_it_closes_on() -> None:
    spec = CapitalMarketsScheduleSpec.model_validate(NY_OVERNIGHT)
    ny = spec.zone
    assert cm.is_active(spec, dt.datetime(2026, 3, 1, 18, tzinfo=ny))  # Sunday evening: Monday's
    assert not cm.is_active(spec, dt.datetime(2026, 3, 2, 17, 30, tzinfo=ny))  # the daily hour off
    assert not cm.is_active(spec, dt.datetime(2026, 3, 6, 18, tzinfo=ny))  # Friday evening: none
    assert cm.next_transition(spec, dt.datetime(2026, 3, 2, 12, tzinfo=ny)) == dt.datetime(
        2026, 3, 2, 17, tzinfo=ny)


def test_a_holiday_cancels_the_overnight_session_of_its_date_from_the_evening_before() -> None:
    spec = CapitalMarketsScheduleSpec.model_validate({**NY_OVERNIGHT, "holidays": ["2026-03-03"]})
    ny = spec.zone
    assert not cm.is_active(spec, dt.datetime(2026, 3, 2, 20, tzinfo=ny))
    assert not cm.is_active(spec, dt.datetime(2026, 3, 3, 12, tzinfo=ny))
    assert cm.next_transition(spec, dt.datetime(2026, 3, 2, 16, tzinfo=ny)) == dt.datetime(
        2026, 3, 2, 17, tzinfo=ny)
    assert cm.next_transition(spec, dt.datetime(2026, 3, 2, 17, tzinfo=ny)) == dt.datetime(
        2026, 3, 3, 18, tzinfo=ny)


def test_early_close_late_open_and_a_special_date_cut_or_replace_that_dates_sessions() -> None:
    spec = CapitalMarketsScheduleSpec.model_validate({
        **NY_OVERNIGHT,
        "earlyCloses": [{"date": "2026-03-03", "close": "12:00"}],
        "lateOpens": [{"date": "2026-03-04", "open": "08:00"}],
        "specialSessions": [{"date": "2026-03-05", "sessions": [
            {"open": "09:30", "close": "12:00"}, {"open": "13:00", "close": "16:00"}]}],
    })
    ny = spec.zone

    def at(day: int, hour: int, minute: int = 0) -> dt.datetime:
        return dt.datetime(2026, 3, day, hour, minute, tzinfo=ny)

    assert cm.is_active(spec, at(3, 11, 59)) and not cm.is_active(spec, at(3, 12))
    assert not cm.is_active(spec, at(3, 20)) and cm.next_transition(spec, at(3, 12)) == at(4, 8)
    assert cm.next_transition(spec, at(4, 8)) == at(4, 17)
    # The special date opens at 09:30 instead of the evening before and breaks for lunch; the
    # next date's session still opens that evening.
    assert not cm.is_active(spec, at(4, 20)) and cm.next_transition(spec, at(4, 17)) == at(5, 9, 30)
    assert [cm.next_transition(spec, t) for t in (at(5, 10), at(5, 12), at(5, 14), at(5, 16))] == [
        at(5, 12), at(5, 13), at(5, 16), at(5, 18)]


@pytest.mark.parametrize(
    "entry",
    [{"date": "2026-11-27", "close": "13:00"}, {"date": "2026-11-27", "closeHour": 13},
     {"date": "2026-11-27"}, {"date": "2026-11-27", "close": "13:00", "closeHour": 13}],
)
def test_cel_early_close_rule_agrees_with_the_model(entry: dict[str, Any]) -> None:
    try:
        EarlyClose.model_validate(entry)
        valid = True
    except ValidationError:
        valid = False
    assert cel_accepts(EARLY_CLOSE_FORM_RULE, entry) is valid


@pytest.mark.parametrize(
    ("rule", "value", "accepted"),
    [
        (CLOCK_RULE, "09:30", True), (CLOCK_RULE, "23:59", True), (CLOCK_RULE, "24:00", False),
        (CLOCK_RULE, "9:30", False), (CLOCK_RULE, "09:60", False), (CLOCK_RULE, "09:30\n", False),
        (CLOSE_CLOCK_RULE, "24:00", True), (CLOSE_CLOCK_RULE, "24:01", False),
        (CLOSE_CLOCK_RULE, "16:00", True),
    ],
)
def test_cel_clock_rules(rule: str, value: str, accepted: bool) -> None:
    assert cel_accepts(rule, value) is accepted


def test_dates_are_checked_by_format_and_pattern_not_by_cel() -> None:
    # The API server types a `format: date` string as a CEL timestamp, so a string rule such as
    # matches() would not compile there; the schema's own format and pattern do the checking.
    schema = CapitalMarketsScheduleSpec.model_json_schema(by_alias=True)
    early_close = schema["$defs"]["EarlyClose"]["properties"]["date"]
    for node in (schema["properties"]["holidays"]["items"], early_close):
        assert node["format"] == "date" and node["pattern"] == DATE_PATTERN
        assert "x-kubernetes-validations" not in node


# --- properties --------------------------------------------------------------------------------

ZONES = ["America/New_York", "Europe/London", "Asia/Tokyo", "Australia/Lord_Howe",
         "Asia/Kolkata", "America/Santiago"]


def _clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


@st.composite
def markets(draw: st.DrawFn) -> CapitalMarketsScheduleSpec:
    sessions = []
    for _ in range(draw(st.integers(0, 3))):
        opens = draw(st.integers(0, 1439))
        closes = draw(st.integers(opens + 1, 1440))
        days = draw(st.sampled_from(["mon-fri", "sat-sun", "sun", "mon", "fri-mon", "mon-sun"]))
        sessions.append({"days": days, "open": _clock(opens), "close": _clock(closes)})
    base = dt.date(2026, 1, 1)
    dates = st.integers(0, 380).map(lambda n: (base + dt.timedelta(days=n)).isoformat())
    holidays = draw(st.lists(dates, unique=True, max_size=12))
    early = draw(st.lists(st.tuples(dates, st.integers(1, 1440)), unique_by=lambda e: e[0],
                          max_size=4))
    return cms(
        timezone=draw(st.sampled_from(ZONES)),
        sessions=sessions,
        holidays=holidays,
        earlyCloses=[{"date": d, "close": _clock(m)} for d, m in early],
    )


@settings(max_examples=120, deadline=None)
@given(
    markets(),
    st.datetimes(min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2026, 12, 31),
                 timezones=st.just(UTC)),
    st.lists(st.floats(0, 1, exclude_max=True), min_size=3, max_size=3),
)
def test_activity_is_constant_until_next_transition_and_flips_there(
    market: CapitalMarketsScheduleSpec, now: dt.datetime, fractions: list[float]
) -> None:
    state = cm.is_active(market, now)
    following = cm.next_transition(market, now)
    if following is None:
        for hours in (1, 30, 24 * 7 + 5):
            assert cm.is_active(market, now + dt.timedelta(hours=hours)) is state
        return
    assert following > now
    last = following - dt.timedelta(microseconds=1)
    for fraction in fractions:
        assert cm.is_active(market, min(now + (following - now) * fraction, last)) is state
    assert cm.is_active(market, following - dt.timedelta(microseconds=1)) is state
    assert cm.is_active(market, following) is not state
