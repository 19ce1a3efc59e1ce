"""The built-in spot-schedule provider kinds of `spotschedules.5spot.finos.org/v1alpha1`:
ManualSchedule (`ms`), TimeBasedSpotSchedule (`tbss`) and CapitalMarketsSchedule (`cms`).

These models are the single description of each kind's `spec` and `status`. The compiler turns
them into CRD schemas (every string and list is bounded so Kubernetes' CEL cost estimate stays
finite, and the admission-time rules ride along as `x-kubernetes-validations`); the provider
controllers validate objects with them and read the parsed day, hour and clock values from the
helpers at the bottom, so what admission accepts and what a controller evaluates cannot drift.

The day/hour range syntax is the one of the original 5-Spot providers: `mon`, `mon-fri`, a
wrapping `fri-mon`, comma lists `mon-wed,fri`; hours `9`, inclusive `9-17` (09:00 through 17:59),
wrapping `22-6`. TimeBasedSpotSchedule adds minute windows, absolute RFC 3339 ranges and closures
(closed windows, public holidays, dates, ranges; docs/design/decisions/0027-minute-windows-holidays-and-absolute-ranges.md). CapitalMarketsSchedule adds minute-precision sessions (`09:30`-`16:00`, or overnight with
`opensPreviousDay`), per-date `specialSessions`, and keeps
the hour-granular `daysOfWeek`/`hoursOfDay` sessions and `closeHour` early closes of 5-Spot so
existing objects keep working.

Each CEL rule is a module constant with its message; the pydantic validators raise the same
message, so the offline checker, the API server and a controller report a bad spec alike.
Only one check differs in kind: an unknown but well-formed time zone makes the API server's
`getHours(self)` call fail, and Kubernetes rejects the object with "unknown time zone X
evaluating rule: <message>" rather than the plain message (kube-apiserver embeds the IANA
database via `time/tzdata`, so this does not depend on the control-plane host).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Annotated, Any, Final, Literal
from zoneinfo import ZoneInfo

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from fivespot.api.kinds.base import KindModel, PreservingModel
from fivespot.api.kinds.scheduled_capacity import (
    CONDITION_REASON_PATTERN,
    CONDITION_TYPE_PATTERN,
    MAX_CONDITIONS,
    cel_string,
)

VERSION: Final = "v1alpha1"

# --- the range and clock syntax -----------------------------------------------------------------

DAY_NAMES: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
"""Index = Python's `date.weekday()`: Monday is 0."""

_DAY: Final = "(" + "|".join(DAY_NAMES) + ")"
_HOUR: Final = "([01]?[0-9]|2[0-3])"


def _list_of(atom: str) -> str:
    item = f"{atom}( *- *{atom})?"
    return f"^ *{item}( *, *{item})* *$"


