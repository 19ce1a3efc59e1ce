"""Exchange calendars, expanded at compile time into CapitalMarketsSchedule specs.

A config repo may say `exchange: XNYS` instead of listing an exchange's sessions, holidays and
early closes by hand. The compiler calls `resolve_exchange` to replace that with the concrete
calendar from the `exchange_calendars` library, for the years it is asked to cover, so that:
- the calendar the controller follows is written in the compiled object and reviewed in the
  pull request that changes it (a library upgrade that moves a holiday shows up as a diff);
- the controller needs neither the library nor the network at run time.

`exchange_calendars` (and pandas under it) is an optional dependency, imported only here and
only when an exchange is expanded: `pip install fivespot[calendars]`.

Everything is expressed in the CapitalMarketsSchedule vocabulary: the regular session (split
in two around a lunch break; opening the evening before its trading date for futures, as the
library labels them), holidays (trading weekdays without a session), early closes and late
opens (sessions shorter than the regular one), and special sessions for every other date (a
longer day, an irregular break, a session on a non-trading weekday). What still cannot be said
(a session longer than 24 hours, or one ending before its trading date) is refused rather than
approximated.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import importlib.metadata
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from zoneinfo import ZoneInfo

from fivespot.api.kinds.providers import DAY_NAMES, MAX_CALENDAR_DATES, MAX_SESSIONS_PER_DATE, MINUTES_PER_DAY

INSTALL_HINT: Final = "pip install fivespot[calendars]"
MAX_YEARS: Final = 30


class CalendarsUnavailable(RuntimeError):
    """The optional `exchange_calendars` library is not installed."""


class UnknownExchange(ValueError):
    """`exchange_calendars` has no calendar under that code."""


class CalendarBuildFailed(RuntimeError):
    """`exchange_calendars` (or pandas under it) failed to build a calendar it lists, for a reason
    of its own: an incompatible pandas, a bug in one calendar's rules."""


class InexpressibleCalendar(ValueError):
    """The exchange's calendar in the requested years cannot be written as a
    CapitalMarketsSchedule spec without changing its meaning."""


@dataclass(frozen=True)
class ExchangeSession:
    """One regular trading session: local `open`/`close` (HH:MM) on `days` (daysOfWeek syntax),
    opening the evening before its trading date when `opens_previous_day`."""

    days: str
    open: str
    close: str
    opens_previous_day: bool = False

    def spec(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"days": self.days, "open": self.open, "close": self.close}
        if self.opens_previous_day:
            fields["opensPreviousDay"] = True
        return fields


@dataclass(frozen=True)
class ExchangeCalendar:
    """An exchange's calendar for the years first_year..last_year, in the exchange's zone."""

    code: str
    timezone: str
    first_year: int
    last_year: int
    sessions: tuple[ExchangeSession, ...]
    holidays: tuple[str, ...]
    """ISO dates of trading weekdays on which the exchange does not trade."""
    early_closes: tuple[tuple[str, str], ...]
    """(ISO date, local HH:MM close) of sessions that close before the regular close."""
    late_opens: tuple[tuple[str, str], ...]
    """(ISO date, local HH:MM open) of sessions that open after the regular open."""
    special_sessions: tuple[tuple[str, tuple[tuple[str, str, bool], ...]], ...] = ()
    """(ISO date, its sessions as (open, close, opens the day before)) of dates trading other
    sessions than the regular ones: a longer day, a non-trading weekday, an irregular break."""

    def spec_fields(self) -> dict[str, Any]:
        """The CapitalMarketsSchedule spec fields (camelCase) that encode this calendar."""
        fields: dict[str, Any] = {
            "timezone": self.timezone,
            "sessions": [s.spec() for s in self.sessions],
            "holidays": list(self.holidays),
            "earlyCloses": [{"date": d, "close": c} for d, c in self.early_closes],
        }
        if self.late_opens:
            fields["lateOpens"] = [{"date": d, "open": o} for d, o in self.late_opens]
        if self.special_sessions:
            fields["specialSessions"] = [
                {"date": day, "sessions": [
                    {"open": o, "close": c, **({"opensPreviousDay": True} if before else {})}
                    for o, c, before in times]}
                for day, times in self.special_sessions]
        return fields


