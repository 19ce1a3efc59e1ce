"""docs/reference/schedules-from-other-tools.md: each fivespot form in its table behaves as the
other tool's form beside it, over the week the table names.

The other tools' rules are written here from their documentation, independently of fivespot:
kube-green and KEDA's cron scaler act on cron firings (the state is the last firing's), the
downscalers evaluate a timespan list at an instant (relative spans: the local weekday in an
inclusive, possibly wrapping day range and the local time in `from-to`, a reversed range being
the two ends of the day and equal ends never; absolute spans: start inclusive, end exclusive).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from fivespot.api.kinds.providers import TimeBasedSpotScheduleSpec
from fivespot.controllers.spotschedules import time_based as tb

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "schedules-from-other-tools.md"
UTC = dt.timezone.utc
MINUTE = dt.timedelta(minutes=1)
SECOND = dt.timedelta(seconds=1)
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _rows() -> list[tuple[str, str, dict[str, Any], dict[str, Any], dt.date]]:
    rows = []
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[2].startswith("`{"):
            continue
        ident, tool, theirs, ours, week = cells
        rows.append((ident, tool, yaml.safe_load(theirs.strip("`")), yaml.safe_load(ours.strip("`")),
                     dt.date.fromisoformat(week)))
    return rows


ROWS = _rows()


# --- the other tools' rules ----------------------------------------------------------------------


def _cron_field(text: str, value: int, low: int, high: int) -> bool:
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/")
            step = int(step_text)
        if part == "*":
            first, last = low, high
        elif "-" in part:
            first, last = (int(x) for x in part.split("-"))
        else:
            first = last = int(part)
        if first <= value <= last and (value - first) % step == 0:
            return True
    return False


def _cron_fires(expression: str, local: dt.datetime) -> bool:
    """Whether a 5-field cron expression fires at the local minute `local` (day of week 0 or 7 is
    Sunday, as in cron)."""
    minute, hour, dom, month, dow = expression.split()
    weekday = (local.weekday() + 1) % 7
    return (_cron_field(minute, local.minute, 0, 59) and _cron_field(hour, local.hour, 0, 23)
            and _cron_field(dom, local.day, 1, 31) and _cron_field(month, local.month, 1, 12)
            and (_cron_field(dow, weekday, 0, 7) or (weekday == 0 and _cron_field(dow, 7, 0, 7))))


def _last_firing(expression: str, zone: ZoneInfo, now: dt.datetime) -> dt.datetime | None:
    """The last minute at or before `now` the expression fired, within 8 days."""
    instant = now.astimezone(UTC).replace(second=0, microsecond=0)
    for _ in range(8 * 24 * 60):
        if _cron_fires(expression, instant.astimezone(zone)):
            return instant
        instant -= MINUTE
    return None


def _cron_window(start: str, end: str, zone: ZoneInfo) -> Callable[[dt.datetime], bool]:
    def active(now: dt.datetime) -> bool:
        started, ended = _last_firing(start, zone, now), _last_firing(end, zone, now)
        return started is not None and (ended is None or started > ended)
    return active


def _kube_green(form: dict[str, Any]) -> Callable[[dt.datetime], bool]:
    """Awake after the last wakeUpAt firing on `weekdays`, asleep after the last sleepAt one."""
    zone = ZoneInfo(form.get("timeZone", "UTC"))

    def cron(clock: str) -> str:
        hour, minute = clock.split(":")
        return f"{int(minute)} {int(hour)} * * {form['weekdays']}"

    return _cron_window(cron(form["wakeUpAt"]), cron(form["sleepAt"]), zone)


_SPAN = re.compile(r"^(?:(\w{3})-(\w{3}) )?(\d\d):(\d\d)-(\d\d):(\d\d)(?: (\S+))?$")


def _timespan(text: str) -> Callable[[dt.datetime], bool]:
    text = text.strip()
    if text.lower() in ("always", "true"):
        return lambda now: True
    if text.lower() in ("never", "false"):
        return lambda now: False
    if text.startswith("from "):
        start = dt.datetime.fromisoformat(text.removeprefix("from "))
        return lambda now: now >= start
    if text.startswith("until "):
        end = dt.datetime.fromisoformat(text.removeprefix("until "))
        return lambda now: now < end
    absolute = re.fullmatch(r"(\S+?[+-]\d\d:\d\d|\S+?Z) ?- ?(\S+)", text)
    if absolute and "T" in text:
        start, end = (dt.datetime.fromisoformat(t) for t in absolute.groups())
        return lambda now: start <= now < end
    found = _SPAN.fullmatch(text)
    assert found, text
    first, last, h1, m1, h2, m2, zone_name = found.groups()
    zone = ZoneInfo(zone_name)
    days = range(7) if first is None else _day_range(first, last)
    begin, finish = int(h1) * 60 + int(m1), int(h2) * 60 + int(m2)

    def active(now: dt.datetime) -> bool:
        local = now.astimezone(zone)
        minute = local.hour * 60 + local.minute
        if local.weekday() not in days or begin == finish:
            return False
        if begin < finish:
            return begin <= minute < finish
        return minute >= begin or minute < finish
    return active


def _day_range(first: str, last: str) -> set[int]:
    start, stop = DAYS.index(first.lower()), DAYS.index(last.lower())
    return {(start + step) % 7 for step in range((stop - start) % 7 + 1)}


def _spans(text: str) -> list[Callable[[dt.datetime], bool]]:
    return [_timespan(part) for part in text.split(",")]


def _downscaler(form: dict[str, Any]) -> Callable[[dt.datetime], bool]:
    uptime = _spans(form["uptime"]) if "uptime" in form else None
    downtime = _spans(form["downtime"]) if "downtime" in form else []
    forced = _spans(form["force-downtime"]) if "force-downtime" in form else []

    def active(now: dt.datetime) -> bool:
        if any(span(now) for span in forced):
            return False
        if uptime is not None:
            return any(span(now) for span in uptime)
        return not any(span(now) for span in downtime)
    return active


def _theirs(tool: str, form: dict[str, Any]) -> Callable[[dt.datetime], bool]:
    if tool == "kube-green":
        return _kube_green(form)
    if tool == "KEDA cron":
        return _cron_window(form["start"], form["end"], ZoneInfo(form["timezone"]))
    assert tool in ("GoKubeDownscaler", "py-kube-downscaler"), tool
    return _downscaler(form)


# --- the comparison -------------------------------------------------------------------------------


def test_the_table_lists_every_tool_and_enough_forms() -> None:
    tools = {row[1] for row in ROWS}
    assert tools == {"kube-green", "KEDA cron", "GoKubeDownscaler", "py-kube-downscaler"}
    assert len(ROWS) >= 24 and len({row[0] for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize(("ident", "tool", "theirs", "ours", "week"), ROWS, ids=[r[0] for r in ROWS])
def test_the_fivespot_form_behaves_as_the_tools_over_its_week(
        ident: str, tool: str, theirs: dict[str, Any], ours: dict[str, Any], week: dt.date) -> None:
    schedule = TimeBasedSpotScheduleSpec.model_validate(ours)
    rule = _theirs(tool, theirs)
    zone = schedule.zone
    start = dt.datetime.combine(week, dt.time(), zone).astimezone(UTC)
    end = start + dt.timedelta(days=7)
    instant = start
    while instant < end:
        assert tb.is_active(schedule, instant) is rule(instant), (ident, instant)
        instant += dt.timedelta(minutes=30)
    flips, instant = 0, start
    while (following := tb.next_transition(schedule, instant)) is not None and following < end:
        assert rule(following) is tb.is_active(schedule, following), (ident, following)
        assert rule(following - SECOND) is not rule(following), (ident, following)
        flips, instant = flips + 1, following
    if ident not in ("gkd-never", "gkd-never-boolean", "gkd-always"):
        assert flips >= 1, ident
