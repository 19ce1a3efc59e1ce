"""Exact activity and next transition of a schedule described as open minutes per local day.

A provider requeues at its next boundary instead of polling, so the boundary has to be exact:
stepping hour by hour (as 5-Spot did) misses 09:30 opens and half-hour time zones. Every
built-in provider is instead described by a *day plan*: for a local date, the [start, end)
minute ranges during which it is active (end 1440 = the next midnight). This module turns day
plans into UTC intervals and answers both questions from the same intervals, so `is_active`
and `next_transition` cannot disagree.

Local wall-clock minutes map to instants as "the first instant at which the clock shows that
time or later":
- an unambiguous time is that instant;
- a time the clock skips (spring forward) is the instant the clock jumps past it, so an hour
  range that starts in the gap opens when the gap ends and an hour that is entirely skipped
  never occurs;
- a time the clock shows twice (fall back) is its first occurrence, so a boundary inside the
  repeated hour takes effect once and does not re-trigger when the hour repeats.
For whole-hour ranges this is exactly 5-Spot's "the local hour is in the set" at every instant
wherever no hour boundary falls strictly inside a repeated stretch, which is every IANA zone
except two (checked over every zone's 2024-2026 transitions): Antarctica/Troll, which repeats
two hours, and Pacific/Chatham, which repeats 02:45-03:44. There, the second pass through the
part of an hour that ends inside the stretch is not active again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from typing import Final
from zoneinfo import ZoneInfo

MINUTES_PER_DAY: Final = 1440
HORIZON_DAYS: Final = 370
"""How far ahead `next_transition` looks: a year of daily plans, a leap day and a few days'
margin for a boundary just past it. Nothing beyond is reported; the controller's periodic resync
covers the pathological calendar whose next change is more than a year away."""

LocalRanges = Sequence[tuple[int, int]]
DayPlan = Callable[[dt.date], LocalRanges]
"""For a local date, its sorted [start, end) minute ranges of activity, 0 <= start < end <= 1440."""

_UTC: Final = dt.timezone.utc


def merge_ranges(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, disjoint ranges covering the same minutes; touching ranges become one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def wall_to_utc(day: dt.date, minute: int, zone: ZoneInfo) -> dt.datetime:
    """The first instant at which the clock in `zone` shows `day` + `minute` or later."""
    wall = dt.datetime.combine(day, dt.time()) + dt.timedelta(minutes=minute)
    instant = wall.replace(tzinfo=zone).astimezone(_UTC)  # fold=0: the first occurrence
    if instant.astimezone(zone).replace(tzinfo=None) == wall:
        return instant
    # `wall` is in a gap. fold=0 applied the pre-transition offset and landed after the jump,
    # fold=1 the post-transition one and landed before it; bisect for the jump itself.
    before = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    after = int(instant.timestamp())
    while after - before > 1:
        middle = (before + after) // 2
        shown = dt.datetime.fromtimestamp(middle, zone).replace(tzinfo=None)
        if shown >= wall:
            after = middle
        else:
            before = middle
    return dt.datetime.fromtimestamp(after, _UTC)


def local_date(now: dt.datetime, zone: ZoneInfo) -> dt.date:
    """The date the clock in `zone` shows at `now`."""
    return require_aware(now).astimezone(zone).date()


def utc_intervals(
    plan: DayPlan, zone: ZoneInfo, first: dt.date, last: dt.date
) -> Iterator[tuple[dt.datetime, dt.datetime, bool]]:
    """The plan's active intervals for local dates first..last as merged UTC [start, end)
    intervals, in order. The flag says whether `end` is a real boundary; for the last interval
    it is False, because the next day (not planned) may continue it."""
    pending: tuple[dt.datetime, dt.datetime] | None = None
    day = first
    while day <= last:
        for start_minute, end_minute in plan(day):
            start = wall_to_utc(day, start_minute, zone)
            end = wall_to_utc(day, end_minute, zone)
            if start >= end:
                continue  # entirely inside a skipped hour
            if pending is not None and start <= pending[1]:
                pending = (pending[0], max(pending[1], end))
                continue
            if pending is not None:
                yield pending[0], pending[1], True
            pending = (start, end)
        day += dt.timedelta(days=1)
    if pending is not None:
        yield pending[0], pending[1], False


def is_active(plan: DayPlan, zone: ZoneInfo, now: dt.datetime) -> bool:
    """Whether `now` falls inside the plan's active intervals."""
    today = local_date(now, zone)
    one_day = dt.timedelta(days=1)
    return any(
        start <= now < end
        for start, end, _ in utc_intervals(plan, zone, today - one_day, today + one_day)
    )


def next_transition(
    plan: DayPlan, zone: ZoneInfo, now: dt.datetime, horizon_days: int = HORIZON_DAYS
) -> dt.datetime | None:
    """The first instant strictly after `now` at which `is_active` flips, in UTC, or None when
    it does not flip within `horizon_days` local days."""
    today = local_date(now, zone)
    first, last = today - dt.timedelta(days=1), today + dt.timedelta(days=horizon_days)
    for start, end, end_is_boundary in utc_intervals(plan, zone, first, last):
        if now < start:
            return start
        if now < end:
            return end if end_is_boundary else None
    return None


def require_aware(now: dt.datetime) -> dt.datetime:
    """`now` itself; ValueError if it is naive, because a naive instant has no local time."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"a timezone-aware instant is required, got the naive {now.isoformat()}")
    return now


# --- absolute intervals: the algebra the weekly plans and absolute ranges are combined with -----

Interval = tuple[dt.datetime, dt.datetime]
"""A UTC [start, end) stretch."""


def planned(plan: DayPlan, zone: ZoneInfo, first: dt.date, last: dt.date) -> list[Interval]:
    """The plan's merged UTC intervals for local dates first..last."""
    return [(start, end) for start, end, _ in utc_intervals(plan, zone, first, last)]


def span(zone: ZoneInfo, first: dt.date, last: dt.date) -> Interval:
    """From the first instant of local date `first` to the first instant after `last`."""
    return wall_to_utc(first, 0, zone), wall_to_utc(last + dt.timedelta(days=1), 0, zone)


def clip(ranges: Sequence[tuple[dt.datetime | None, dt.datetime | None]],
         within: Interval) -> list[Interval]:
    """Absolute ranges (None: open-ended) cut to `within`, in UTC, empty ones dropped."""
    low, high = within
    found = []
    for start, end in ranges:
        begins = max(low, start.astimezone(_UTC)) if start is not None else low
        ends = min(high, end.astimezone(_UTC)) if end is not None else high
        if begins < ends:
            found.append((begins, ends))
    return found


def union(*groups: Sequence[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering every interval given; touching ones merge."""
    merged: list[Interval] = []
    for start, end in sorted(i for group in groups for i in group if i[0] < i[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def subtract(base: Sequence[Interval], cuts: Sequence[Interval]) -> list[Interval]:
    """The parts of `base` (sorted, disjoint) outside every interval of `cuts`."""
    remaining: list[Interval] = []
    holes = union(cuts)
    for start, end in base:
        cursor = start
        for hole_start, hole_end in holes:
            if hole_end <= cursor or hole_start >= end:
                continue
            if hole_start > cursor:
                remaining.append((cursor, hole_start))
            cursor = max(cursor, hole_end)
            if cursor >= end:
                break
        if cursor < end:
            remaining.append((cursor, end))
    return remaining