DAYS_PATTERN: Final = _list_of(_DAY)
"""One `daysOfWeek` item: a day, a range (wrapping allowed) or a comma list of those."""
HOURS_PATTERN: Final = _list_of(_HOUR)
"""One `hoursOfDay` item: an hour 0-23, an inclusive range (wrapping allowed) or a comma list."""
TIMEZONE_PATTERN: Final = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$"
DATE_PATTERN: Final = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
CLOCK_PATTERN: Final = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
CLOSE_CLOCK_PATTERN: Final = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"
INSTANT_PATTERN: Final = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
"""RFC 3339 with the zone written out (`Z` or an offset): an instant, never a wall-clock time."""
COUNTRY_PATTERN: Final = r"^[A-Z]{2,3}$"
SUBDIVISION_PATTERN: Final = r"^[^ ,;]([^,;]{0,30}[^ ,;])?$"
CATEGORY_PATTERN: Final = r"^[a-z][a-z_]{0,31}$"
_YEAR: Final = "[1-9][0-9]{3}"
_LEAP_YEAR: Final = "([1-9][0-9](0[48]|[2468][048]|[13579][26])|([13579][26]|[2468][048])00)"
_MONTH_DAY: Final = (
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    "|02-(0[1-9]|1[0-9]|2[0-8]))"
)
UNTIL_PATTERN: Final = (
    f"^({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
"""An override's `until`: RFC 3339 as Kubernetes writes metav1.Time (upper-case T and Z, or a
numeric offset), seconds required, at most nanoseconds, on a day the calendar has (Gregorian
leap years; years 1000-9999). A rule, not `format: date-time`: the API server's date-time check
lets an array through in place of the string, and admits lower-case, 99-hour offsets and year 0.
The open and closed ranges' `INSTANT_PATTERN` stays beside `format: date-time` instead: there the
API server's CEL must type the instants as timestamps to compare them (`RANGE_ORDER_RULE`)."""

DAYS_MESSAGE: Final = (
    "must be a day (mon, tue, wed, thu, fri, sat, sun), a range such as mon-fri or the "
    "wrapping fri-mon, or a comma list such as mon-wed,fri"
)
HOURS_MESSAGE: Final = (
    "must be an hour 0-23, an inclusive range such as 9-17 (09:00 through 17:59) or the "
    "wrapping 22-6, or a comma list such as 0-9,17-23"
)
TIMEZONE_MESSAGE: Final = (
    "must be an IANA time zone name such as UTC, America/New_York or Europe/London"
)
DATE_MESSAGE: Final = "must be a calendar date written YYYY-MM-DD, such as 2026-11-27"
CLOCK_MESSAGE: Final = "must be a local time HH:MM on a 24-hour clock, such as 09:30"
CLOSE_CLOCK_MESSAGE: Final = (
    "must be a local time HH:MM on a 24-hour clock, such as 16:00, or 24:00 for the end of the day"
)
UNTIL_MESSAGE: Final = (
    "must be an RFC 3339 instant with its offset, such as 2026-03-02T18:00:00Z or "
    "2026-03-02T19:00:00+01:00"
)
WINDOW_DAYS_MESSAGE: Final = (
    "must be the days the window starts on: a day (mon..sun), a range such as mon-fri or the "
    "wrapping fri-mon, or a comma list such as mon-wed,fri"
)
WINDOW_LENGTH_MESSAGE: Final = (
    "start and end must differ: 00:00 to 24:00 is the whole day, and an end earlier than the "
    "start runs past midnight into the next day (fri 22:00 to 06:00 ends Saturday 06:00)"
)
RANGE_FORM_MESSAGE: Final = (
    "give start, end or both: an absolute range is start (inclusive) to end (exclusive), "
    "RFC 3339 with a zone such as 2026-12-24T00:00:00+01:00; start alone is from then on, end "
    "alone is until then"
)
RANGE_ORDER_MESSAGE: Final = "start must be earlier than end"
INSTANT_MESSAGE: Final = (
    "must be an RFC 3339 instant with its zone, such as 2026-12-24T08:00:00Z or "
    "2026-12-24T09:00:00+01:00"
)

# --- CEL rules (cel-go semantics, RE2 regular expressions) ---------------------------------------

DAYS_RULE: Final = f"self.matches({cel_string(DAYS_PATTERN)})"
UNTIL_RULE: Final = f"self.matches({cel_string(UNTIL_PATTERN)})"
HOURS_RULE: Final = f"self.matches({cel_string(HOURS_PATTERN)})"
CLOCK_RULE: Final = f"self.matches({cel_string(CLOCK_PATTERN)})"
CLOSE_CLOCK_RULE: Final = f"self.matches({cel_string(CLOSE_CLOCK_PATTERN)})"

TIMEZONE_RULE: Final = (
    f"self.matches({cel_string(TIMEZONE_PATTERN)}) && self != 'Local' && "
    "timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0"
)
"""A malformed name fails the pattern and gets the message. A well-formed name goes to cel-go's
`getHours(zone)`, which calls Go's `time.LoadLocation` and errors on a zone it does not know; an
evaluation error rejects the object too. `Local` (the API server's own zone to Go) and names with
`:` (parsed by cel-go as a UTC offset) are not IANA names, so the pattern and the `!=` keep them
out; `&&` is commutative over errors in CEL, so a false pattern match wins over the error."""

SESSION_FORM_RULE: Final = (
    "(has(self.days) && has(self.open) && has(self.close) && "
    "!has(self.daysOfWeek) && !has(self.hoursOfDay)) || "
    "(!has(self.days) && !has(self.open) && !has(self.close) && "
    "has(self.daysOfWeek) && has(self.hoursOfDay))"
)
SESSION_FORM_MESSAGE: Final = (
    "a session is either {days, open, close} with minute precision (days: mon-fri, open: "
    "'09:30', close: '16:00') or the whole-hour 5-Spot form {daysOfWeek, hoursOfDay}, not a mix"
)
SESSION_ORDER_RULE: Final = (
    "!has(self.open) || !has(self.close) || "
    "((has(self.opensPreviousDay) && self.opensPreviousDay) "
    "? self.close <= self.open : self.open < self.close)"
)
SESSION_ORDER_MESSAGE: Final = (
    "open must be earlier than close on the same day; for a session that opens the evening "
    "before its trading date (futures: Monday's session opens Sunday 17:00) set "
    "opensPreviousDay: true, and then close must be at or before open (at most 24 hours)"
)
OVERNIGHT_FORM_RULE: Final = "!has(self.opensPreviousDay) || has(self.open)"
OVERNIGHT_FORM_MESSAGE: Final = (
    "opensPreviousDay needs the minute form {days, open, close}; the whole-hour 5-Spot form "
    "cannot open the day before"
)
EARLY_CLOSE_FORM_RULE: Final = "has(self.close) != has(self.closeHour)"
EARLY_CLOSE_FORM_MESSAGE: Final = (
    "set exactly one of close (HH:MM, closed from that minute) or closeHour (the 5-Spot form: "
    "the last open hour)"
)

WINDOW_LENGTH_RULE: Final = "self.start != self.end"
RANGE_FORM_RULE: Final = "has(self.start) || has(self.end)"
RANGE_ORDER_RULE: Final = "!has(self.start) || !has(self.end) || self.start < self.end"
"""`start` and `end` are `format: date-time`, which the API server's CEL types as timestamps:
compared as instants, whatever offsets they are written with."""

CEL_RULES: Final = {
    "DAYS_RULE": DAYS_RULE,
    "HOURS_RULE": HOURS_RULE,
    "CLOCK_RULE": CLOCK_RULE,
    "CLOSE_CLOCK_RULE": CLOSE_CLOCK_RULE,
    "TIMEZONE_RULE": TIMEZONE_RULE,
    "SESSION_FORM_RULE": SESSION_FORM_RULE,
    "SESSION_ORDER_RULE": SESSION_ORDER_RULE,
    "OVERNIGHT_FORM_RULE": OVERNIGHT_FORM_RULE,
    "EARLY_CLOSE_FORM_RULE": EARLY_CLOSE_FORM_RULE,
    "UNTIL_RULE": UNTIL_RULE,
    "WINDOW_LENGTH_RULE": WINDOW_LENGTH_RULE,
    "RANGE_FORM_RULE": RANGE_FORM_RULE,
    "RANGE_ORDER_RULE": RANGE_ORDER_RULE,
}
"""Every rule this module attaches, by name, for tests and documentation."""

MAX_DAY_ITEMS: Final = 14
MAX_HOUR_ITEMS: Final = 24
MAX_ITEM_LENGTH: Final = 96
MAX_TIMEZONE_LENGTH: Final = 64
MAX_SESSIONS: Final = 32
MINUTES_PER_DAY: Final = 1440
MAX_CALENDAR_DATES: Final = 366
"""Holidays, early closes, late opens and special sessions, each: a year of days, decades of real
exchange dates."""
MAX_SESSIONS_PER_DATE: Final = 4
"""A special date's own sessions: a day with a lunch break and an evening session fits."""
MAX_WINDOWS: Final = 32
MAX_RANGES: Final = 64
MAX_HOLIDAY_CALENDARS: Final = 8
MAX_CATEGORIES: Final = 8
MAX_INSTANT_LENGTH: Final = 35


def _rule(rule: str, message: str) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


# --- parsing, shared by the validators and the controllers ---------------------------------------

_DAYS_RE: Final = re.compile(DAYS_PATTERN)
_HOURS_RE: Final = re.compile(HOURS_PATTERN)
_TIMEZONE_RE: Final = re.compile(TIMEZONE_PATTERN)
_DATE_RE: Final = re.compile(DATE_PATTERN)
_CLOCK_RE: Final = re.compile(CLOCK_PATTERN)
_CLOSE_CLOCK_RE: Final = re.compile(CLOSE_CLOCK_PATTERN)
_INSTANT_RE: Final = re.compile(INSTANT_PATTERN)
_UNTIL_RE: Final = re.compile(UNTIL_PATTERN)


def _expand(item: str, pattern: re.Pattern[str], message: str, atom: Any, size: int) -> set[int]:
    # fullmatch, not match: Python's `$` also matches before a trailing newline, RE2's does not.
    if pattern.fullmatch(item) is None:
        raise ValueError(f"{message}; got {item!r}")
    result: set[int] = set()
    for part in item.split(","):
        ends = [atom(end.strip()) for end in part.split("-")]
        start, stop = ends[0], ends[-1]
        span = (stop - start) % size
        result.update((start + step) % size for step in range(span + 1))
    return result


def parse_days(items: Iterable[str]) -> frozenset[int]:
    """The weekdays (Monday = 0) named by `daysOfWeek` items; ValueError on a malformed item."""
    days: set[int] = set()
    for item in items:
        days |= _expand(item, _DAYS_RE, DAYS_MESSAGE, DAY_NAMES.index, 7)
    return frozenset(days)


def parse_hours(items: Iterable[str]) -> frozenset[int]:
    """The hours (0-23) named by `hoursOfDay` items; ValueError on a malformed item."""
    hours: set[int] = set()
    for item in items:
        hours |= _expand(item, _HOURS_RE, HOURS_MESSAGE, int, 24)
    return frozenset(hours)


def parse_clock(text: str, *, allow_end_of_day: bool = False) -> int:
    """Minutes after local midnight of `HH:MM` (`24:00` = 1440 only where allowed)."""
    pattern, message = (
        (_CLOSE_CLOCK_RE, CLOSE_CLOCK_MESSAGE) if allow_end_of_day else (_CLOCK_RE, CLOCK_MESSAGE)
    )
    if pattern.fullmatch(text) is None:
        raise ValueError(f"{message}; got {text!r}")
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def parse_date(text: str) -> dt.date:
    """The date written `YYYY-MM-DD`; ValueError naming the problem otherwise."""
    if _DATE_RE.fullmatch(text) is None:
        raise ValueError(f"{DATE_MESSAGE}; got {text!r}")
    try:
        return dt.date.fromisoformat(text)
    except ValueError as err:
        raise ValueError(f"{DATE_MESSAGE}; got {text!r} ({err})") from None


def parse_instant(text: str) -> dt.datetime:
    """The instant written in RFC 3339 with its zone; ValueError naming the problem otherwise."""
    if _INSTANT_RE.fullmatch(text) is None:
        raise ValueError(f"{INSTANT_MESSAGE}; got {text!r}")
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError as err:
        raise ValueError(f"{INSTANT_MESSAGE}; got {text!r} ({err})") from None


def parse_until(text: str) -> dt.datetime:
    """The instant written in RFC 3339 as `UNTIL_PATTERN` takes it, timezone-aware (its own
    offset); ValueError naming the problem otherwise (a date that is not in the calendar, too)."""
    if _UNTIL_RE.fullmatch(text) is None:
        raise ValueError(f"{UNTIL_MESSAGE}; got {text!r}")
    whole, rest = text[:19], text[19:]
    fraction = re.match(r"\.([0-9]+)", rest)
    offset = rest[len(fraction.group(0)):] if fraction else rest
    local = dt.datetime.fromisoformat(whole)  # the pattern admits only days the calendar has
    if fraction:
        local += dt.timedelta(microseconds=int(fraction.group(1).ljust(9, "0")) // 1000)
    if offset == "Z":
        zone = dt.timezone.utc
    else:
        sign = -1 if offset[0] == "-" else 1
        zone = dt.timezone(sign * dt.timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])))
    return local.replace(tzinfo=zone)


