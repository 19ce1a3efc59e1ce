"""`fivespot import`: what kube-green, kube-downscaler and KEDA's cron scaler were told to do, as
fivespot config and tenant objects that do the same, and a report of what cannot be carried over.

A team moving across should not have to re-type its schedules, and should learn, before anything
changes, which of its peer's behaviours fivespot does not have. So the translation is a pure
function of the objects read (SleepInfos, ScaledObjects, Namespaces and workloads with
`downscaler/*` annotations, from files or a cluster): each schedule becomes a
`TimeBasedSpotSchedule` (minute windows, open ranges, closures; decision 0027) that is open
exactly when the peer keeps the workload up, each workload the peer scales becomes a
`ScheduledCapacity` writing the replicas it has now (0 when the schedule is closed), and the
config gets the consumers and one TenantPolicy per namespace that admit them. Whatever the
peer's object says that fivespot cannot say (CronJob suspension, replicas other than 0 at rest,
one-way periods, KEDA's cool-down...) is a `Note` naming the file, line and field, never a
silent approximation; a workload whose behaviour would change is left out and said so.

The peers' rules are read from their documentation (decision 0032): kube-green and KEDA act on
cron firings (the state is the last firing's: awake after a `wakeUpAt`/`start`, asleep after a
`sleepAt`/`end`), the downscalers evaluate timespans at an instant, the most specific scope
(workload, then namespace) giving each value group. `docs/reference/schedules-from-other-tools.md`
is the table of forms this translation reproduces.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn
from zoneinfo import ZoneInfo

from fivespot.compiler.diagnostics import Diagnostic, InputError, Location, cut
from fivespot.compiler.check.objectyaml import Document

MINUTES_PER_DAY: Final = 24 * 60
WEEK: Final = 7 * MINUTES_PER_DAY
DAYS: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
GATED: Final = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
"""The workload kinds imported (apps/v1), each with the consumer that admits it."""
SLEEPINFO: Final = ("kube-green.com", "SleepInfo")
SCALEDOBJECT: Final = ("keda.sh", "ScaledObject")
PREFIX: Final = "downscaler/"
SCHEDULE_GROUP: Final = ("uptime", "downtime", "upscale-period", "downscale-period")
FORCE_GROUP: Final = ("force-uptime", "force-downtime")
REPLICAS_KEYS: Final = ("downscale-replicas", "downtime-replicas")
"""GoKubeDownscaler's name, then py-kube-downscaler's, for the replicas at rest."""
TBSS: Final = ("spotschedules.5spot.finos.org/v1alpha1", "TimeBasedSpotSchedule")
_INSTANT: Final = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|z|[+-]\d{2}:\d{2})"
_ABSOLUTE: Final = re.compile(rf"^({_INSTANT})\s*-\s*({_INSTANT})$")
_RELATIVE: Final = re.compile(
    r"^(?:([A-Za-z]{3})-([A-Za-z]{3})\s+)?(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})(?:\s+(\S+))?$")
_CLOCK: Final = re.compile(r"^([0-9*,/-]+):([0-9*,/-]+)$")
_DOW_NAMES: Final = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


# --- what comes out ------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Note:
    """One thing the peer's objects say that the imported objects do not do, and why."""

    where: Location
    field: str
    message: str

    def __str__(self) -> str:
        return str(Diagnostic(self.where, self.field, self.message))


@dataclass(frozen=True)
class Schedule:
    """A TimeBasedSpotSchedule to write: its namespace, name, spec and the peer object it
    comes from."""

    namespace: str
    name: str
    spec: Mapping[str, Any]
    source: str


@dataclass(frozen=True)
class Capacity:
    """A ScheduledCapacity to write: `kind`/`target` at `value` while `schedule` is open."""

    namespace: str
    kind: str
    target: str
    value: int
    schedule: str
    source: str


@dataclass
class Imported:
    """Everything an import produced, in a deterministic order once `finish`ed."""

    schedules: list[Schedule] = field(default_factory=list)
    capacities: list[Capacity] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def finish(self) -> Imported:
        self.schedules.sort(key=lambda s: (s.namespace, s.name))
        self.capacities.sort(key=lambda c: (c.namespace, c.target, c.kind))
        self.notes = sorted(set(self.notes))
        return self


@dataclass(frozen=True)
class Workload:
    """A Deployment or StatefulSet the peers may scale, as read."""

    document: Document
    namespace: str
    kind: str
    name: str

    @property
    def data(self) -> Mapping[str, Any]:
        return self.document.data  # type: ignore[no-any-return]

    @property
    def labels(self) -> Mapping[str, str]:
        return _mapping(self.data.get("metadata"), "labels")

    @property
    def annotations(self) -> Mapping[str, str]:
        return _mapping(self.data.get("metadata"), "annotations")

    @property
    def owned(self) -> bool:
        """Whether a controller owns it: both peers leave such workloads alone."""
        owners = (self.data.get("metadata") or {}).get("ownerReferences") or []
        return any(isinstance(o, Mapping) and o.get("controller") is True for o in owners)

    @property
    def replicas(self) -> int | None:
        value = (self.data.get("spec") or {}).get("replicas", 1)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.kind, self.name)


def _mapping(parent: Any, key: str) -> Mapping[str, str]:
    found = parent.get(key) if isinstance(parent, Mapping) else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


class _Errors:
    """Bad peer input: every problem found, raised together as an InputError."""

    def __init__(self) -> None:
        self.found: list[Diagnostic] = []

    def add(self, document: Document, path: Sequence[str], message: str) -> None:
        self.found.append(Diagnostic(document.locate(*path), ".".join(path), message))

    def raise_any(self) -> None:
        if self.found:
            raise InputError(sorted(set(self.found)))


# --- cron --------------------------------------------------------------------------------------


