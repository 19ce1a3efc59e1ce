"""CapitalMarketsSchedule: active while an exchange is in session, to the minute.

The calendar lives entirely in the spec (sessions, holidays, early closes, late opens), written
there by the compiler from `exchange_calendars` or by hand, so the controller makes no network
calls and every calendar change is reviewed in a pull request. For each local date the market
is open inside any session that runs on that weekday, unless the date is a holiday; an early
close cuts the day's sessions at its time and a late open holds them until its time. Sessions
that touch merge, so a session ending at 24:00 and another starting at 00:00 the next day are
one stretch with no transition at midnight.

5-Spot's whole-hour sessions (`daysOfWeek`/`hoursOfDay`) and `closeHour` early closes mean what
they meant there: hour sets, and "open through the end of closeHour".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from api.kinds.providers import CapitalMarketsScheduleSpec
from controllers.providers import intervals
from controllers.providers.status import Decision, evaluate_spec

REASON_OPEN: Final = "SessionOpen"
REASON_CLOSED: Final = "SessionClosed"


def day_plan(spec: CapitalMarketsScheduleSpec) -> intervals.DayPlan:
    """The open minute ranges of each local date."""
    holidays = frozenset(dt.date.fromisoformat(day) for day in spec.holidays)
    early = {dt.date.fromisoformat(e.date): e.close_minute for e in spec.early_closes}
    late = {dt.date.fromisoformat(e.date): e.open_minute for e in spec.late_opens}
    by_weekday: list[list[tuple[int, int]]] = [[] for _ in range(7)]
    for session in spec.sessions:
        for weekday in session.weekdays:
            by_weekday[weekday].extend(session.minutes)
    regular = [intervals.merge_ranges(ranges) for ranges in by_weekday]

    def plan(day: dt.date) -> intervals.LocalRanges:
        if day in holidays:
            return ()
        ranges = regular[day.weekday()]
        if day not in early and day not in late:
            return ranges
        opens, closes = late.get(day, 0), early.get(day, intervals.MINUTES_PER_DAY)
        return intervals.merge_ranges(
            [(max(start, opens), min(end, closes)) for start, end in ranges]
        )

    return plan


def is_active(spec: CapitalMarketsScheduleSpec, now: dt.datetime) -> bool:
    """Whether the market is in session at `now`."""
    return intervals.is_active(day_plan(spec), spec.zone, now)


def next_transition(spec: CapitalMarketsScheduleSpec, now: dt.datetime) -> dt.datetime | None:
    """The next open or close strictly after `now`, in UTC; None if there is none within a year
    (no sessions, or every session day a holiday)."""
    return intervals.next_transition(day_plan(spec), spec.zone, now)


def decide(spec: CapitalMarketsScheduleSpec, now: dt.datetime) -> Decision:
    """The status-relevant outcome at `now`."""
    plan = day_plan(spec)
    active = intervals.is_active(plan, spec.zone, now)
    following = intervals.next_transition(plan, spec.zone, now)
    if active:
        return Decision(True, following, REASON_OPEN, "market session open")
    return Decision(False, following, REASON_CLOSED, "market session closed")


def evaluate(
    spec: Mapping[str, Any] | None,
    generation: int,
    prior_status: Mapping[str, Any] | None,
    now: dt.datetime,
) -> tuple[dict[str, Any] | None, dt.datetime | None]:
    """The status merge patch to write (None if nothing changed) and when to reconcile next
    (None: only on the next spec change). An invalid spec is reported as Ready=False."""
    return evaluate_spec(CapitalMarketsScheduleSpec, decide, spec, generation, prior_status, now)