def load_timezone(name: str) -> ZoneInfo:
    """The IANA zone `name`; ValueError if it is malformed or not in the time zone database."""
    if _TIMEZONE_RE.fullmatch(name) is None or name == "Local":
        raise ValueError(f"{TIMEZONE_MESSAGE}; got {name!r}")
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        # ZoneInfoNotFoundError is a KeyError; a directory such as "America" is an OSError.
        raise ValueError(
            f"{TIMEZONE_MESSAGE}; {name!r} is not in the IANA time zone database"
        ) from None


def _check_days(item: str) -> str:
    parse_days([item])
    return item


def _check_hours(item: str) -> str:
    parse_hours([item])
    return item


def _check_timezone(name: str) -> str:
    load_timezone(name)
    return name


def _check_date(text: str) -> str:
    parse_date(text)
    return text


def _check_instant(text: str) -> str:
    parse_instant(text)
    return text


def _check_clock(text: str) -> str:
    parse_clock(text)
    return text


def _check_close_clock(text: str) -> str:
    parse_clock(text, allow_end_of_day=True)
    return text


def _check_until(text: str) -> str:
    parse_until(text)
    return text


DayItem = Annotated[
    str,
    Field(max_length=MAX_ITEM_LENGTH, json_schema_extra=_rule(DAYS_RULE, DAYS_MESSAGE)),
    AfterValidator(_check_days),
]
HourItem = Annotated[
    str,
    Field(max_length=MAX_ITEM_LENGTH, json_schema_extra=_rule(HOURS_RULE, HOURS_MESSAGE)),
    AfterValidator(_check_hours),
]
DateText = Annotated[
    str,
    Field(
        max_length=10,
        # The API server checks `format: date` itself and types such a field as a CEL
        # timestamp, so a string rule like matches() would not even compile there.
        json_schema_extra={"format": "date", "pattern": DATE_PATTERN},
    ),
    AfterValidator(_check_date),
]

