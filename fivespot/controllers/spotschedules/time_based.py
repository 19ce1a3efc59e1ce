"""TimeBasedSpotSchedule: weekly windows, absolute ranges and closures, evaluated exactly.

The schedule is open while

    (5-Spot days/hours  or  a minute window  or  an open range)  and not  (a closure)

where a closure is a closed weekly window, a holiday of a `closed.holidays` calendar or a
`closed.dates` date (each for its whole local date), or a closed absolute range. Closed wins.

- The 5-Spot form keeps its meaning: two independent sets, the local weekday in `daysOfWeek` and
  the local hour in `hoursOfDay`. A wrapping hour range such as `22-6` is therefore not tied to
  the day it starts on: with `mon-fri` it opens 00:00-06:59 and 22:00-23:59 on each weekday, and
  Friday's 22:00 night ends at Saturday 00:00 unless `sat` is listed too. An existing object
  keeps its schedule (but for the two zones `intervals` names, whose fall-back splits an hour).
- A minute window belongs to the day it starts on: `fri 22:00-06:00` is Friday 22:00 to
  Saturday 06:00.
- Weekly forms and whole dates are local wall-clock times in `timezone`, mapped to instants as
  `intervals` states: a time the clock skips is the instant the clock jumps past it (a window
  starting in the skipped hour opens when the gap ends), a time the clock shows twice is its
  first occurrence (a window ending in the repeated hour closes at the first pass).
- Absolute ranges are instants and ignore the local clock.

Holidays come from the `holidays` library (`fivespot.api.holiday_calendars`). A year it cannot answer is
refused: `decide` reports Ready=False/HolidaysUnknown (the consumers hold their state) from the
first instant of that year, and until then requeues at that instant.

The decision is a pure function of the spec and an injected instant; `evaluate` wraps it, with
the spec's override applied (`override.with_override`), into the status patch the controller
runtime writes. `marks` gives the dated closures to `fivespot schedule preview`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fivespot.api.holiday_calendars import Unanswerable, holiday, holiday_year
from fivespot.api.kinds.providers import (
    TimeBasedSpotScheduleSpec,
    Window,
    hour_ranges,
    parse_days,
    parse_hours,
)
from fivespot.controllers.spotschedules import intervals
from fivespot.controllers.spotschedules.intervals import Interval
from fivespot.controllers.spotschedules.marks import Mark
from fivespot.controllers.spotschedules.override import with_override
from fivespot.controllers.spotschedules.status import Decision, evaluate_spec

REASON_OPEN: Final = "WindowOpen"
REASON_CLOSED: Final = "WindowClosed"
REASON_DISABLED: Final = "Disabled"
REASON_HOLIDAYS_UNKNOWN: Final = "HolidaysUnknown"

_ONE_DAY: Final = dt.timedelta(days=1)
_WHOLE_DAY: Final = ((0, intervals.MINUTES_PER_DAY),)


_Weekly = tuple[tuple[frozenset[int], int, int], ...]
"""Windows parsed once: (weekdays they start on, start minute, end minute past that midnight)."""


def _weekly(windows: Sequence[Window] | None) -> _Weekly:
    return tuple((w.weekdays, *w.minutes) for w in windows or ())


def _window_ranges(windows: _Weekly, day: dt.date) -> list[tuple[int, int]]:
    """The minutes of local date `day` the windows cover: those starting that day, and the
    after-midnight part of those that started the day before."""
    ranges = []
    weekday, yesterday = day.weekday(), (day.weekday() - 1) % 7
    for weekdays, start, end in windows:
        if weekday in weekdays:
            ranges.append((start, min(end, intervals.MINUTES_PER_DAY)))
        if end > intervals.MINUTES_PER_DAY and yesterday in weekdays:
            ranges.append((0, end - intervals.MINUTES_PER_DAY))
    return ranges


def open_plan(spec: TimeBasedSpotScheduleSpec) -> intervals.DayPlan:
    """The weekly open minute ranges of each local date: the 5-Spot form and the windows."""
    days = parse_days(spec.days_of_week)
    hours = hour_ranges(parse_hours(spec.hours_of_day))
    windows = _weekly(spec.windows)

    def plan(day: dt.date) -> intervals.LocalRanges:
        ranges = list(hours) if day.weekday() in days else []
        return intervals.merge_ranges(ranges + _window_ranges(windows, day))

    return plan


def closed_dates(spec: TimeBasedSpotScheduleSpec, day: dt.date) -> list[str]:
    """Why local date `day` is closed all day: each holiday (`Christmas Day (GB-ENG)`) and
    `closed.dates` entry naming it; empty if none. Unanswerable when a calendar cannot say."""
    closed = spec.closed
    if closed is None:
        return []
    found = []
    for calendar in closed.holidays or ():
        name = holiday(calendar.country, calendar.subdivision, calendar.category_names, day)
        if name is not None:
            found.append(f"{name} ({calendar.label})")
    if day.isoformat() in (closed.dates or ()):
        found.append("closed.dates")
    return found


def closed_plan(spec: TimeBasedSpotScheduleSpec) -> intervals.DayPlan:
    """The closed minute ranges of each local date: the whole date if it is a holiday or a
    closed date, else the closed windows."""
    windows = _weekly(spec.closed.windows if spec.closed is not None else None)

    def plan(day: dt.date) -> intervals.LocalRanges:
        if closed_dates(spec, day):
            return _WHOLE_DAY
        return intervals.merge_ranges(_window_ranges(windows, day))

    return plan


def _ranges(spec: TimeBasedSpotScheduleSpec, closed: bool
            ) -> list[tuple[dt.datetime | None, dt.datetime | None]]:
    if closed:
        given = spec.closed.ranges or () if spec.closed is not None else ()
    else:
        given = spec.open_ranges or ()
    return [r.instants for r in given]


def active_intervals(spec: TimeBasedSpotScheduleSpec, first: dt.date, last: dt.date
                     ) -> list[Interval]:
    """The UTC intervals the schedule is open during local dates first..last (exact up to the
    first instant after `last`, where the last interval may go on). Unanswerable when a holiday
    calendar cannot answer for one of those dates."""
    if not spec.enabled:
        return []
    zone = spec.zone
    within = intervals.span(zone, first, last)
    opened = intervals.union(intervals.planned(open_plan(spec), zone, first, last),
                             intervals.clip(_ranges(spec, closed=False), within))
    if not opened:
        return []
    shut = intervals.union(intervals.planned(closed_plan(spec), zone, first, last),
                           intervals.clip(_ranges(spec, closed=True), within))
    return intervals.subtract(opened, shut)


def _refused_year(spec: TimeBasedSpotScheduleSpec, first: int, last: int) -> Unanswerable | None:
    """The first year of first..last a holiday calendar of the spec cannot answer for."""
    calendars = spec.closed.holidays or () if spec.closed is not None else ()
    for year in range(first, last + 1):
        for calendar in calendars:
            try:
                holiday_year(calendar.country, calendar.subdivision, calendar.category_names, year)
            except Unanswerable as refused:
                return refused
    return None


def _answerable(spec: TimeBasedSpotScheduleSpec, first: dt.date, last: dt.date, today: dt.date
                ) -> tuple[dt.date, dt.date, Unanswerable | None]:
    """first..last cut to the dates around `today` the holiday calendars answer for, and the
    refusal that cut the end (None: not cut). Unanswerable if `today` itself is refused."""
    before = _refused_year(spec, first.year, first.year) if first.year < today.year else None
    if before is not None:
        first = dt.date(today.year, 1, 1)
    refused = _refused_year(spec, today.year, last.year)
    if refused is not None:
        if refused.year == today.year:
            raise refused
        last = dt.date(refused.year, 1, 1) - _ONE_DAY
    return first, last, refused


def is_active(spec: TimeBasedSpotScheduleSpec, now: dt.datetime) -> bool:
    """Whether the schedule is open at `now`; Unanswerable if a holiday calendar cannot say."""
    today = intervals.local_date(now, spec.zone)
    first, last, _ = _answerable(spec, today - _ONE_DAY, today + _ONE_DAY, today)
    return any(start <= now < end for start, end in active_intervals(spec, first, last))


def _upcoming(spec: TimeBasedSpotScheduleSpec, now: dt.datetime
              ) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The next transition (None: none known within the horizon) and, when the holiday data
    stops before the horizon, the first instant it does not cover."""
    zone = spec.zone
    today = intervals.local_date(now, zone)
    first, last, refused = _answerable(
        spec, today - _ONE_DAY, today + dt.timedelta(days=intervals.HORIZON_DAYS), today)
    uncovered = intervals.span(zone, first, last)[1] if refused is not None else None
    for days in _LOOK_AHEAD_DAYS:
        # Most schedules flip within days: plan a week first, the whole horizon only if needed.
        until = min(last, today + dt.timedelta(days=days))
        planned_until = intervals.span(zone, first, until)[1]
        found = _first_flip(active_intervals(spec, first, until), now)
        if found is not None and found < planned_until:
            return found, uncovered
        if until == last:
            break
    return None, uncovered  # none, or the last interval may go on past what was planned


