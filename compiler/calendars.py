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
in two around a lunch break), holidays (trading weekdays without a session), early closes and
late opens (sessions shorter than the regular one). A calendar that needs more than that in
the requested years (a session longer than the regular one, an irregular lunch break, an
overnight session, trading on a non-trading weekday) is refused rather than approximated.
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

from api.kinds.providers import DAY_NAMES, MAX_CALENDAR_DATES

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
    """One regular trading session: local `open`/`close` (HH:MM) on `days` (daysOfWeek syntax)."""

    days: str
    open: str
    close: str


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

    def spec_fields(self) -> dict[str, Any]:
        """The CapitalMarketsSchedule spec fields (camelCase) that encode this calendar."""
        fields: dict[str, Any] = {
            "timezone": self.timezone,
            "sessions": [
                {"days": s.days, "open": s.open, "close": s.close} for s in self.sessions
            ],
            "holidays": list(self.holidays),
            "earlyCloses": [{"date": d, "close": c} for d, c in self.early_closes],
        }
        if self.late_opens:
            fields["lateOpens"] = [{"date": d, "open": o} for d, o in self.late_opens]
        return fields


@dataclass(frozen=True)
class _Session:
    day: dt.date
    open: str
    close: str
    break_start: str | None
    break_end: str | None


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
    for session in sessions:
        day = session.day.isoformat()
        if session.day.weekday() not in trading_weekdays:
            raise InexpressibleCalendar(
                f"{code} trades on {day}, a {DAY_NAMES[session.day.weekday()]}, outside its "
                "regular trading weekdays"
            )
        if session.open < opens or session.close > closes:
            raise InexpressibleCalendar(
                f"{code} trades {session.open}-{session.close} on {day}, beyond its regular "
                f"{opens}-{closes}"
            )
        _check_break(code, session, breaks)
        if session.open > opens:
            late.append((day, session.open))
        if session.close < closes:
            early.append((day, session.close))

    traded = {s.day for s in sessions}
    holidays = [
        day.isoformat()
        for day in _days(start, end)
        if day.weekday() in trading_weekdays and day not in traded
    ]
    for what, count in (("holidays", len(holidays)), ("early closes", len(early)),
                        ("late opens", len(late))):
        if count > MAX_CALENDAR_DATES:
            raise InexpressibleCalendar(
                f"{code} has {count} {what} in {first_year}..{last_year}, more than the "
                f"{MAX_CALENDAR_DATES} a CapitalMarketsSchedule holds; cover fewer years"
            )
    days = _days_expression(trading_weekdays)
    regular: tuple[ExchangeSession, ...]
    if breaks is None:
        regular = (ExchangeSession(days, opens, closes),)
    else:
        regular = (
            ExchangeSession(days, opens, breaks[0]),
            ExchangeSession(days, breaks[1], closes),
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
    )


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

        def local(value: Any, *, is_close: bool = False) -> str | None:
            if pandas.isna(value):
                return None
            when: dt.datetime = value.to_pydatetime().astimezone(zone)
            if when.second or when.microsecond:
                raise InexpressibleCalendar(f"{code} on {day}: {when.time()} is not a whole minute")
            if is_close and when.date() == day + dt.timedelta(days=1) and when.time() == dt.time():
                return "24:00"
            if when.date() != day:
                raise InexpressibleCalendar(
                    f"{code} on {day}: the session crosses local midnight ({when.isoformat()})"
                )
            return when.strftime("%H:%M")

        opens, closes = local(row["open"]), local(row["close"], is_close=True)
        if opens is None or closes is None:
            raise InexpressibleCalendar(f"{code} on {day}: no open or close time")
        sessions.append(_Session(day, opens, closes, local(row["break_start"]),
                                 local(row["break_end"])))
    if not sessions:
        raise InexpressibleCalendar(f"{code} has no sessions in the requested years")
    return sessions


def _most_common(values: Any) -> str:
    # Ties go to the first seen, so the result is deterministic for a given calendar.
    return str(Counter(values).most_common(1)[0][0])


def _most_common_break(sessions: Sequence[_Session]) -> tuple[str, str] | None:
    breaks = Counter(
        (s.break_start, s.break_end)
        for s in sessions
        if s.break_start is not None and s.break_end is not None
    )
    if not breaks:
        return None
    return breaks.most_common(1)[0][0]


def _check_break(code: str, session: _Session, regular: tuple[str, str] | None) -> None:
    own = (
        (session.break_start, session.break_end)
        if session.break_start is not None and session.break_end is not None
        else None
    )
    if own == regular:
        return
    if own is None and regular is not None:
        # A half day that ends before lunch or starts after it needs no break of its own.
        if session.close <= regular[0] or session.open >= regular[1]:
            return
    raise InexpressibleCalendar(
        f"{code} on {session.day}: its lunch break {own} differs from the regular {regular}"
    )


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