ClockText = Annotated[
    str,
    Field(max_length=5, json_schema_extra=_rule(CLOCK_RULE, CLOCK_MESSAGE)),
    AfterValidator(_check_clock),
]
CloseClockText = Annotated[
    str,
    Field(max_length=5, json_schema_extra=_rule(CLOSE_CLOCK_RULE, CLOSE_CLOCK_MESSAGE)),
    AfterValidator(_check_close_clock),
]

InstantText = Annotated[
    str,
    Field(
        max_length=MAX_INSTANT_LENGTH,
        # As DateText: `format: date-time` is checked by the API server and typed as a CEL
        # timestamp, so the rules compare instants; the pattern insists on the zone.
        json_schema_extra={"format": "date-time", "pattern": INSTANT_PATTERN},
    ),
    AfterValidator(_check_instant),
]

TimezoneText = Annotated[str, AfterValidator(_check_timezone)]

UntilText = Annotated[
    str,
    Field(max_length=MAX_INSTANT_LENGTH, json_schema_extra=_rule(UNTIL_RULE, UNTIL_MESSAGE)),
    AfterValidator(_check_until),
]


def _timezone_field(what: str) -> Any:
    return Field(
        default="UTC",
        description=(
            f"IANA time zone {what} are evaluated in, for example America/New_York. Daylight "
            "saving changes are followed: an hour the clock skips never occurs, and a boundary "
            "in an hour the clock repeats takes effect at its first occurrence."
        ),
        max_length=MAX_TIMEZONE_LENGTH,
        json_schema_extra=_rule(TIMEZONE_RULE, TIMEZONE_MESSAGE),
    )


class _Model(KindModel):
    """Booleans and integers are declared Strict: lax pydantic would take "true" or "13", which
    the API server's schema refuses, and the two must decide alike."""


# --- specs ---------------------------------------------------------------------------------------


class Override(_Model):
    """A hand on the schedule for a while: `status.active` is `active` until `until`, and from
    that instant the schedule decides again, as if the override had never been written. The
    provider requeues the object at exactly `until`, so the hand-back needs no poll, and because
    the override is in the spec a provider restarted meanwhile honours it all the same."""

    active: StrictBool = Field(
        description="What status.active is until `until`: true holds the schedule on (\"on for "
        "the next 3 hours\"), false holds it off."
    )
    until: UntilText = Field(
        description="When the override ends, RFC 3339 with its offset, for example "
        "2026-03-02T21:00:00Z. From that instant the schedule's own decision is published again; "
        "an override whose until has passed does nothing (`fivespot schedule override NAME "
        "--clear` removes it)."
    )

    @property
    def expires(self) -> dt.datetime:
        """`until` as an aware instant."""
        return parse_until(self.until)


OVERRIDE_DESCRIPTION: Final = (
    "Optional: hold status.active at override.active until override.until, then hand back to "
    "the schedule (`fivespot schedule override NAME --on --for 3h`). While it is in force "
    "status.overrideUntil says until when and the Ready reason is Overridden."
)


def _override_field() -> Any:
    return Field(default=None, description=OVERRIDE_DESCRIPTION)


class ManualScheduleSpec(_Model):
    """A manual toggle: the schedule is active exactly while `enabled` is true."""

    enabled: StrictBool = Field(
        description="When true the schedule is active; when false, inactive."
    )
    override: Override | None = _override_field()


# --- minute windows, absolute ranges and closures (TimeBasedSpotSchedule) ----------------------