@dataclass(frozen=True)
class _Session:
    """One library session, its times in minutes from its trading date's local midnight
    (negative: the evening before; 1440: the next midnight)."""

    day: dt.date
    open: int
    close: int
    break_start: int | None
    break_end: int | None

    @property
    def breaks(self) -> tuple[int, int] | None:
        if self.break_start is None or self.break_end is None:
            return None
        return self.break_start, self.break_end

    def ranges(self) -> list[tuple[int, int]]:
        """Its open [start, end) minutes, split around the break."""
        if self.breaks is None:
            return [(self.open, self.close)]
        return [(self.open, self.break_start or 0), (self.break_end or 0, self.close)]


def expand_exchange(code: str, first_year: int, last_year: int) -> ExchangeCalendar:
    """The calendar of exchange `code` (an ISO 10383 MIC such as XNYS) for whole years.

    Raises CalendarsUnavailable without the library, UnknownExchange for a code it does not
    know, InexpressibleCalendar when the result cannot be a CapitalMarketsSchedule, ValueError
    for a year range the library refuses, and CalendarBuildFailed when the library fails."""
    if not 0 <= last_year - first_year < MAX_YEARS:
        raise ValueError(
            f"years {first_year}..{last_year}: give 1 to {MAX_YEARS} years, first before last"
        )
    library = _library()
    return _expand(library, _canonical(library, code), first_year, last_year)


def _canonical(library: Any, code: str) -> str:
    """The MIC an alias (NYSE, LSE, CME) stands for, so each calendar is built and cached once."""
    try:
        return str(library.resolve_alias(code))
    except library.errors.InvalidCalendarName:
        raise _unknown(code) from None


def _unknown(code: str) -> UnknownExchange:
    return UnknownExchange(
        f"exchange_calendars has no calendar {code!r}; use a MIC such as XNYS, XLON or XTKS "
        "(exchange_calendars.get_calendar_names() lists them all)"
    )


@functools.lru_cache(maxsize=256)
def _expand(library: Any, code: str, first_year: int, last_year: int) -> ExchangeCalendar:
    # Cached: a config repo names the same few exchanges for many schedules, and building a
    # calendar costs a good fraction of a second. ExchangeCalendar is immutable.
    start, end = dt.date(first_year, 1, 1), dt.date(last_year, 12, 31)
    # The library's own pandas deprecation warnings are not something a fivespot user can act on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            calendar = library.get_calendar(code, start=start.isoformat(), end=end.isoformat())
            schedule = calendar.schedule
        except library.errors.InvalidCalendarName:
            raise _unknown(code) from None
        except ValueError:
            raise  # the library's refusal of these years ("holidays only recorded to 2026")
        except Exception as error:  # whatever else the library or pandas raises
            raise CalendarBuildFailed(
                f"exchange_calendars {_version()} with pandas {_version('pandas')} cannot build "
                f"the {code} calendar for {first_year}..{last_year}: {type(error).__name__}: "
                f"{error}"
            ) from error
    zone = ZoneInfo(str(calendar.tz.key))
    trading_weekdays = tuple(i for i, flag in enumerate(str(calendar.weekmask)) if flag == "1")
    sessions = _sessions(schedule, zone, code)

    opens = _most_common(s.open for s in sessions)
    closes = _most_common(s.close for s in sessions)
    breaks = _most_common_break(sessions)
    early: list[tuple[str, str]] = []
    late: list[tuple[str, str]] = []
    special: list[tuple[str, tuple[tuple[str, str, bool], ...]]] = []
    for session in sessions:
        day = session.day.isoformat()
        if session.day.weekday() in trading_weekdays and _shortened(session, opens, closes, breaks):
            if session.open > opens:
                late.append((day, _clock(session.open)))
            if session.close < closes:
                early.append((day, _clock(session.close)))
        else:
            special.append((day, _special(code, session)))

    traded = {s.day for s in sessions}
    holidays = [
        day.isoformat()
        for day in _days(start, end)
        if day.weekday() in trading_weekdays and day not in traded
    ]
    for what, count in (("holidays", len(holidays)), ("early closes", len(early)),
                        ("late opens", len(late)), ("special sessions", len(special))):
        if count > MAX_CALENDAR_DATES:
            raise InexpressibleCalendar(
                f"{code} has {count} {what} in {first_year}..{last_year}, more than the "
                f"{MAX_CALENDAR_DATES} a CapitalMarketsSchedule holds; cover fewer years"
            )
    days = _days_expression(trading_weekdays)
    bounds = [opens, closes] if breaks is None else [opens, breaks[0], breaks[1], closes]
    regular = tuple(
        _regular(code, days, bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2)
    )
    return ExchangeCalendar(
        code=code,
        timezone=zone.key,
        first_year=first_year,
        last_year=last_year,
        sessions=regular,
        holidays=tuple(holidays),
        early_closes=tuple(early),
        late_opens=tuple(late),
        special_sessions=tuple(special),
    )