def cron_field(text: str, low: int, high: int, names: Mapping[str, int] | None = None) -> set[int]:
    """The values a cron field (`*`, `a`, `a-b`, `*/n`, `a-b/n`, `a/n`, comma lists, and names
    such as `mon` where `names` gives them) matches; ValueError on anything else."""
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = _number(step_text, 1, high - low + 1) if step_text else 1
        if body == "*":
            first, last = low, high
        elif "-" in body:
            first_text, last_text = body.split("-", 1)
            first, last = _value(first_text, low, high, names), _value(last_text, low, high, names)
            if first > last:
                raise ValueError(f"the range {body!r} runs backwards")
        else:
            first = _value(body, low, high, names)
            last = high if step_text else first
        values.update(range(first, last + 1, step))
    return values


def _value(text: str, low: int, high: int, names: Mapping[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _number(text, low, high)


def _number(text: str, low: int, high: int) -> int:
    if not text.isdigit() or not low <= int(text) <= high:
        raise ValueError(f"{text!r} is not a number from {low} to {high}")
    return int(text)


def weekdays(text: str) -> set[int]:
    """A cron day-of-week field as Python weekdays (Monday 0; cron's 0 and 7 are Sunday)."""
    return {(day + 6) % 7 for day in cron_field(text, 0, 7, _DOW_NAMES)}


def firings(minute: str, hour: str, days: set[int]) -> set[int]:
    """Minutes of the week (Monday 00:00 is 0) at which a cron `minute hour * * days` fires."""
    minutes, hours = cron_field(minute, 0, 59), cron_field(hour, 0, 23)
    return {day * MINUTES_PER_DAY + h * 60 + m for day in days for h in hours for m in minutes}


def open_intervals(opens: set[int], closes: set[int]) -> list[tuple[int, int]]:
    """The weekly intervals [start, end) (minutes of the week; an end below its start wraps
    into the next week) during which the last firing was an open: a firing pair's window, as
    kube-green's sleep/wake and KEDA's start/end are. No closes with some opens: the whole week.
    ValueError when an open and a close fire at the same minute (the peer's order is not
    documented)."""
    if both := opens & closes:
        raise ValueError(f"an opening and a closing fire at the same minute ({_clock(min(both))})")
    if not opens:
        return []
    if not closes:
        return [(0, WEEK)]
    events = sorted([(m, True) for m in opens] + [(m, False) for m in closes])
    intervals: list[tuple[int, int]] = []
    for i, (minute, is_open) in enumerate(events):
        before = events[i - 1][1]
        if is_open and not before:
            following = next(m for j in range(1, len(events) + 1)
                             for m, o in [events[(i + j) % len(events)]] if not o)
            intervals.append((minute, following))
    return intervals


def _clock(minute_of_week: int) -> str:
    day, minute = divmod(minute_of_week, MINUTES_PER_DAY)
    return f"{DAYS[day % 7]} {minute // 60:02d}:{minute % 60:02d}"


def _hhmm(minute: int) -> str:
    return "24:00" if minute == MINUTES_PER_DAY else f"{minute // 60:02d}:{minute % 60:02d}"


def windows_of(intervals: Iterable[tuple[int, int]]) -> list[dict[str, str]]:
    """fivespot windows for weekly intervals: one window for an interval shorter than a day (it
    may run past midnight, belonging to the day it starts on), else a piece per day; windows of
    the same times are joined into one `days` list."""
    pieces: list[tuple[int, int, int]] = []  # (day, start, end minute of that day; may pass 1440)
    for start, end in intervals:
        length = (end - start) % WEEK or WEEK
        if length < MINUTES_PER_DAY:
            day, minute = divmod(start % WEEK, MINUTES_PER_DAY)
            pieces.append((day, minute, minute + length))
            continue
        at = start
        while length > 0:
            day, minute = divmod(at % WEEK, MINUTES_PER_DAY)
            span = min(length, MINUTES_PER_DAY - minute)
            pieces.append((day, minute, minute + span))
            at, length = at + span, length - span
    grouped: dict[tuple[int, int], set[int]] = {}
    for day, start, end in pieces:
        grouped.setdefault((start, end), set()).add(day)
    windows = sorted(((min(days), start, end, days) for (start, end), days in grouped.items()))
    return [{"days": days_text(days), "start": _hhmm(start),
             "end": _hhmm(end) if end <= MINUTES_PER_DAY else _hhmm(end - MINUTES_PER_DAY)}
            for _, start, end, days in windows]


def days_text(days: Iterable[int]) -> str:
    """Weekdays (Monday 0) as fivespot writes them: `mon-sun`, `mon-fri`, `sat-mon`, `mon,wed`."""
    chosen = sorted(set(days))
    if len(chosen) == 7:
        return "mon-sun"
    first = next(d for d in chosen if (d - 1) % 7 not in chosen)  # a run's start
    runs: list[list[int]] = []
    for offset in range(7):
        day = (first + offset) % 7
        if day not in chosen:
            continue
        if runs and (runs[-1][-1] + 1) % 7 == day:
            runs[-1].append(day)
        else:
            runs.append([day])
    return ",".join(DAYS[r[0]] if len(r) == 1 else f"{DAYS[r[0]]}-{DAYS[r[-1]]}" for r in runs)


# --- downscaler timespans ------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """One timespan: relative (weekly, in `zone`), absolute (`start`/`end`, either may be
    missing for `from`/`until`), or boolean (`always`)."""

    windows: tuple[tuple[frozenset[int], int, int], ...] = ()
    zone: str | None = None
    start: str | None = None
    end: str | None = None
    always: bool | None = None


def parse_timespans(text: str) -> list[Span]:
    """A downscaler timespan list (comma-joined); ValueError naming the span that is wrong."""
    return [parse_timespan(part) for part in text.split(",")]


def parse_timespan(text: str) -> Span:
    text = text.strip()
    if text.lower() in ("always", "true"):
        return Span(always=True)
    if text.lower() in ("never", "false"):
        return Span(always=False)
    for prefix, key in (("from ", "start"), ("until ", "end")):
        if text.lower().startswith(prefix):
            instant = text[len(prefix):].strip()
            _instant(instant)
            return Span(start=instant) if key == "start" else Span(end=instant)
    found = _ABSOLUTE.fullmatch(text)
    if found:
        start, end = found.groups()
        if _instant(start) >= _instant(end):
            raise ValueError(f"{cut(text)!r}: the range ends before it starts")
        return Span(start=start, end=end)
    if re.match(r"^\d{4}-", text):
        raise ValueError(f"{cut(text)!r} is not an absolute timespan of two RFC 3339 timestamps "
                         "(YYYY-MM-DDTHH:MM:SS with Z or an offset, two-digit months and days)")
    relative = _RELATIVE.fullmatch(text)
    if relative is None:
        raise ValueError(f"{cut(text)!r} is not a timespan (relative `Mon-Fri 08:00-20:00 "
                         "Europe/Berlin`, absolute `START - END` in RFC 3339, `from`/`until`, or "
                         "always/never)")
    first, last, h1, m1, h2, m2, zone = relative.groups()
    begin, finish = _minute_of_day(h1, m1, text), _minute_of_day(h2, m2, text)
    if zone is not None:
        _zone(zone)
    if first is None or zone is None:
        _needs_defaults(text)
    days = frozenset(_day_range(first, last, text))
    if begin < finish:
        parts = [(days, begin, finish)]
    elif begin > finish:  # reversed: from midnight to `finish` and from `begin` to midnight
        parts = ([(days, 0, finish)] if finish else []) + [(days, begin, MINUTES_PER_DAY)]
    else:
        parts = []
    return Span(windows=tuple(parts), zone=zone)


class NeedsDefaults(ValueError):
    """A relative timespan without its week frame or zone: the downscaler takes them from its
    DEFAULT_WEEKFRAME/DEFAULT_TIMEZONE, which no object says."""


def _needs_defaults(text: str) -> NoReturn:
    raise NeedsDefaults(f"{cut(text)!r} leaves out its days or its time zone, which the "
                        "downscaler takes from its DEFAULT_WEEKFRAME/DEFAULT_TIMEZONE environment; "
                        "no object says them")


def _minute_of_day(hours: str, minutes: str, text: str) -> int:
    value = int(hours) * 60 + int(minutes)
    if int(minutes) > 59 or value > MINUTES_PER_DAY:
        raise ValueError(f"{cut(text)!r}: {hours}:{minutes} is not a time of day from 00:00 to 24:00")
    return value


def _day_range(first: str, last: str, text: str) -> set[int]:
    try:
        start, stop = DAYS.index(first.lower()), DAYS.index(last.lower())
    except ValueError:
        raise ValueError(f"{cut(text)!r}: weekdays are Mon, Tue, Wed, Thu, Fri, Sat, Sun") from None
    return {(start + step) % 7 for step in range((stop - start) % 7 + 1)}


def _instant(text: str) -> dt.datetime:
    if not re.fullmatch(_INSTANT, text):
        raise ValueError(f"{cut(text)!r} is not an RFC 3339 timestamp (YYYY-MM-DDTHH:MM:SS with Z "
                         "or an offset)")
    return dt.datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))


def _zone(name: str) -> ZoneInfo:
    from fivespot.api.kinds.providers import load_timezone

    try:
        return load_timezone(name)
    except Exception:
        raise ValueError(f"{cut(name)!r} is not an IANA time zone") from None


class NotCarried(Exception):
    """What a peer's form says that a TimeBasedSpotSchedule cannot: the message says what and
    why, for the report."""


def span_parts(spans: Sequence[Span]) -> tuple[str | None, list[dict[str, str]], list[dict[str, str]], bool]:
    """(zone, windows, ranges, always) of a timespan list: its relative spans as windows (one
    zone for all, or NotCarried), its absolute ones as ranges."""
    zones = sorted({s.zone for s in spans if s.windows and s.zone is not None})
    if len(zones) > 1:
        raise NotCarried(f"its relative timespans are in {len(zones)} time zones ({', '.join(zones)}); "
                         "a TimeBasedSpotSchedule has one")
    pieces = [(min(days), start, end, days) for s in spans for days, start, end in s.windows]
    grouped: dict[tuple[int, int], set[int]] = {}
    for _, start, end, days in pieces:
        grouped.setdefault((start, end), set()).update(days)
    windows = [{"days": days_text(days), "start": _hhmm(start), "end": _hhmm(end)}
               for (start, end), days in sorted(grouped.items(), key=lambda i: (min(i[1]), i[0]))]
    ranges = [{k: v for k, v in (("start", s.start), ("end", s.end)) if v is not None}
              for s in spans if s.start is not None or s.end is not None]
    return (zones[0] if zones else None, windows, ranges, any(s.always for s in spans))


ALL_WEEK: Final = {"days": "mon-sun", "start": "00:00", "end": "24:00"}


def downscaler_spec(values: Mapping[str, str]) -> dict[str, Any] | None:
    """The TimeBasedSpotSchedule spec open when the downscaler keeps the workload up, from its
    resolved values (`uptime` or `downtime`, `force-downtime`, `force-uptime`, `exclude-until`),
    or None when it always is (nothing to schedule). ValueError on a timespan the downscaler
    would refuse; NotCarried on one fivespot cannot say."""
    for one_way in ("upscale-period", "downscale-period"):
        if one_way in values:
            raise NotCarried(f"`{one_way}` scales one way only and leaves the workload alone "
                             "outside it; a fivespot schedule decides at every instant")
    uptime = parse_timespans(values["uptime"]) if "uptime" in values else None
    downtime = parse_timespans(values["downtime"]) if "downtime" in values else None
    if uptime is not None and downtime is not None:
        raise NotCarried("`uptime` and `downtime` are set in one scope, which the downscaler "
                         "refuses as incompatible")
    force_down = parse_timespans(values["force-downtime"]) if "force-downtime" in values else []
    force_up = parse_timespans(values["force-uptime"]) if "force-uptime" in values else []
    spec: dict[str, Any] = {}
    closed_windows: list[dict[str, str]] = []
    closed_ranges: list[dict[str, str]] = []
    zones: set[str] = set()
    if uptime is not None:
        zone, windows, ranges, always = span_parts(uptime)
        if always:
            windows = [dict(ALL_WEEK)]
        spec["windows"], spec["openRanges"] = windows, ranges
        zones |= {zone} if zone else set()
    elif downtime is not None:
        zone, windows, ranges, always = span_parts(downtime)
        spec["windows"] = [] if always else [dict(ALL_WEEK)]
        closed_windows, closed_ranges = windows, ranges
        zones |= {zone} if zone else set()
    else:
        spec["windows"] = [dict(ALL_WEEK)]
    if force_down:
        zone, windows, ranges, always = span_parts(force_down)
        if always:
            spec["windows"], spec["openRanges"] = [], []
        closed_windows, closed_ranges = closed_windows + windows, closed_ranges + ranges
        zones |= {zone} if zone else set()
    if force_up:
        zone, windows, ranges, always = span_parts(force_up)
        if always:
            return None
        if windows or ranges:
            if closed_windows or closed_ranges:
                raise NotCarried("`force-uptime` beats a downtime, and a TimeBasedSpotSchedule's "
                                 "closures always win: the two cannot be said in one schedule")
            spec["windows"] = spec.get("windows", []) + windows
            spec["openRanges"] = spec.get("openRanges", []) + ranges
            zones |= {zone} if zone else set()
    if "exclude-until" in values:
        until = values["exclude-until"].strip()
        _instant(until)
        if closed_windows or closed_ranges:
            raise NotCarried("`exclude-until` leaves the workload alone until then, and a "
                             "TimeBasedSpotSchedule's closures always win")
        spec["openRanges"] = spec.get("openRanges", []) + [{"end": until}]
    if len(zones) > 1:
        raise NotCarried(f"its timespans are in {len(zones)} time zones ({', '.join(sorted(zones))}); "
                         "a TimeBasedSpotSchedule has one")
    if closed_windows or closed_ranges:
        spec["closed"] = {k: v for k, v in (("windows", closed_windows), ("ranges", closed_ranges)) if v}
    if zones:
        spec["timezone"] = zones.pop()
    if spec.get("windows") == [ALL_WEEK] and "closed" not in spec:
        return None
    return {k: v for k, v in spec.items() if v != []}


# --- the three peers -----------------------------------------------------------------------------


@dataclass
class _Context:
    workloads: list[Workload]
    namespaces: dict[str, Document]
    downscaler_kinds: frozenset[str]
    errors: _Errors
    out: Imported
    claims: dict[tuple[str, str, str], list[tuple[Capacity, Location]]] = field(default_factory=dict)

    def in_namespace(self, namespace: str) -> list[Workload]:
        return [w for w in self.workloads if w.namespace == namespace]

    def note(self, document: Document, path: Sequence[str], message: str) -> None:
        self.out.notes.append(Note(document.locate(*path), ".".join(path), message))

    def claim(self, workload: Workload, schedule: str, source: str, where: Location,
              value: int | None = None) -> None:
        replicas = value if value is not None else workload.replicas
        if workload.owned:
            self.out.notes.append(Note(workload.document.start, "metadata.ownerReferences",
                                       f"{workload.kind} {workload.namespace}/{workload.name} is owned "
                                       f"by a controller, which {source.split(' ')[0]} leaves alone; "
                                       "not imported"))
            return
        if replicas is None or replicas < 1:
            self.out.notes.append(Note(workload.document.start, "spec.replicas",
                                       f"{workload.kind} {workload.namespace}/{workload.name} has "
                                       f"{replicas!r} replicas now, so the value to wake it to is not "
                                       f"known ({source} keeps it elsewhere); not imported: write its "
                                       "ScheduledCapacity's activeValue by hand"))
            return
        capacity = Capacity(workload.namespace, workload.kind, workload.name, replicas, schedule, source)
        self.claims.setdefault(workload.key, []).append((capacity, where))


def _sleepinfo(document: Document, context: _Context, namespace: str) -> None:
    data, errors = document.data, context.errors
    name = str((data.get("metadata") or {}).get("name", ""))
    spec = data.get("spec")
    if not isinstance(spec, Mapping):
        errors.add(document, ("spec",), "a SleepInfo needs a spec")
        return
    source = f"kube-green SleepInfo {namespace}/{name}"
    problems = len(errors.found)
    zone = spec.get("timeZone") or "UTC"
    try:
        _zone(str(zone))
    except ValueError as error:
        errors.add(document, ("spec", "timeZone"), str(error))
    try:
        days = weekdays(_text(spec, "weekdays"))
    except (ValueError, KeyError) as error:
        errors.add(document, ("spec", "weekdays"), _why(error, "weekdays in cron notation, such as 1-5"))
        days = set()
    times: dict[str, set[int]] = {}
    for key in ("sleepAt", "wakeUpAt"):
        if key == "wakeUpAt" and key not in spec:
            continue
        try:
            clock = _CLOCK.fullmatch(_text(spec, key))
            if clock is None:
                raise ValueError(f"{spec.get(key)!r} is not HH:MM (cron hour and minute fields)")
            times[key] = firings(clock.group(2), clock.group(1), days)
        except (ValueError, KeyError) as error:
            errors.add(document, ("spec", key), _why(error, "HH:MM"))
    if len(errors.found) > problems:
        return
    schedule = f"kube-green-{name}"[:253]
    if "wakeUpAt" not in times:
        context.note(document, ("spec", "wakeUpAt"),
                     "no wakeUpAt: kube-green sleeps at sleepAt and never wakes (a person "
                     "redeploys); fivespot is level-triggered, so the imported schedule is never "
                     "open and the workloads sleep as soon as it is applied, not at sleepAt: wake "
                     f"them with `fivespot schedule override timebasedspotschedule/{schedule} --on "
                     f"--until {spec['sleepAt']}` ({source})")
        intervals: list[tuple[int, int]] = []
    else:
        try:
            intervals = open_intervals(times["wakeUpAt"], times["sleepAt"])
        except ValueError as error:
            context.note(document, ("spec", "sleepAt"), f"not imported: {error}")
            return
    tbss: dict[str, Any] = {"timezone": str(zone)}
    if intervals:
        tbss["windows"] = windows_of(intervals)
    if not _valid(tbss, document, ("spec",), context, source):
        return
    context.out.schedules.append(Schedule(namespace, schedule, tbss, _where(document)))
    _kube_green_notes(document, spec, context, source)
    kinds = {kind for kind, flag in (("Deployment", "suspendDeployments"),
                                     ("StatefulSet", "suspendStatefulSets"))
             if spec.get(flag) is not False}
    targets = [w for w in context.in_namespace(namespace) if w.kind in kinds]
    include, exclude = spec.get("includeRef") or [], spec.get("excludeRef") or []
    if include:
        targets = [w for w in targets if any(_matches(ref, w) for ref in include)]
    targets = [w for w in targets if not any(_matches(ref, w) for ref in exclude)]
    if not context.in_namespace(namespace):
        context.note(document, ("metadata", "namespace"),
                     f"no Deployment or StatefulSet of namespace {namespace} was read, and "
                     f"{source} sleeps every one there: give their manifests too, or import "
                     "from the cluster")
    for workload in targets:
        context.claim(workload, schedule, source, document.start)


def _kube_green_notes(document: Document, spec: Mapping[str, Any], context: _Context, source: str) -> None:
    if spec.get("suspendCronJobs") is True:
        context.note(document, ("spec", "suspendCronJobs"),
                     f"CronJobs are not suspended: fivespot gates integer fields, not "
                     f"spec.suspend ({source})")
    for i, patch in enumerate(spec.get("patches") or []):
        if not _replicas_to_zero(patch):
            target = patch.get("target") or {} if isinstance(patch, Mapping) else {}
            context.note(document, ("spec", "patches"),
                         f"patch {i} on {target.get('kind', '?')}.{target.get('group', '')} is not "
                         "carried over: fivespot writes one integer field, to 0 at rest; only "
                         f"`replace /spec/replicas 0` on Deployments and StatefulSets is ({source})")
    context.note(document, ("spec", "sleepAt"),
                 f"kube-green skips a sleep or wake it runs more than --sleep-delta (60 s) late; "
                 f"fivespot acts on a missed boundary when it is back (level-triggered) ({source})")


def _replicas_to_zero(patch: Any) -> bool:
    import yaml

    if not isinstance(patch, Mapping):
        return False
    target = patch.get("target") or {}
    if target.get("group") != "apps" or target.get("kind") not in GATED:
        return False
    try:
        operations = yaml.safe_load(str(patch.get("patch", "")))
    except yaml.YAMLError:
        return False
    return bool(operations == [{"op": "replace", "path": "/spec/replicas", "value": 0}])


def _matches(ref: Any, workload: Workload) -> bool:
    if not isinstance(ref, Mapping):
        return False
    labels = ref.get("matchLabels")
    if isinstance(labels, Mapping) and labels:
        return all(workload.labels.get(str(k)) == str(v) for k, v in labels.items())
    return ref.get("kind") == workload.kind and ref.get("name") == workload.name


def _scaledobject(document: Document, context: _Context, namespace: str) -> None:
    data, errors = document.data, context.errors
    name = str((data.get("metadata") or {}).get("name", ""))
    source = f"KEDA ScaledObject {namespace}/{name}"
    spec = data.get("spec") if isinstance(data.get("spec"), Mapping) else {}
    ref = spec.get("scaleTargetRef") if isinstance(spec.get("scaleTargetRef"), Mapping) else None
    if ref is None or not ref.get("name"):
        errors.add(document, ("spec", "scaleTargetRef"), "a ScaledObject needs scaleTargetRef.name")
        return
    triggers = spec.get("triggers") or []
    crons = [(i, t) for i, t in enumerate(triggers) if isinstance(t, Mapping) and t.get("type") == "cron"]
    if not crons:
        return
    parsed: list[tuple[str, list[tuple[int, int]], int]] = []
    problems = len(errors.found)
    for i, trigger in crons:
        meta: Mapping[str, Any] = trigger["metadata"] if isinstance(trigger.get("metadata"), Mapping) else {}
        path = ("spec", "triggers")
        missing = [k for k in ("timezone", "start", "end", "desiredReplicas") if not meta.get(k)]
        if missing:
            errors.add(document, path, f"cron trigger {i} needs metadata.{', metadata.'.join(missing)}")
            continue
        try:
            _zone(str(meta["timezone"]))
            desired = int(str(meta["desiredReplicas"]))
            if desired < 0:
                raise ValueError(f"desiredReplicas {desired} is negative")
            starts, ends, weekly = _cron_pair(str(meta["start"]), str(meta["end"]))
        except ValueError as error:
            errors.add(document, path, f"cron trigger {i}: {error}")
            continue
        if not weekly:
            context.note(document, path, f"not imported: cron trigger {i} names days of the month "
                         f"or months; a fivespot schedule is weekly ({source})")
            return
        try:
            parsed.append((str(meta["timezone"]), open_intervals(starts, ends), desired))
        except ValueError as error:
            context.note(document, path, f"not imported: cron trigger {i}: {error} ({source})")
            return
    if len(errors.found) > problems:
        return
    kind, api_version = str(ref.get("kind", "Deployment")), str(ref.get("apiVersion", "apps/v1"))
    reasons = []
    if len(crons) < len(triggers):
        reasons.append("it has triggers other than cron, which fivespot does not run")
    if kind not in GATED or api_version != "apps/v1":
        reasons.append(f"its target is a {api_version} {kind}; import writes Deployments and StatefulSets")
    minimum = spec.get("minReplicaCount", 0)
    if minimum not in (0, None):
        reasons.append(f"minReplicaCount is {minimum}, and a fivespot schedule rests at 0")
    if len({zone for zone, _, _ in parsed}) > 1:
        reasons.append("its cron triggers are in different time zones; a TimeBasedSpotSchedule has one")
    if len({desired for _, _, desired in parsed}) > 1:
        reasons.append("its cron triggers want different replicas; a ScheduledCapacity has one activeValue")
    if reasons:
        context.note(document, ("spec",), f"not imported: {'; '.join(reasons)} ({source})")
        return
    zone, desired = parsed[0][0], parsed[0][2]
    maximum = spec.get("maxReplicaCount", 100)
    value = min(desired, maximum) if isinstance(maximum, int) else desired
    intervals = sorted({iv for _, ivs, _ in parsed for iv in ivs})
    tbss: dict[str, Any] = {"timezone": zone}
    if intervals:
        tbss["windows"] = windows_of(_union(intervals))
    schedule = f"keda-{name}"[:253]
    if not _valid(tbss, document, ("spec", "triggers"), context, source):
        return
    context.out.schedules.append(Schedule(namespace, schedule, tbss, _where(document)))
    cooldown = spec.get("cooldownPeriod", 300)
    context.note(document, ("spec", "cooldownPeriod"),
                 f"KEDA scales to 0 {cooldown} s after `end` (cooldownPeriod; down to a minimum "
                 "above 0, the HPA's 300 s stabilization window); fivespot writes 0 at `end`. "
                 f"Delete the ScaledObject when you apply the import: its HPA would govern "
                 f"spec.replicas too ({source})")
    workload = next((w for w in context.in_namespace(namespace)
                     if w.kind == kind and w.name == ref["name"]), None)
    if workload is None:
        workload = Workload(Document(document.file, {"metadata": {"name": ref["name"]},
                                                     "spec": {"replicas": value}},
                                     document.line, document.column), namespace, kind, str(ref["name"]))
    context.claim(workload, schedule, source, document.start, value)


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Weekly intervals merged where they overlap or touch (several cron triggers, any active)."""
    marks = [False] * WEEK
    for start, end in intervals:
        length = (end - start) % WEEK or WEEK
        for m in range(start, start + length):
            marks[m % WEEK] = True
    if all(marks):
        return [(0, WEEK)]
    begin = marks.index(False)
    merged: list[tuple[int, int]] = []
    for offset in range(1, WEEK + 1):
        m = (begin + offset) % WEEK
        if marks[m] and not marks[(m - 1) % WEEK]:
            merged.append((m, m))
        if not marks[m] and marks[(m - 1) % WEEK]:
            merged[-1] = (merged[-1][0], m)
    return merged


def _cron_pair(start: str, end: str) -> tuple[set[int], set[int], bool]:
    fields = [start.split(), end.split()]
    for which, parts in zip(("start", "end"), fields):
        if len(parts) != 5:
            raise ValueError(f"{which} {cut(' '.join(parts))!r} is not a 5-field cron expression")
    if fields[0] == fields[1]:
        raise ValueError("start and end are the same, which KEDA refuses")
    weekly = all(parts[2] == "*" and parts[3] == "*" for parts in fields)
    result = [firings(parts[0], parts[1], weekdays(parts[4])) for parts in fields]
    for parts in fields:
        cron_field(parts[2], 1, 31)
        cron_field(parts[3], 1, 12)
    return result[0], result[1], weekly


def _downscaler(workload: Workload, context: _Context) -> None:
    namespace = context.namespaces.get(workload.namespace)
    scopes = [(workload.document, workload.annotations)]
    if namespace is not None:
        scopes.append((namespace, _mapping(namespace.data.get("metadata"), "annotations")))
    values: dict[str, str] = {}
    origin: dict[str, Document] = {}
    for group in (SCHEDULE_GROUP, FORCE_GROUP):
        for document, annotations in scopes:  # the most specific scope setting any of the group
            found = {k: annotations[PREFIX + k] for k in group if PREFIX + k in annotations}
            if found:
                values.update(found)
                origin.update({k: document for k in found})
                break
    for key in ("exclude", "exclude-until", *REPLICAS_KEYS):
        for document, annotations in scopes:
            if PREFIX + key in annotations:
                values[key], origin[key] = annotations[PREFIX + key], document
                break
    if not any(k in values for k in SCHEDULE_GROUP + FORCE_GROUP):
        return
    first = origin[next(k for k in SCHEDULE_GROUP + FORCE_GROUP if k in values)]
    where = first.start
    source = f"kube-downscaler annotations on {_describe(first)}"
    if workload.kind not in context.downscaler_kinds:
        context.out.notes.append(Note(workload.document.start, "kind",
                                      f"{workload.kind} {workload.namespace}/{workload.name}: the "
                                      "downscaler scales this kind only with --include-resources "
                                      f"naming it (import's --downscaler-resources); not imported"))
        return
    exclude = values.get("exclude", "").strip().lower()
    if exclude in ("true", "always"):
        return
    if exclude not in ("", "false", "never"):
        context.out.notes.append(Note(origin["exclude"].locate("metadata", "annotations"),
                                      "metadata.annotations." + PREFIX + "exclude",
                                      f"not imported: {workload.kind} {workload.namespace}/"
                                      f"{workload.name} is excluded during a timespan, which "
                                      "fivespot cannot say"))
        return
    for key in REPLICAS_KEYS:
        if values.get(key, "0").strip() not in ("0", ""):
            context.out.notes.append(Note(origin[key].locate("metadata", "annotations"),
                                          "metadata.annotations." + PREFIX + key,
                                          f"not imported: {workload.kind} {workload.namespace}/"
                                          f"{workload.name} rests at {values[key]} replicas; a "
                                          "fivespot schedule rests at 0"))
            return
    try:
        spec = downscaler_spec(values)
    except NeedsDefaults as error:
        context.out.notes.append(Note(where, "metadata.annotations", f"not imported: {error}"))
        return
    except NotCarried as error:
        context.out.notes.append(Note(where, "metadata.annotations",
                                      f"not imported: {workload.kind} {workload.namespace}/"
                                      f"{workload.name}: {error}"))
        return
    except ValueError as error:
        bad = next((k for k in values if _bad(k, values[k])), "")
        document = origin.get(bad, first)
        context.errors.add(document, ("metadata", "annotations", PREFIX + bad) if bad
                           else ("metadata", "annotations"), str(error))
        return
    if spec is None:
        return
    if not _valid(spec, first, ("metadata", "annotations"), context, source):
        return
    shared = all(origin[k] is not workload.document for k in values if k != "exclude")
    name = "downscaler" if shared else f"downscaler-{workload.name}"[:253]
    if not any(s.namespace == workload.namespace and s.name == name for s in context.out.schedules):
        context.out.schedules.append(Schedule(workload.namespace, name, spec,
                                              _where(first if shared else workload.document)))
    original = workload.annotations.get(PREFIX + "original-replicas")
    value = int(original) if original is not None and original.isdigit() else None
    context.claim(workload, name, source, where, value)


def _bad(key: str, value: str) -> bool:
    try:
        if key == "exclude-until":
            _instant(value.strip())
        elif key in SCHEDULE_GROUP + FORCE_GROUP:
            parse_timespans(value)
    except NeedsDefaults:
        return False
    except ValueError:
        return True
    return False


def _describe(document: Document) -> str:
    meta = document.data.get("metadata") or {}
    kind = document.data.get("kind", "object")
    if kind == "Namespace":
        return f"Namespace {meta.get('name')}"
    return f"{kind} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")