class Window(_Model):
    """A weekly window with minute precision: open from `start` to `end` (local) on each of
    `days`. An end earlier than the start runs past midnight: the window belongs to the day it
    starts on (fri 22:00 to 06:00 is Friday 22:00 to Saturday 06:00)."""

    model_config = ConfigDict(
        json_schema_extra=_rule(WINDOW_LENGTH_RULE, WINDOW_LENGTH_MESSAGE)
    )

    days: str = Field(
        description="Days the window starts on: mon..sun, ranges such as mon-fri or the wrapping "
        "fri-mon, comma lists such as mon-wed,fri.",
        max_length=MAX_ITEM_LENGTH,
        json_schema_extra=_rule(DAYS_RULE, WINDOW_DAYS_MESSAGE),
    )
    start: ClockText = Field(description="Local time HH:MM from which the window is open.")
    end: CloseClockText = Field(
        description="Local time HH:MM from which it is closed again, or 24:00 for midnight. "
        "Earlier than start: that time on the next day."
    )

    @field_validator("days")
    @classmethod
    def _days(cls, days: str) -> str:
        try:
            parse_days([days])
        except ValueError:
            raise ValueError(f"{WINDOW_DAYS_MESSAGE}; got {days!r}") from None
        return days

    @model_validator(mode="after")
    def _not_empty(self) -> Window:
        if self.start == self.end:
            raise ValueError(f"{WINDOW_LENGTH_MESSAGE}; got {self.start}-{self.end}")
        return self

    @property
    def weekdays(self) -> frozenset[int]:
        """The weekdays (Monday = 0) the window starts on."""
        return parse_days([self.days])

    @property
    def minutes(self) -> tuple[int, int]:
        """[start, end) minutes from the local midnight of the day it starts on; an end past
        1440 is on the next day."""
        opens, closes = parse_clock(self.start), parse_clock(self.end, allow_end_of_day=True)
        return (opens, closes if closes > opens else closes + MINUTES_PER_DAY)


class AbsoluteRange(_Model):
    """An absolute stretch of time: `start` (inclusive) to `end` (exclusive), instants written
    in RFC 3339 with their zone; either may be left out (from `start` on, until `end`)."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [
            {"rule": RANGE_FORM_RULE, "message": RANGE_FORM_MESSAGE},
            {"rule": RANGE_ORDER_RULE, "message": RANGE_ORDER_MESSAGE},
        ]}
    )

    start: InstantText | None = Field(
        default=None, description="First instant of the range, RFC 3339 with a zone, such as "
        "2026-12-24T00:00:00+01:00. Absent: since forever.")
    end: InstantText | None = Field(
        default=None, description="First instant after the range, RFC 3339 with a zone. Absent: "
        "for ever.")

    @model_validator(mode="after")
    def _ordered(self) -> AbsoluteRange:
        if self.start is None and self.end is None:
            raise ValueError(RANGE_FORM_MESSAGE)
        if self.start is not None and self.end is not None and \
                parse_instant(self.start) >= parse_instant(self.end):
            raise ValueError(f"{RANGE_ORDER_MESSAGE}; got {self.start} to {self.end}")
        return self

    @property
    def instants(self) -> tuple[dt.datetime | None, dt.datetime | None]:
        """(start, end) as aware datetimes; None where open-ended."""
        return (parse_instant(self.start) if self.start is not None else None,
                parse_instant(self.end) if self.end is not None else None)


class HolidayCalendar(_Model):
    """A country's (or one of its subdivisions') public holidays, from the `holidays` library
    the provider ships. The API server checks the codes' shape only; the provider checks them
    against the library and reports Ready=False/InvalidSpec naming the known ones."""

    country: str = Field(
        description="ISO 3166-1 code of the country, such as US, GB, DE (alpha-2 or alpha-3).",
        max_length=3, pattern=COUNTRY_PATTERN,
    )
    subdivision: str | None = Field(
        default=None,
        description="The library's code of a subdivision, such as ENG (GB), NY (US), BY (DE). "
        "Absent: the holidays of the whole country.",
        max_length=32, pattern=SUBDIVISION_PATTERN,
    )
    categories: tuple[Annotated[str, Field(max_length=32, pattern=CATEGORY_PATTERN)], ...] | None \
        = Field(
            default=None,
            description="The library's holiday categories to close on, such as public, bank, "
            "government. Absent: public.",
            min_length=1, max_length=MAX_CATEGORIES,
            json_schema_extra={"x-kubernetes-list-type": "set"},
        )

    @model_validator(mode="after")
    def _known_to_the_library(self) -> HolidayCalendar:
        from fivespot.api import holiday_calendars

        holiday_calendars.check(self.country, self.subdivision, self.category_names)
        return self

    @property
    def category_names(self) -> tuple[str, ...]:
        """`categories`, or the library's default (public), sorted."""
        from fivespot.api.holiday_calendars import DEFAULT_CATEGORIES

        return tuple(sorted(self.categories)) if self.categories else DEFAULT_CATEGORIES

    @property
    def label(self) -> str:
        """GB-ENG, US."""
        from fivespot.api.holiday_calendars import label

        return label(self.country, self.subdivision)


class Closures(_Model):
    """When the schedule is closed whatever its windows and open ranges say."""

    windows: tuple[Window, ...] | None = Field(
        default=None, description="Weekly windows during which it is closed (the downtime of "
        "a schedule written as uptime and downtime).", max_length=MAX_WINDOWS)
    holidays: tuple[HolidayCalendar, ...] | None = Field(
        default=None, description="Public-holiday calendars: closed for the whole local date "
        "(the schedule's timezone) of each of their holidays.",
        max_length=MAX_HOLIDAY_CALENDARS)
    dates: tuple[DateText, ...] | None = Field(
        default=None, description="Local dates on which it is closed all day, YYYY-MM-DD.",
        max_length=MAX_CALENDAR_DATES, json_schema_extra={"x-kubernetes-list-type": "set"})
    ranges: tuple[AbsoluteRange, ...] | None = Field(
        default=None, description="Absolute ranges during which it is closed.",
        max_length=MAX_RANGES)

    @field_validator("dates")
    @classmethod
    def _dates_once(cls, dates: tuple[str, ...] | None) -> tuple[str, ...] | None:
        _once(dates or ())
        return dates