def _shortened(session: _Session, opens: int, closes: int, breaks: tuple[int, int] | None) -> bool:
    """Whether `session` is the regular one cut by a late open and/or an early close: it lies
    within the regular hours, keeps the regular break (or ends before it or starts after it),
    and a late open is on the trading date itself (a late open is a time on that date)."""
    if session.open < opens or session.close > closes:
        return False
    if session.open > opens and session.open < 0:
        return False
    if session.breaks == breaks:
        return True
    return session.breaks is None and breaks is not None and (
        session.close <= breaks[0] or session.open >= breaks[1])


def _regular(code: str, days: str, opens: int, closes: int) -> ExchangeSession:
    open_, close, before = _times(code, f"its regular {days} session", opens, closes)
    return ExchangeSession(days, open_, close, before)


def _special(code: str, session: _Session) -> tuple[tuple[str, str, bool], ...]:
    where = f"its session of {session.day}"
    times = tuple(_times(code, where, start, end) for start, end in session.ranges())
    if len(times) > MAX_SESSIONS_PER_DATE:
        raise InexpressibleCalendar(f"{code}: {where} has more than {MAX_SESSIONS_PER_DATE} parts")
    return times


def _times(code: str, where: str, start: int, end: int) -> tuple[str, str, bool]:
    """A [start, end) minute range of a trading date as (open, close, opens the day before)."""
    day = MINUTES_PER_DAY
    if -day <= start < 0 and 0 <= end <= start + day:
        return _clock(start + day), _clock(end), True
    if 0 <= start < end <= day:
        return _clock(start), _clock(end), False
    raise InexpressibleCalendar(
        f"{code}: {where} runs from {_offset(start)} to {_offset(end)} of its trading date; a "
        "session must close on its trading date, within 24 hours of opening"
    )


def _clock(minute: int) -> str:
    return "24:00" if minute == MINUTES_PER_DAY else f"{minute // 60:02d}:{minute % 60:02d}"


def _offset(minute: int) -> str:
    days, rest = divmod(minute, MINUTES_PER_DAY)
    suffix = {0: "", -1: " the day before", 1: " the day after"}.get(days, f" {days:+d} days")
    return f"{_clock(rest)}{suffix}"