def _valid(spec: Mapping[str, Any], document: Document, path: Sequence[str], context: _Context,
           source: str) -> bool:
    """Whether fivespot takes the spec (as its provider validates it); a note if not."""
    from pydantic import ValidationError

    from fivespot.api.kinds.providers import TimeBasedSpotScheduleSpec

    try:
        TimeBasedSpotScheduleSpec.model_validate(spec)
    except ValidationError as error:
        first = error.errors()[0]
        context.note(document, path, f"not imported: the schedule it makes is one fivespot "
                     f"refuses ({'.'.join(str(p) for p in first['loc'])}: {first['msg']}) ({source})")
        return False
    return True


def _text(spec: Mapping[str, Any], key: str) -> str:
    value = spec[key]
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {cut(repr(value))}")
    return value


def _why(error: Exception, expected: str) -> str:
    return f"required: {expected}" if isinstance(error, KeyError) else str(error)


def _where(document: Document) -> str:
    return f"{document.file}:{document.line}" if document.line else document.file


# --- the whole import ----------------------------------------------------------------------------


def import_objects(documents: Iterable[Document], *, default_namespace: str = "default",
                   downscaler_kinds: Iterable[str] = ("Deployment",)) -> Imported:
    """Translate the peers' objects among `documents` (other kinds are read for their
    workloads and namespaces, or ignored); raises InputError naming file, line and field of
    every object a peer itself would refuse."""
    documents = list(documents)
    errors = _Errors()
    context = _Context([], {}, frozenset(downscaler_kinds), errors, Imported())

    def namespace_of(document: Document) -> str:
        meta = document.data.get("metadata") or {}
        return str(meta.get("namespace") or default_namespace)

    peers: list[tuple[Callable[[Document, _Context, str], None], Document]] = []
    for document in documents:
        data = document.data
        if not isinstance(data, Mapping):
            continue
        group = str(data.get("apiVersion", "")).rpartition("/")[0]
        kind = data.get("kind")
        meta = data.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            if kind in ("SleepInfo", "ScaledObject", "Namespace", *GATED):
                errors.add(document, ("metadata", "name"), f"a {kind} needs metadata.name")
            continue
        if (group, kind) == SLEEPINFO:
            peers.append((_sleepinfo, document))
        elif (group, kind) == SCALEDOBJECT:
            peers.append((_scaledobject, document))
        elif kind == "Namespace" and data.get("apiVersion") == "v1":
            context.namespaces[str(meta["name"])] = document
        elif kind in GATED and data.get("apiVersion") == "apps/v1":
            context.workloads.append(Workload(document, namespace_of(document), str(kind), str(meta["name"])))
        elif any(str(k).startswith(PREFIX) for k in _mapping(meta, "annotations")) and kind != "Namespace":
            context.out.notes.append(Note(document.locate("metadata", "annotations"), "metadata.annotations",
                                          f"{data.get('apiVersion')} {kind} {namespace_of(document)}/"
                                          f"{meta['name']} has downscaler annotations; import writes "
                                          "Deployments and StatefulSets only"))
    keys = [w.key for w in context.workloads]
    for workload in context.workloads:
        if keys.count(workload.key) > 1:
            errors.add(workload.document, ("metadata", "name"),
                       f"{workload.kind} {workload.namespace}/{workload.name} is given twice")
    errors.raise_any()
    for translate, document in peers:
        translate(document, context, namespace_of(document))
    for workload in sorted(context.workloads, key=lambda w: w.key):
        _downscaler(workload, context)
    errors.raise_any()
    _settle_claims(context)
    return context.out.finish()