class TimeBasedSpotScheduleSpec(_Model):
    """A weekly schedule. Open while the 5-Spot form says so (the local weekday is in
    `daysOfWeek` and the local hour in `hoursOfDay`, two independent sets: with mon-fri and 22-6
    Saturday 00:00-06:59 is closed even though Friday 22:00 opened a night), or a minute window
    of `windows` is open (a window belongs to the day it starts on: fri 22:00 to 06:00 runs into
    Saturday), or an absolute range of `openRanges` holds; and none of `closed` applies (closed
    windows, holidays and dates, closed ranges: closed wins)."""

    days_of_week: tuple[DayItem, ...] = Field(
        default=(),
        description=(
            "Days on which the window is open: mon..sun, ranges such as mon-fri or the "
            "wrapping fri-mon, comma lists such as mon-wed,fri. Empty means never."
        ),
        max_length=MAX_DAY_ITEMS,
    )
    hours_of_day: tuple[HourItem, ...] = Field(
        default=(),
        description=(
            "Local hours during which the window is open: 0-23, inclusive ranges such as 9-17 "
            "(09:00 through 17:59), the wrapping 22-6, comma lists such as 0-9,17-23. Empty "
            "means never."
        ),
        max_length=MAX_HOUR_ITEMS,
    )
    windows: tuple[Window, ...] | None = Field(
        default=None,
        description="Weekly windows with minute precision, each {days, start, end}: mon-fri "
        "09:30 to 17:00; an end earlier than the start runs into the next day.",
        max_length=MAX_WINDOWS,
    )
    open_ranges: tuple[AbsoluteRange, ...] | None = Field(
        default=None,
        description="Absolute ranges during which the schedule is open whatever the weekly "
        "forms say (unless closed): {start, end}, RFC 3339 with a zone.",
        max_length=MAX_RANGES,
    )
    closed: Closures | None = Field(
        default=None,
        description="When the schedule is closed whatever the rest says: weekly windows, "
        "public holidays by country and subdivision, local dates, absolute ranges.",
    )
    timezone: TimezoneText = _timezone_field("the days, hours, windows, holidays and dates")
    enabled: StrictBool = Field(
        default=True,
        description="The provider's own switch: when false the window is ignored and the "
        "schedule is inactive.",
    )
    override: Override | None = _override_field()

    @property
    def zone(self) -> ZoneInfo:
        """`timezone` as a ZoneInfo."""
        return load_timezone(self.timezone)


class TradingSession(_Model):
    """When the market is open on the days it trades: either minute precision
    (`days`, `open`, `close`) or the whole-hour 5-Spot form (`daysOfWeek`, `hoursOfDay`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": SESSION_FORM_RULE, "message": SESSION_FORM_MESSAGE},
                {"rule": SESSION_ORDER_RULE, "message": SESSION_ORDER_MESSAGE},
                {"rule": OVERNIGHT_FORM_RULE, "message": OVERNIGHT_FORM_MESSAGE},
            ]
        }
    )

    days: DayItem | None = Field(
        default=None,
        description="Days this session runs, in the daysOfWeek syntax, for example mon-fri.",
    )
    open: ClockText | None = Field(
        default=None,
        description="Local opening time HH:MM, for example 09:30; open from that minute.",
    )
    close: CloseClockText | None = Field(
        default=None,
        description="Local closing time HH:MM, for example 16:00, or 24:00 for the end of the "
        "day; closed from that minute.",
    )
    opens_previous_day: StrictBool | None = Field(
        default=None,
        description="When true the session of each of its days opens at `open` on the evening "
        "before and closes at `close` on the day itself (the futures trade-date convention: "
        "with days mon-fri, open 17:00, close 16:00, Monday's session runs Sunday 17:00 to "
        "Monday 16:00). Holidays, early closes, late opens and special sessions name that "
        "trading date.",
    )
    days_of_week: tuple[DayItem, ...] | None = Field(
        default=None,
        description="5-Spot form: days this session runs (e.g. [mon-fri]).",
        max_length=MAX_DAY_ITEMS,
    )
    hours_of_day: tuple[HourItem, ...] | None = Field(
        default=None,
        description="5-Spot form: hours this session is open, whole hours inclusive "
        "(e.g. [9-15] is 09:00 through 15:59).",
        max_length=MAX_HOUR_ITEMS,
    )

    @model_validator(mode="after")
    def _one_form(self) -> TradingSession:
        minute_form = (self.days, self.open, self.close)
        hour_form = (self.days_of_week, self.hours_of_day)
        complete_minutes = all(v is not None for v in minute_form)
        complete_hours = all(v is not None for v in hour_form)
        no_minutes = all(v is None for v in minute_form)
        no_hours = all(v is None for v in hour_form)
        if not ((complete_minutes and no_hours) or (complete_hours and no_minutes)):
            raise ValueError(SESSION_FORM_MESSAGE)
        if self.opens_previous_day is not None and self.open is None:
            raise ValueError(OVERNIGHT_FORM_MESSAGE)
        if self.open is not None and self.close is not None:
            _check_order(self.open, self.close, bool(self.opens_previous_day))
        return self

    @property
    def weekdays(self) -> frozenset[int]:
        """The weekdays (Monday = 0) this session runs."""
        return parse_days([self.days] if self.days is not None else self.days_of_week or ())

    @property
    def minutes(self) -> tuple[tuple[int, int], ...]:
        """The [start, end) minute ranges this session is open on one of its trading dates,
        counted from that date's local midnight: a session that opens the day before starts at
        a negative minute (17:00 the evening before is -420)."""
        if self.open is not None and self.close is not None:
            return (session_minutes(self.open, self.close, bool(self.opens_previous_day)),)
        return hour_ranges(parse_hours(self.hours_of_day or ()))


def _check_order(open_: str, close: str, opens_previous_day: bool) -> None:
    opens, closes = parse_clock(open_), parse_clock(close, allow_end_of_day=True)
    if (closes > opens) if opens_previous_day else (opens >= closes):
        raise ValueError(f"{SESSION_ORDER_MESSAGE}; got {open_}-{close}"
                         + (" opening the previous day" if opens_previous_day else ""))


def session_minutes(open_: str, close: str, opens_previous_day: bool) -> tuple[int, int]:
    """A minute-form session as [start, end) minutes from its trading date's local midnight."""
    opens, closes = parse_clock(open_), parse_clock(close, allow_end_of_day=True)
    return (opens - MINUTES_PER_DAY if opens_previous_day else opens, closes)