_LOOK_AHEAD_DAYS: Final = (8, 40, intervals.HORIZON_DAYS)


def _first_flip(stretches: Sequence[Interval], now: dt.datetime) -> dt.datetime | None:
    for start, end in stretches:
        if now < start:
            return start
        if now < end:
            return end
    return None


def next_transition(spec: TimeBasedSpotScheduleSpec, now: dt.datetime) -> dt.datetime | None:
    """The first instant after `now` at which the schedule opens or closes, in UTC; None if it
    does not within a year (disabled, empty, open around the clock) or before the holiday data
    stops. Unanswerable if a holiday calendar cannot say for today."""
    return _upcoming(spec, now)[0]


def decide(spec: TimeBasedSpotScheduleSpec, now: dt.datetime) -> Decision:
    """The status-relevant outcome at `now`."""
    if not spec.enabled:
        return Decision(
            False, None, REASON_DISABLED, "spec.enabled is false; the window is ignored"
        )
    try:
        active = is_active(spec, now)
        following, uncovered = _upcoming(spec, now)
    except Unanswerable as refused:
        return Decision(False, None, REASON_HOLIDAYS_UNKNOWN, (
            f"status.active keeps its last value: {refused}; upgrade fivespot for a newer "
            "holidays library or remove the calendar from spec.closed.holidays"), ready=False)
    if active:
        return Decision(True, following, REASON_OPEN, "schedule window open", requeue_at=uncovered)
    return Decision(False, following, REASON_CLOSED, "schedule window closed",
                    requeue_at=uncovered)