def _settle_claims(context: _Context) -> None:
    """One ScheduledCapacity per workload; a workload two peers' objects scale is left out and
    reported, since the two would fight over it today too."""
    names: dict[tuple[str, str], str] = {}
    for key, claims in sorted(context.claims.items()):
        sources = sorted({c.source for c, _ in claims})
        if len(sources) > 1:
            for capacity, where in claims:
                context.out.notes.append(Note(where, "", f"not imported: {capacity.kind} "
                                              f"{capacity.namespace}/{capacity.target} is scaled "
                                              f"by {' and by '.join(sources)}; choose one"))
            continue
        capacity = claims[0][0]
        context.out.capacities.append(capacity)
        names[(capacity.namespace, capacity.target)] = capacity.kind
    wanted = {(c.namespace, c.schedule) for c in context.out.capacities}
    context.out.schedules[:] = [s for s in context.out.schedules
                                if (s.namespace, s.name) in wanted or not s.name.startswith("downscaler")]


def capacity_name(capacity: Capacity, all_capacities: Sequence[Capacity]) -> str:
    """The ScheduledCapacity's name: its target's, unless a workload of the other kind has the
    same name in the namespace (then `-statefulset` is added to the StatefulSet's)."""
    clash = any(c is not capacity and c.namespace == capacity.namespace and c.target == capacity.target
                for c in all_capacities)
    return f"{capacity.target}-statefulset"[:253] if clash and capacity.kind == "StatefulSet" else capacity.target