def resolve_exchange(spec: Mapping[str, Any], first_year: int, last_year: int) -> dict[str, Any]:
    """A config-repo CapitalMarketsSchedule spec with its `exchange` replaced by the calendar.

    Hand-written fields win: explicit `sessions` replace the regular ones (say, only the first
    trading hour), and hand-written holidays, early closes and late opens are added to the
    exchange's (on the same date, the hand-written entry wins). A `timezone` other than the
    exchange's is refused, since every time in the calendar is the exchange's local time.
    A spec without `exchange` is returned unchanged."""
    fields = dict(spec)
    code = fields.pop("exchange", None)
    if code is None:
        return fields
    if not isinstance(code, str):
        raise ValueError(f"exchange must be a MIC string such as XNYS, got {code!r}")
    calendar = expand_exchange(code, first_year, last_year)
    given_zone = fields.pop("timezone", None)
    if given_zone is not None and given_zone != calendar.timezone:
        raise ValueError(
            f"timezone {given_zone!r} contradicts exchange {code}, which trades in "
            f"{calendar.timezone}; remove timezone or set it to {calendar.timezone}"
        )
    expanded = calendar.spec_fields()
    resolved: dict[str, Any] = {
        "timezone": calendar.timezone,
        "sessions": fields.pop("sessions", expanded["sessions"]),
        "holidays": sorted(set(expanded["holidays"]) | set(fields.pop("holidays", ()))),
        "earlyCloses": _by_date(expanded["earlyCloses"], fields.pop("earlyCloses", ())),
    }
    late = _by_date(expanded.get("lateOpens", ()), fields.pop("lateOpens", ()))
    if late:
        resolved["lateOpens"] = late
    special = _by_date(expanded.get("specialSessions", ()), fields.pop("specialSessions", ()))
    if special:
        resolved["specialSessions"] = special
    resolved.update(fields)
    return resolved


def _library() -> Any:
    try:
        return importlib.import_module("exchange_calendars")
    except ImportError as err:
        raise CalendarsUnavailable(
            f"expanding an exchange calendar needs the exchange_calendars library: {INSTALL_HINT}"
        ) from err


def _version(distribution: str = "exchange_calendars") -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def _sessions(schedule: Any, zone: ZoneInfo, code: str) -> list[_Session]:
    pandas = importlib.import_module("pandas")
    sessions = []
    for label, row in schedule.iterrows():
        day = label.date()
        midnight = dt.datetime.combine(day, dt.time())

        def minutes(value: Any) -> int | None:
            """Minutes of the local wall clock after the trading date's midnight."""
            if pandas.isna(value):
                return None
            when: dt.datetime = value.to_pydatetime().astimezone(zone)
            if when.second or when.microsecond:
                raise InexpressibleCalendar(f"{code} on {day}: {when.time()} is not a whole minute")
            return int((when.replace(tzinfo=None) - midnight).total_seconds()) // 60

        opens, closes = minutes(row["open"]), minutes(row["close"])
        if opens is None or closes is None:
            raise InexpressibleCalendar(f"{code} on {day}: no open or close time")
        sessions.append(_Session(day, opens, closes, minutes(row["break_start"]),
                                 minutes(row["break_end"])))
    if not sessions:
        raise InexpressibleCalendar(f"{code} has no sessions in the requested years")
    return sessions


def _most_common(values: Any) -> int:
    # Ties go to the first seen, so the result is deterministic for a given calendar.
    return int(Counter(values).most_common(1)[0][0])


def _most_common_break(sessions: Sequence[_Session]) -> tuple[int, int] | None:
    breaks = Counter(s.breaks for s in sessions if s.breaks is not None)
    if not breaks:
        return None
    return breaks.most_common(1)[0][0]


def _days(start: dt.date, end: dt.date) -> list[dt.date]:
    return [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]


def _days_expression(weekdays: Sequence[int]) -> str:
    """Weekday indexes as the shortest daysOfWeek item: (0, 1, 2, 3, 4) -> mon-fri."""
    runs: list[list[int]] = []
    for weekday in sorted(weekdays):
        if runs and runs[-1][-1] == weekday - 1:
            runs[-1].append(weekday)
        else:
            runs.append([weekday])
    return ",".join(
        DAY_NAMES[run[0]] if len(run) == 1 else f"{DAY_NAMES[run[0]]}-{DAY_NAMES[run[-1]]}"
        for run in runs
    )


def _by_date(
    derived: Sequence[Mapping[str, Any]], given: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    merged = {str(entry["date"]): dict(entry) for entry in derived}
    merged.update({str(entry["date"]): dict(entry) for entry in given})
    return [merged[day] for day in sorted(merged)]