@dataclass(frozen=True)
class Closure:
    """A dated closure, for a preview to mark: UTC [start, end) and what closes it."""

    start: dt.datetime
    end: dt.datetime
    what: str


def closures(spec: TimeBasedSpotScheduleSpec, start: dt.datetime, end: dt.datetime
             ) -> tuple[tuple[Closure, ...], str | None]:
    """The holidays, closed dates and closed ranges that overlap [start, end), in time order,
    and why the list stops early (a year a holiday calendar cannot answer for), or None. Closed
    weekly windows are not listed: they are part of the week, not of a date."""
    zone = spec.zone
    found: list[Closure] = []
    problem: str | None = None
    day, last = intervals.local_date(start, zone), intervals.local_date(end, zone)
    while day <= last:
        try:
            reasons = closed_dates(spec, day)
        except Unanswerable as refused:
            problem = str(refused)
            break
        if reasons:
            begins, ends = intervals.span(zone, day, day)
            found.append(Closure(begins, ends, "; ".join(reasons)))
        day += _ONE_DAY
    for range_start, range_end in intervals.clip(_ranges(spec, closed=True), (start, end)):
        found.append(Closure(range_start, range_end, "closed.ranges"))
    return tuple(sorted(found, key=lambda c: (c.start, c.end, c.what))), problem


def marks(spec: TimeBasedSpotScheduleSpec, start: dt.datetime, end: dt.datetime) -> Iterator[Mark]:
    """The dated closures between `start` and `end` (`closures`), for `fivespot schedule preview`
    to list and draw: each a holiday mark over its whole stretch. Where a holiday calendar stops
    answering the marks stop too, as the timeline does."""
    for closure in closures(spec, start, end)[0]:
        yield Mark(closure.start, closure.end, "holiday", f"{closure.what}: closed")


def evaluate(
    spec: Mapping[str, Any] | None,
    generation: int,
    prior_status: Mapping[str, Any] | None,
    now: dt.datetime,
) -> tuple[dict[str, Any] | None, dt.datetime | None]:
    """The status merge patch to write (None if nothing changed) and when to reconcile next
    (None: only on the next spec change). An invalid spec is reported as Ready=False."""
    return evaluate_spec(TimeBasedSpotScheduleSpec, with_override(decide), spec, generation, prior_status,
                         now)