class SessionTimes(_Model):
    """One session of a special date: `open` to `close`, local, optionally from the evening
    before (`opensPreviousDay`)."""

    model_config = ConfigDict(
        json_schema_extra=_rule(SESSION_ORDER_RULE, SESSION_ORDER_MESSAGE)
    )

    open: ClockText = Field(description="Local opening time HH:MM; open from that minute.")
    close: CloseClockText = Field(
        description="Local closing time HH:MM on the date itself, or 24:00; closed from that "
        "minute."
    )
    opens_previous_day: StrictBool | None = Field(
        default=None,
        description="When true the session opens at `open` on the day before the date.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> SessionTimes:
        _check_order(self.open, self.close, bool(self.opens_previous_day))
        return self

    @property
    def minutes(self) -> tuple[int, int]:
        """[start, end) minutes from the date's local midnight (negative: the evening before)."""
        return session_minutes(self.open, self.close, bool(self.opens_previous_day))


class SpecialSessions(_Model):
    """A date that trades its own sessions instead of the regular ones: a longer day, a session
    on a weekday the market normally does not trade, a different overnight open."""

    date: DateText = Field(description="Local trading date, YYYY-MM-DD.")
    sessions: tuple[SessionTimes, ...] = Field(
        description="The date's sessions, replacing the regular ones that day.",
        min_length=1,
        max_length=MAX_SESSIONS_PER_DATE,
    )


class EarlyClose(_Model):
    """A day the market closes before its sessions' normal end."""

    date: DateText = Field(description="Local calendar date, YYYY-MM-DD.")
    close: CloseClockText | None = Field(
        default=None,
        description="Local time HH:MM from which the market is closed that day, e.g. 13:00.",
    )
    close_hour: StrictInt | None = Field(
        default=None,
        description="5-Spot form: the last open hour that day (13 = open through 13:59).",
        ge=0,
        le=23,
    )

    model_config = ConfigDict(
        json_schema_extra=_rule(EARLY_CLOSE_FORM_RULE, EARLY_CLOSE_FORM_MESSAGE)
    )

    @model_validator(mode="after")
    def _one_form(self) -> EarlyClose:
        if (self.close is None) == (self.close_hour is None):
            raise ValueError(EARLY_CLOSE_FORM_MESSAGE)
        return self

    @property
    def close_minute(self) -> int:
        """Minutes after local midnight from which the market is closed that day."""
        if self.close is not None:
            return parse_clock(self.close, allow_end_of_day=True)
        assert self.close_hour is not None  # guaranteed by _one_form
        return (self.close_hour + 1) * 60


class LateOpen(_Model):
    """A day the market opens after its sessions' normal start."""

    date: DateText = Field(description="Local calendar date, YYYY-MM-DD.")
    open: ClockText = Field(description="Local time HH:MM from which the market may open.")

    @property
    def open_minute(self) -> int:
        """Minutes after local midnight before which the market is closed that day."""
        return parse_clock(self.open)


def _once(dates: Iterable[str]) -> None:
    seen: set[str] = set()
    for date in dates:
        if date in seen:
            raise ValueError(f"{date} is listed twice; keep one entry per date")
        seen.add(date)


class CapitalMarketsScheduleSpec(_Model):
    """An exchange calendar: active while the market is in session. Every session belongs to a
    trading date: the date it closes on, which for a session with opensPreviousDay is the day
    after it opens (futures' trade date). A holiday cancels that date's sessions; a special
    date trades its own sessions instead of the regular ones; otherwise the date trades every
    session running on its weekday. A late open then holds the date's sessions until its time
    on that date, and an early close ends them at its time. Sessions that touch merge, so
    00:00 after a 24:00 close, or a 17:00 open right after a 17:00 close, is not a transition."""

    timezone: TimezoneText = _timezone_field("sessions, holidays, early closes and late opens")
    sessions: tuple[TradingSession, ...] = Field(
        default=(),
        description="When the market trades. Empty means it never does.",
        max_length=MAX_SESSIONS,
    )
    holidays: tuple[DateText, ...] = Field(
        default=(),
        description="Local dates on which the market is closed all day, YYYY-MM-DD.",
        max_length=MAX_CALENDAR_DATES,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    early_closes: tuple[EarlyClose, ...] = Field(
        default=(),
        description="Dates on which the market closes early, one entry per date.",
        max_length=MAX_CALENDAR_DATES,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["date"],
        },
    )
    late_opens: tuple[LateOpen, ...] = Field(
        default=(),
        description="Dates on which the market opens late, one entry per date.",
        max_length=MAX_CALENDAR_DATES,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["date"],
        },
    )
    special_sessions: tuple[SpecialSessions, ...] = Field(
        default=(),
        description="Dates that trade their own sessions instead of the regular ones (a longer "
        "day, a session on a non-trading weekday), one entry per date. A holiday on the same "
        "date still closes it; an early close or late open still cuts it.",
        max_length=MAX_CALENDAR_DATES,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["date"],
        },
    )
    override: Override | None = _override_field()

    @field_validator("holidays")
    @classmethod
    def _holidays_once(cls, holidays: tuple[str, ...]) -> tuple[str, ...]:
        _once(holidays)
        return holidays

    @field_validator("early_closes", "late_opens", "special_sessions")
    @classmethod
    def _one_entry_per_date(
        cls, entries: tuple[EarlyClose, ...] | tuple[LateOpen, ...] | tuple[SpecialSessions, ...]
    ) -> tuple[EarlyClose, ...] | tuple[LateOpen, ...] | tuple[SpecialSessions, ...]:
        _once(entry.date for entry in entries)
        return entries

    @property
    def zone(self) -> ZoneInfo:
        """`timezone` as a ZoneInfo."""
        return load_timezone(self.timezone)


