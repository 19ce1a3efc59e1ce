"""CapitalMarketsSchedule: active while an exchange is in session, to the minute.

The calendar lives entirely in the spec (sessions, holidays, early closes, late opens), written
there by the compiler from `exchange_calendars` or by hand, so the controller makes no network
calls and every calendar change is reviewed in a pull request. For each local date the market
trades its special sessions if it has any, else every session that runs on that weekday, unless
the date is a holiday; an early close cuts the day's sessions at its time and a late open holds
them until its time. A session may open the evening before its trading date (futures: Monday's
session opens Sunday 17:00), so a local day's open minutes are its own sessions after midnight
plus the evening part of the next date's. Sessions that touch merge, so a session ending at
24:00 and another starting at 00:00 the next day are one stretch with no transition at
midnight.

5-Spot's whole-hour sessions (`daysOfWeek`/`hoursOfDay`) and `closeHour` early closes mean what
they meant there: hour sets, and "open through the end of closeHour".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from fivespot.api.kinds.providers import CapitalMarketsScheduleSpec
from fivespot.controllers.spotschedules import intervals
from fivespot.controllers.spotschedules.marks import Mark
from fivespot.controllers.spotschedules.override import with_override
from fivespot.controllers.spotschedules.status import Decision, evaluate_spec, window_decision

REASON_OPEN: Final = "SessionOpen"
REASON_CLOSED: Final = "SessionClosed"


def scheduled_plan(spec: CapitalMarketsScheduleSpec) -> Callable[[dt.date], intervals.LocalRanges]:
    """For a trading date, the sessions it is scheduled to trade before holidays, early closes
    and late opens: its special sessions if it has any, else the regular ones of its weekday, as
    [start, end) minutes from that date's local midnight (negative: the evening before)."""
    special = {dt.date.fromisoformat(s.date): intervals.merge_ranges([t.minutes for t in s.sessions])
               for s in spec.special_sessions}
    by_weekday: list[list[tuple[int, int]]] = [[] for _ in range(7)]
    for session in spec.sessions:
        for weekday in session.weekdays:
            by_weekday[weekday].extend(session.minutes)
    regular = [intervals.merge_ranges(ranges) for ranges in by_weekday]

    def plan(day: dt.date) -> intervals.LocalRanges:
        return special.get(day, regular[day.weekday()])

    return plan


def trading_plan(spec: CapitalMarketsScheduleSpec) -> Callable[[dt.date], intervals.LocalRanges]:
    """For a trading date, its open [start, end) minutes counted from that date's local
    midnight; a session that opens the evening before starts at a negative minute."""
    holidays = frozenset(dt.date.fromisoformat(day) for day in spec.holidays)
    early = {dt.date.fromisoformat(e.date): e.close_minute for e in spec.early_closes}
    late = {dt.date.fromisoformat(e.date): e.open_minute for e in spec.late_opens}
    scheduled = scheduled_plan(spec)

    def plan(day: dt.date) -> intervals.LocalRanges:
        if day in holidays:
            return ()
        ranges = scheduled(day)
        if day not in early and day not in late:
            return ranges
        opens = late.get(day, -intervals.MINUTES_PER_DAY)
        closes = early.get(day, intervals.MINUTES_PER_DAY)
        return intervals.merge_ranges(
            [(max(start, opens), min(end, closes)) for start, end in ranges]
        )

    return plan


def day_plan(spec: CapitalMarketsScheduleSpec) -> intervals.DayPlan:
    """The open minute ranges of each local calendar date: the part of that date's own
    sessions after its midnight, and the evening part of the next date's sessions that open
    the day before."""
    trading = trading_plan(spec)
    one_day = dt.timedelta(days=1)
    whole = intervals.MINUTES_PER_DAY

    def plan(day: dt.date) -> intervals.LocalRanges:
        own = [(max(start, 0), end) for start, end in trading(day) if end > 0]
        evening = [(start + whole, min(end, 0) + whole)
                   for start, end in trading(day + one_day) if start < 0]
        return intervals.merge_ranges(own + evening)

    return plan


def marks(spec: CapitalMarketsScheduleSpec, start: dt.datetime, end: dt.datetime
          ) -> Iterator[Mark]:
    """The calendar's exceptions between `start` and `end`, for `fivespot schedule preview`: each
    holiday as its whole local date, the trading time an early close or a late open takes away
    from the date's scheduled sessions, and each special date's own sessions."""
    zone, one_day = spec.zone, dt.timedelta(days=1)
    scheduled = scheduled_plan(spec)
    first, last = intervals.local_date(start, zone) - one_day, intervals.local_date(end, zone) + one_day

    def at(day: dt.date, minute: int) -> dt.datetime:
        return intervals.wall_to_utc(day, minute, zone)

    def within(day: dt.date) -> bool:
        return first <= day <= last

    for text in spec.holidays:
        day = dt.date.fromisoformat(text)
        if within(day):
            yield Mark(at(day, 0), at(day + one_day, 0), "holiday", f"holiday {text}: closed")
    for early in spec.early_closes:
        day = dt.date.fromisoformat(early.date)
        ends = max((end_ for _, end_ in scheduled(day)), default=None)
        if within(day) and ends is not None and ends > early.close_minute:
            yield Mark(at(day, early.close_minute), at(day, ends), "early-close",
                       f"early close {early.date}: closed from {_clock(early.close_minute)}")
    for late in spec.late_opens:
        day = dt.date.fromisoformat(late.date)
        opens = min((start_ for start_, _ in scheduled(day)), default=None)
        if within(day) and opens is not None and opens < late.open_minute:
            yield Mark(at(day, opens), at(day, late.open_minute), "late-open",
                       f"late open {late.date}: closed until {_clock(late.open_minute)}")
    for special in spec.special_sessions:
        day = dt.date.fromisoformat(special.date)
        if within(day):
            for opens, closes in scheduled(day):
                yield Mark(at(day, opens), at(day, closes), "special-session",
                           f"special session {special.date}")


def _clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def is_active(spec: CapitalMarketsScheduleSpec, now: dt.datetime) -> bool:
    """Whether the market is in session at `now`."""
    return intervals.is_active(day_plan(spec), spec.zone, now)


def next_transition(spec: CapitalMarketsScheduleSpec, now: dt.datetime) -> dt.datetime | None:
    """The next open or close strictly after `now`, in UTC; None if there is none within a year
    (no sessions, or every session day a holiday)."""
    return intervals.next_transition(day_plan(spec), spec.zone, now)


def decide(spec: CapitalMarketsScheduleSpec, now: dt.datetime) -> Decision:
    """The status-relevant outcome at `now`."""
    return window_decision(day_plan(spec), spec.zone, now, (REASON_OPEN, "market session open"),
                           (REASON_CLOSED, "market session closed"))


def evaluate(
    spec: Mapping[str, Any] | None,
    generation: int,
    prior_status: Mapping[str, Any] | None,
    now: dt.datetime,
) -> tuple[dict[str, Any] | None, dt.datetime | None]:
    """The status merge patch to write (None if nothing changed) and when to reconcile next
    (None: only on the next spec change). An invalid spec is reported as Ready=False."""
    return evaluate_spec(CapitalMarketsScheduleSpec, with_override(decide), spec, generation, prior_status,
                         now)
