"""Public-holiday calendars agree with the `holidays` library on every day of 2026-2028 for 14
countries and subdivisions, and the provider flips at the boundary instant of each holiday, to
the second, in the calendar's own zone, the weeks of the clock changes included (the same
minute-exact checks the exchange calendars get in test_provider_exchange_overnight.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import holidays
import pytest

from fivespot.api.kinds.providers import TimeBasedSpotScheduleSpec
from fivespot.controllers.spotschedules import time_based as tb

pytestmark = pytest.mark.unit

CALENDARS: list[tuple[str, str | None, str]] = [
    ("US", None, "America/New_York"),
    ("US", "NY", "America/New_York"),
    ("US", "CA", "America/Los_Angeles"),
    ("GB", "ENG", "Europe/London"),
    ("GB", "SCT", "Europe/London"),
    ("DE", "BY", "Europe/Berlin"),
    ("FR", None, "Europe/Paris"),
    ("CH", "ZH", "Europe/Zurich"),
    ("IE", None, "Europe/Dublin"),
    ("JP", None, "Asia/Tokyo"),
    ("AU", "NSW", "Australia/Sydney"),
    ("NZ", None, "Pacific/Auckland"),
    ("CA", "ON", "America/Toronto"),
    ("BR", None, "America/Sao_Paulo"),
]
FIRST, LAST = dt.date(2026, 1, 1), dt.date(2028, 12, 31)
SECOND = dt.timedelta(seconds=1)
ONE_DAY = dt.timedelta(days=1)
IDS = [f"{c}-{s}" if s else c for c, s, _ in CALENDARS]


def _days() -> list[dt.date]:
    return [FIRST + dt.timedelta(days=n) for n in range((LAST - FIRST).days + 1)]


def _library(country: str, subdivision: str | None) -> set[dt.date]:
    return set(holidays.country_holidays(country, subdiv=subdivision, years=range(2026, 2029)))


def _spec(country: str, subdivision: str | None, zone: str, windows: list[dict[str, str]]
          ) -> TimeBasedSpotScheduleSpec:
    calendar: dict[str, Any] = {"country": country}
    if subdivision is not None:
        calendar["subdivision"] = subdivision
    return TimeBasedSpotScheduleSpec.model_validate(
        {"timezone": zone, "windows": windows, "closed": {"holidays": [calendar]}})


def _local(day: dt.date, minute: int, zone: ZoneInfo) -> dt.datetime:
    """The first instant the clock in `zone` shows `day` + `minute` or later: the wall time's
    first occurrence, or, in a gap, found by stepping minute by minute from just before the jump
    (independent of `intervals.wall_to_utc`)."""
    wall = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=minute)
    first = wall.replace(tzinfo=zone, fold=0).astimezone(dt.timezone.utc)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    instant = wall.replace(tzinfo=zone, fold=1).astimezone(dt.timezone.utc)
    while instant.astimezone(zone).replace(tzinfo=None) < wall:
        instant += dt.timedelta(minutes=1)
    return instant


ALL_DAY = [{"days": "mon-sun", "start": "00:00", "end": "24:00"}]


@pytest.mark.parametrize(("country", "subdivision", "zone"), CALENDARS, ids=IDS)
def test_every_day_of_2026_to_2028_is_closed_exactly_when_the_library_says_holiday(
        country: str, subdivision: str | None, zone: str) -> None:
    schedule = _spec(country, subdivision, zone, ALL_DAY)
    library = _library(country, subdivision)
    assert len(library) >= 24
    open_ = tb.active_intervals(schedule, FIRST, LAST)
    tz = ZoneInfo(zone)
    for day in _days():
        noon = _local(day, 12 * 60, tz)
        is_open = any(start <= noon < end for start, end in open_)
        assert is_open is (day not in library), (country, subdivision, day)
        assert (tb.closed_dates(schedule, day) != []) is (day in library)


@pytest.mark.parametrize(("country", "subdivision", "zone"), CALENDARS, ids=IDS)
def test_the_provider_flips_at_the_first_and_last_instant_of_every_holiday(
        country: str, subdivision: str | None, zone: str) -> None:
    schedule = _spec(country, subdivision, zone, ALL_DAY)
    library = _library(country, subdivision)
    tz = ZoneInfo(zone)
    runs: list[tuple[dt.date, dt.date]] = []
    for day in sorted(library):
        if runs and runs[-1][1] + ONE_DAY == day:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    for first, last in runs:
        closes, reopens = _local(first, 0, tz), _local(last + ONE_DAY, 0, tz)
        assert tb.is_active(schedule, closes - SECOND) and not tb.is_active(schedule, closes)
        assert tb.next_transition(schedule, closes - SECOND) == closes
        assert tb.next_transition(schedule, closes) == reopens
        assert not tb.is_active(schedule, reopens - SECOND) and tb.is_active(schedule, reopens)


def _clock_changes(zone: ZoneInfo) -> list[dt.date]:
    """The local dates of 2026-2028 on which `zone`'s UTC offset changes."""
    found = []
    for day in _days():
        if _local(day, 0, zone).astimezone(zone).utcoffset() != \
                _local(day + ONE_DAY, 0, zone).astimezone(zone).utcoffset():
            found.append(day)
    return found


@pytest.mark.parametrize(("country", "subdivision", "zone"), CALENDARS, ids=IDS)
def test_office_hours_in_the_weeks_of_the_clock_changes_open_and_close_on_the_minute(
        country: str, subdivision: str | None, zone: str) -> None:
    office = _spec(country, subdivision, zone, [{"days": "mon-fri", "start": "08:30", "end": "17:45"}])
    library = _library(country, subdivision)
    tz = ZoneInfo(zone)
    changes = _clock_changes(tz)
    if zone in ("Asia/Tokyo", "America/Sao_Paulo"):
        assert changes == []
    else:
        assert len(changes) == 6, changes
    # The weeks of the changes, and for zones without any the weeks of Easter-ish spring.
    weeks = changes or [dt.date(2026, 3, 30), dt.date(2027, 3, 29), dt.date(2028, 4, 10)]
    checked = 0
    for change in weeks:
        for offset in range(-3, 8):
            day = change + dt.timedelta(days=offset)
            working = day.weekday() < 5 and day not in library
            opens, closes = _local(day, 8 * 60 + 30, tz), _local(day, 17 * 60 + 45, tz)
            assert not tb.is_active(office, opens - SECOND)
            assert tb.is_active(office, opens) is working, day
            assert tb.is_active(office, closes - SECOND) is working, day
            assert not tb.is_active(office, closes)
            if working:
                assert tb.next_transition(office, opens - SECOND) == opens
                assert tb.next_transition(office, opens) == closes
            checked += 1
    assert checked >= 33


def test_the_docs_name_the_library_version_the_image_pins() -> None:
    root = Path(__file__).resolve().parents[2]
    (pin,) = [line.split(" ")[0] for line in (root / "image" / "requirements.txt").read_text().splitlines()
              if line.startswith("holidays==")]
    version = pin.removeprefix("holidays==")
    assert f"holidays {version}" in (root / "docs" / "reference" / "calendars.md").read_text()