def hour_ranges(hours: frozenset[int]) -> tuple[tuple[int, int], ...]:
    """A set of whole hours as sorted, disjoint local [start, end) minute ranges."""
    ranges: list[tuple[int, int]] = []
    for hour in sorted(hours):
        start, end = hour * 60, hour * 60 + 60
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], end)
        else:
            ranges.append((start, end))
    return tuple(ranges)


# --- status --------------------------------------------------------------------------------------


class Condition(_Model):
    """One observation, shaped like metav1.Condition."""

    type: str = Field(
        description="Condition type, for example Ready.",
        max_length=316,
        pattern=CONDITION_TYPE_PATTERN,
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(
        description="A CamelCase reason a person can look up and act on.",
        max_length=1024,
        pattern=CONDITION_REASON_PATTERN,
    )
    message: str = Field(description="What happened and what to do about it.", max_length=32768)
    last_transition_time: str = Field(
        description="When status last changed (not reason or message), RFC 3339.",
        max_length=64,
        json_schema_extra={"format": "date-time"},
    )


class ProviderStatus(_Model):
    """The provider contract's status: consumers read `active`, the Ready condition,
    `observedGeneration` and `lastTransitionTime`, and never the spec."""

    active: StrictBool = Field(
        description="Whether the schedule is active now. The contract field."
    )
    observed_generation: StrictInt = Field(
        description="The metadata.generation this status was computed from.", ge=0
    )
    last_transition_time: str = Field(
        description="When active last flipped (first publish counts), RFC 3339.",
        max_length=64,
        json_schema_extra={"format": "date-time"},
    )
    next_transition_time: str | None = Field(
        default=None,
        description="When active will next flip, RFC 3339 UTC; absent if it never will within "
        "the next year, or while the spec is invalid.",
        max_length=64,
        json_schema_extra={"format": "date-time"},
    )
    override_until: str | None = Field(
        default=None,
        description="While spec.override is in force: when it ends, RFC 3339 UTC (active is "
        "the override's value until then, and the Ready reason is Overridden); absent otherwise.",
        max_length=64,
        json_schema_extra={"format": "date-time"},
    )
    conditions: tuple[Condition, ...] = Field(
        default=(),
        description="Ready: True while active is computed from a valid spec; False with the "
        "reason when it is not, in which case consumers hold their last known state.",
        max_length=MAX_CONDITIONS,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, if present."""
        return next((c for c in self.conditions if c.type == type_), None)


ManualScheduleStatus = ProviderStatus
TimeBasedSpotScheduleStatus = ProviderStatus
CapitalMarketsScheduleStatus = ProviderStatus


# --- the contract a custom provider kind is held to ----------------------------------------------


class _Lenient(PreservingModel):
    """A provider fivespot does not write: fields it does not model are kept, never refused."""


class ContractCondition(_Lenient):
    """A condition as the provider guide's example CRD declares one: every field a string, none
    required (consumers look only for `type: Ready` and its `status`)."""

    type: str | None = Field(default=None, description="Condition type, for example Ready.")
    status: str | None = Field(default=None, description="True, False or Unknown.")
    reason: str | None = Field(default=None, description="Why, in CamelCase.")
    message: str | None = Field(default=None, description="What happened.")
    last_transition_time: str | None = Field(
        default=None, description="When status last changed, RFC 3339.")


class ContractStatus(_Lenient):
    """What a provider publishes, as the provider contract states it: `active` (a boolean) is the
    only field required; observedGeneration, lastTransitionTime, conditions (a Ready condition is
    recommended) and anything else the provider publishes are optional and kept."""

    active: StrictBool = Field(description="Whether the schedule is active now. The contract field.")
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this status was computed from.")
    last_transition_time: str | None = Field(
        default=None, description="When active last flipped, RFC 3339.")
    conditions: tuple[ContractCondition, ...] | None = Field(
        default=None,
        description="Optional; a Ready condition other than True makes consumers hold their "
        "last known state.",
    )
