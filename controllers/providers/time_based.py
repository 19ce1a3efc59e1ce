"""TimeBasedSpotSchedule: the weekly day-of-week / hour-of-day window of 5-Spot, evaluated exactly.

The window is two independent sets, as in 5-Spot: the local weekday must be in `daysOfWeek` and
the local hour in `hoursOfDay`. A wrapping hour range such as `22-6` is therefore not tied to
the day it starts on: with `mon-fri` it opens 00:00-06:59 and 22:00-23:59 on each weekday, and
Friday's 22:00 night ends at Saturday 00:00 unless `sat` is listed too. An existing 5-Spot
object thus keeps its meaning (but for the two zones `intervals` names, whose fall-back splits an
hour); only the requeue is now exact instead of hour-granular.

The decision is a pure function of the spec and an injected instant; `evaluate` wraps it into
the status patch the controller runtime writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from api.kinds.providers import (
    TimeBasedSpotScheduleSpec,
    hour_ranges,
    parse_days,
    parse_hours,
)
from controllers.providers import intervals
from controllers.providers.override import with_override
from controllers.providers.status import Decision, evaluate_spec, window_decision

REASON_OPEN: Final = "WindowOpen"
REASON_CLOSED: Final = "WindowClosed"
REASON_DISABLED: Final = "Disabled"


def day_plan(spec: TimeBasedSpotScheduleSpec) -> intervals.DayPlan:
    """The open minute ranges of each local date."""
    days = parse_days(spec.days_of_week) if spec.enabled else frozenset()
    ranges = hour_ranges(parse_hours(spec.hours_of_day))

    def plan(day: dt.date) -> intervals.LocalRanges:
        return ranges if day.weekday() in days else ()

    return plan


def is_active(spec: TimeBasedSpotScheduleSpec, now: dt.datetime) -> bool:
    """Whether the window is open at `now`."""
    return intervals.is_active(day_plan(spec), spec.zone, now)


def next_transition(spec: TimeBasedSpotScheduleSpec, now: dt.datetime) -> dt.datetime | None:
    """The first instant after `now` at which the window opens or closes, in UTC; None if it
    never does (disabled, empty, or open around the clock)."""
    return intervals.next_transition(day_plan(spec), spec.zone, now)


def decide(spec: TimeBasedSpotScheduleSpec, now: dt.datetime) -> Decision:
    """The status-relevant outcome at `now`."""
    if not spec.enabled:
        return Decision(
            False, None, REASON_DISABLED, "spec.enabled is false; the window is ignored"
        )
    return window_decision(day_plan(spec), spec.zone, now, (REASON_OPEN, "schedule window open"),
                           (REASON_CLOSED, "schedule window closed"))


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