# --- the files written ---------------------------------------------------------------------------

CONFIG_HEADER: Final = "# Written by `fivespot import`"


def render(imported: Imported, read: Sequence[str]) -> dict[str, str]:
    """Every file of an import (relative path -> text): the config repo in `config/`, each
    namespace's schedules and ScheduledCapacities in `tenant/NAMESPACE.yaml`, and REPORT.md."""
    from fivespot.compiler.scaffold import PLATFORM

    files = {"config/platform.yaml": f"{CONFIG_HEADER}: the scaffold's platform; review it.\n"
             + PLATFORM,
             "config/providers.yaml": _yaml([{
                 "apiVersion": "config.5spot.finos.org/v1alpha1", "kind": "ScheduleProvider",
                 "metadata": {"name": "builtin"},
                 "spec": {"builtin": ["ManualSchedule", "TimeBasedSpotSchedule"]}}],
                 f"{CONFIG_HEADER}: the providers the imported schedules need (ManualSchedule for "
                 "a hand on them).")}
    kinds = sorted({c.kind for c in imported.capacities})
    consumers = [{"apiVersion": "config.5spot.finos.org/v1alpha1", "kind": "CapacityConsumer",
                  "metadata": {"name": GATED[kind]},
                  "spec": {"group": "apps", "version": "v1", "kind": kind, "resource": GATED[kind],
                           "capacityPaths": ["spec.replicas"], "drainedPath": "status.readyReplicas",
                           "maxActiveValue": max(c.value for c in imported.capacities if c.kind == kind)}}
                 for kind in kinds]
    if consumers:
        files["config/consumers.yaml"] = _yaml(consumers, f"{CONFIG_HEADER}: the workload kinds the "
                                               "peers scaled, up to the most replicas imported.")
    namespaces = sorted({c.namespace for c in imported.capacities} | {s.namespace for s in imported.schedules})
    tenants = []
    for namespace in namespaces:
        mine = [c for c in imported.capacities if c.namespace == namespace]
        tenants.append({"apiVersion": "config.5spot.finos.org/v1alpha1", "kind": "TenantPolicy",
                        "metadata": {"name": namespace},
                        "spec": {"namespaces": [namespace],
                                 "consumers": sorted({GATED[c.kind] for c in mine}) or [GATED["Deployment"]],
                                 "maxActiveValue": max([c.value for c in mine], default=1),
                                 "validationActions": ["Deny"]}})
    if tenants:
        files["config/tenants.yaml"] = _yaml(tenants, f"{CONFIG_HEADER}: one tenant per namespace the "
                                             "peers' objects were in.")
    for namespace in namespaces:
        schedules = [({"apiVersion": TBSS[0], "kind": TBSS[1],
                       "metadata": {"name": s.name, "namespace": namespace}, "spec": dict(s.spec)},
                      f"from {s.source}") for s in imported.schedules if s.namespace == namespace]
        capacities = [(_capacity_object(c, imported.capacities),
                       f"{c.kind} {c.target}, as {c.source} scaled it")
                      for c in imported.capacities if c.namespace == namespace]
        # Two steps: a ScheduledCapacity whose schedule has never answered is inactive (it
        # writes 0), so the schedules go first and the capacities once they report.
        for step, documents in (("schedules", schedules), ("capacities", capacities)):
            if documents:
                files[f"tenant/{step}/{namespace}.yaml"] = "---\n".join(
                    f"# {comment}\n{_yaml([document])}" for document, comment in documents)
    if imported.capacities:
        files["config/fixtures/imported.yaml"] = _yaml(
            [{"apiVersion": "config.5spot.finos.org/v1alpha1", "kind": "Fixture",
              "metadata": {"name": f"{c.namespace}-{capacity_name(c, imported.capacities)}-admitted"[:253]},
              "spec": {"object": _capacity_object(c, imported.capacities), "expect": {"allowed": True}}}
             for c in imported.capacities],
            f"{CONFIG_HEADER}: each imported ScheduledCapacity is admitted (`fivespot test` checks it).")
    files["REPORT.md"] = report(imported, read)
    return files


