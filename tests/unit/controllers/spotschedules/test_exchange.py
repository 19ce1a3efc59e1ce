"""Exchange expansion: exchange_calendars' XNYS and friends written as CapitalMarketsSchedules."""

from __future__ import annotations

import datetime as dt
import sys
from zoneinfo import ZoneInfo

import pytest

from fivespot.api.kinds.providers import CapitalMarketsScheduleSpec
from fivespot.compiler.calendars import (
    CalendarsUnavailable,
    ExchangeCalendar,
    ExchangeSession,
    UnknownExchange,
    expand_exchange,
    resolve_exchange,
)
from fivespot.controllers.spotschedules import capital_markets as cm

NY = ZoneInfo("America/New_York")
UTC = dt.timezone.utc

XNYS_2026_HOLIDAYS = (
    "2026-01-01",  # New Year's Day
    "2026-01-19",  # Martin Luther King Jr. Day
    "2026-02-16",  # Washington's Birthday
    "2026-04-03",  # Good Friday
    "2026-05-25",  # Memorial Day
    "2026-06-19",  # Juneteenth
    "2026-07-03",  # Independence Day, observed (July 4 is a Saturday)
    "2026-09-07",  # Labor Day
    "2026-11-26",  # Thanksgiving
    "2026-12-25",  # Christmas
)


@pytest.fixture(scope="module")
def xnys() -> ExchangeCalendar:
    return expand_exchange("XNYS", 2026, 2026)


def test_xnys_2026_is_the_regular_session_in_new_york(xnys: ExchangeCalendar) -> None:
    assert xnys.timezone == "America/New_York"
    assert xnys.sessions == (ExchangeSession("mon-fri", "09:30", "16:00"),)


def test_xnys_2026_holidays(xnys: ExchangeCalendar) -> None:
    assert xnys.holidays == XNYS_2026_HOLIDAYS


def test_xnys_2026_early_closes_are_the_day_after_thanksgiving_and_christmas_eve(
    xnys: ExchangeCalendar,
) -> None:
    assert xnys.early_closes == (("2026-11-27", "13:00"), ("2026-12-24", "13:00"))
    assert xnys.late_opens == ()


def test_expanded_calendar_is_a_valid_spec_that_trades_like_the_exchange(
    xnys: ExchangeCalendar,
) -> None:
    spec = CapitalMarketsScheduleSpec.model_validate(xnys.spec_fields())
    assert "lateOpens" not in xnys.spec_fields()
    thanksgiving_eve_close = dt.datetime(2026, 11, 25, 16, tzinfo=NY)
    assert cm.next_transition(spec, thanksgiving_eve_close) == dt.datetime(
        2026, 11, 27, 9, 30, tzinfo=NY
    )
    assert cm.next_transition(spec, dt.datetime(2026, 11, 27, 10, tzinfo=NY)) == dt.datetime(
        2026, 11, 27, 13, tzinfo=NY
    )


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_expanded_calendar_agrees_with_exchange_calendars_at_every_2026_boundary(
    xnys: ExchangeCalendar,
) -> None:
    import exchange_calendars

    library = exchange_calendars.get_calendar("XNYS", start="2025-12-01", end="2027-01-31")
    spec = CapitalMarketsScheduleSpec.model_validate(xnys.spec_fields())
    minute = dt.timedelta(minutes=1)
    checked = 0
    for _, row in library.schedule.loc["2026-01-01":"2026-12-31"].iterrows():
        for edge in (row["open"].to_pydatetime(), row["close"].to_pydatetime()):
            for instant in (edge - minute, edge):
                expected = bool(library.is_open_on_minute(instant, ignore_breaks=False))
                assert cm.is_active(spec, instant) is expected, instant
                checked += 1
        assert cm.next_transition(spec, row["open"].to_pydatetime()) == row["close"].to_pydatetime()
    assert checked == 4 * 251  # 261 weekdays in 2026, 10 of them holidays


def test_lunch_break_becomes_two_sessions() -> None:
    hong_kong = expand_exchange("XHKG", 2026, 2026)
    assert hong_kong.sessions == (
        ExchangeSession("mon-fri", "09:30", "12:00"),
        ExchangeSession("mon-fri", "13:00", "16:00"),
    )
    assert ("2026-12-24", "12:00") in hong_kong.early_closes
    spec = CapitalMarketsScheduleSpec.model_validate(hong_kong.spec_fields())
    hk = ZoneInfo("Asia/Hong_Kong")
    assert cm.next_transition(spec, dt.datetime(2026, 12, 24, 10, tzinfo=hk)) == dt.datetime(
        2026, 12, 24, 12, tzinfo=hk
    )
    assert cm.next_transition(spec, dt.datetime(2026, 12, 24, 12, tzinfo=hk)) == dt.datetime(
        2026, 12, 28, 9, 30, tzinfo=hk
    )


def test_unknown_exchange_is_a_clear_error() -> None:
    with pytest.raises(UnknownExchange, match="no calendar 'XNOPE'.*get_calendar_names"):
        expand_exchange("XNOPE", 2026, 2026)


@pytest.mark.parametrize(("first", "last"), [(2027, 2026), (2000, 2040)])
def test_bad_year_range_is_refused(first: int, last: int) -> None:
    with pytest.raises(ValueError, match="years"):
        expand_exchange("XNYS", first, last)


def test_missing_library_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "exchange_calendars", None)
    with pytest.raises(CalendarsUnavailable, match=r"pip install fivespot\[calendars\]"):
        expand_exchange("XNYS", 2026, 2026)


def test_resolve_exchange_replaces_the_code_with_the_calendar() -> None:
    resolved = resolve_exchange({"exchange": "XNYS"}, 2026, 2026)
    assert list(resolved) == ["timezone", "sessions", "holidays", "earlyCloses"]
    assert resolved["holidays"] == list(XNYS_2026_HOLIDAYS)
    CapitalMarketsScheduleSpec.model_validate(resolved)


def test_resolve_exchange_keeps_hand_written_entries() -> None:
    resolved = resolve_exchange(
        {
            "exchange": "XNYS",
            "timezone": "America/New_York",
            "sessions": [{"days": "mon-fri", "open": "09:30", "close": "10:30"}],
            "holidays": ["2026-03-02"],
            "earlyCloses": [{"date": "2026-11-27", "closeHour": 12}],
            "lateOpens": [{"date": "2026-03-03", "open": "11:00"}],
        },
        2026,
        2026,
    )
    assert resolved["sessions"] == [{"days": "mon-fri", "open": "09:30", "close": "10:30"}]
    assert "2026-03-02" in resolved["holidays"] and "2026-12-25" in resolved["holidays"]
    assert resolved["earlyCloses"] == [
        {"date": "2026-11-27", "closeHour": 12},
        {"date": "2026-12-24", "close": "13:00"},
    ]
    assert resolved["lateOpens"] == [{"date": "2026-03-03", "open": "11:00"}]
    spec = CapitalMarketsScheduleSpec.model_validate(resolved)
    assert not cm.is_active(spec, dt.datetime(2026, 3, 2, 10, tzinfo=NY))


def test_resolve_exchange_refuses_a_contradicting_timezone() -> None:
    with pytest.raises(ValueError, match="contradicts exchange XNYS"):
        resolve_exchange({"exchange": "XNYS", "timezone": "Europe/London"}, 2026, 2026)


def test_spec_without_exchange_is_left_alone() -> None:
    spec = {"timezone": "UTC", "sessions": []}
    assert resolve_exchange(spec, 2026, 2026) == spec