def _capacity_object(capacity: Capacity, everything: Sequence[Capacity]) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": capacity_name(capacity, everything), "namespace": capacity.namespace},
            "spec": {"schedule": {"apiVersion": TBSS[0], "kind": TBSS[1], "name": capacity.schedule},
                     "targetRef": {"apiVersion": "apps/v1", "kind": capacity.kind, "name": capacity.target},
                     "capacity": {"path": "spec.replicas", "activeValue": capacity.value}}}


def _yaml(documents: Sequence[Mapping[str, Any]], header: str = "") -> str:
    import yaml

    text = "---\n".join(yaml.safe_dump(d, sort_keys=False, default_flow_style=None, width=100)
                        for d in documents)
    return f"{header}\n{text}" if header else text


def report(imported: Imported, read: Sequence[str]) -> str:
    """REPORT.md: what was read, what was written, and every note."""
    lines = ["# What `fivespot import` carried over", "",
             f"Read: {', '.join(read) if read else 'nothing'}.", "",
             f"Wrote {len(imported.schedules)} TimeBasedSpotSchedule(s) in `tenant/schedules/` and "
             f"{len(imported.capacities)} ScheduledCapacity(ies) in `tenant/capacities/`, and the "
             "config repo in `config/`.", "",
             "Before you apply them, remove the peer's objects (SleepInfos, ScaledObjects, the "
             "`downscaler/*` annotations) for these workloads, or stop the peer: two controllers "
             "writing one field fight over it. Apply `tenant/schedules/` first and "
             "`tenant/capacities/` once the schedules are Ready: a ScheduledCapacity whose "
             "schedule has not answered yet writes 0.", ""]
    if imported.capacities:
        lines += ["## Imported", ""]
        lines += [f"- `{c.namespace}` {c.kind} `{c.target}`: {c.value} replicas while "
                  f"`{c.schedule}` is open, 0 otherwise (from {c.source})" for c in imported.capacities]
        lines.append("")
    lines += ["## Not carried over", ""]
    lines += [f"- {note}" for note in imported.notes] or ["- nothing"]
    return "\n".join(lines) + "\n"
