"""The transitions a provider object will make, from the same decision functions its controller
runs: `fivespot schedule preview` prints these, so a preview cannot disagree with the cluster.

For the time-driven kinds (TimeBasedSpotSchedule, CapitalMarketsSchedule) a timeline is the
state at the start and each later `next_transition` with the state `is_active` gives right
after it. A ManualSchedule never changes by itself. A CompositeSchedule's timeline is its
expression (`composite.truth`, three-valued) evaluated at every instant one of its children's
timelines changes; with the children's whole timelines known offline this is exact, where the
controller's published `nextTransitionTime` can only use each child's next one. A child that is
not among the given objects is unresolved, as the controller would see it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from api.holiday_calendars import Unanswerable
from api.kinds.composite import KIND as COMPOSITE_KIND
from api.kinds.providers import CapitalMarketsScheduleSpec, ManualScheduleSpec, TimeBasedSpotScheduleSpec
from api.kinds.scheduled_capacity import PROVIDER_GROUP
from controllers.providers import capital_markets, composite, time_based

MAX_TRANSITIONS: Final = 1000


@dataclass(frozen=True)
class Timeline:
    """`initial` at `start`, then each (instant, state) in order; None is unresolved."""

    start: dt.datetime
    initial: bool | None
    transitions: tuple[tuple[dt.datetime, bool | None], ...]
    timezone: str = "UTC"
    problem: str | None = None
    """Why the object has no timeline of its own (an invalid spec, an unknown kind)."""

    def at(self, instant: dt.datetime) -> bool | None:
        state = self.initial
        for when, value in self.transitions:
            if when > instant:
                break
            state = value
        return state


@dataclass(frozen=True)
class Provider:
    """One provider object as read from a file or a cluster."""

    kind: str
    namespace: str
    name: str
    spec: Mapping[str, Any]
    group: str = PROVIDER_GROUP

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.namespace, self.group, self.kind, self.name


@dataclass
class _Window:
    start: dt.datetime
    until: dt.datetime | None
    count: int
    seen: dict[tuple[str, str, str, str], Timeline] = field(default_factory=dict)


_TimeDriven = tuple[type[BaseModel], Callable[[Any, dt.datetime], bool],
                    Callable[[Any, dt.datetime], dt.datetime | None]]
TIME_DRIVEN: Final[Mapping[str, _TimeDriven]] = {
    "TimeBasedSpotSchedule": (TimeBasedSpotScheduleSpec, time_based.is_active, time_based.next_transition),
    "CapitalMarketsSchedule": (CapitalMarketsScheduleSpec, capital_markets.is_active,
                               capital_markets.next_transition),
}


def timelines(
    providers: list[Provider], start: dt.datetime, *, until: dt.datetime | None = None,
    count: int = 10,
) -> dict[tuple[str, str, str, str], Timeline]:
    """Every provider's timeline from `start`: its next `count` transitions, or all of them up
    to `until` (at most MAX_TRANSITIONS)."""
    by_key = {p.key: p for p in providers}
    # Children are followed further than asked, so a composite over them finds its own `count`.
    window = _Window(start, until, min(MAX_TRANSITIONS, count * 8) if until is None else MAX_TRANSITIONS)
    for provider in providers:
        _timeline(provider, by_key, window, ())
    if until is not None:
        return window.seen
    return {key: Timeline(t.start, t.initial, t.transitions[:count], t.timezone, t.problem)
            for key, t in window.seen.items()}


def _timeline(provider: Provider, by_key: Mapping[tuple[str, str, str, str], Provider],
              window: _Window, path: tuple[str, ...]) -> Timeline:
    if provider.key in window.seen:
        return window.seen[provider.key]
    if provider.group != PROVIDER_GROUP:
        found = Timeline(window.start, None, (), problem=f"{provider.group} is not the provider group")
    elif provider.kind in TIME_DRIVEN:
        found = _time_driven(provider, window)
    elif provider.kind == "ManualSchedule":
        try:
            spec = ManualScheduleSpec.model_validate(provider.spec)
            found = Timeline(window.start, spec.enabled, ())
        except ValidationError as error:
            found = _invalid(window, error)
    elif provider.kind == COMPOSITE_KIND:
        found = _composite(provider, by_key, window, path)
    else:
        found = Timeline(window.start, None, (), problem=(
            f"{provider.kind} is not a built-in kind; its controller decides, not fivespot"))
    window.seen[provider.key] = found
    return found


def _invalid(window: _Window, error: ValidationError) -> Timeline:
    from controllers.providers.status import spec_error_message

    return Timeline(window.start, None, (), problem=spec_error_message(error))


def _time_driven(provider: Provider, window: _Window) -> Timeline:
    model, is_active, next_transition = TIME_DRIVEN[provider.kind]
    try:
        spec = model.model_validate(provider.spec)
    except ValidationError as error:
        return _invalid(window, error)
    transitions: list[tuple[dt.datetime, bool | None]] = []
    zone = str(getattr(spec, "timezone", "UTC"))
    try:
        initial = is_active(spec, window.start)
    except Unanswerable as refused:
        return Timeline(window.start, None, (), zone, problem=str(refused))
    instant = window.start
    while len(transitions) < window.count:
        try:
            following = next_transition(spec, instant)
            state: bool | None = None if following is None else is_active(spec, following)
        except Unanswerable:
            break  # the holiday data stops: the object is unresolved from there (time_based)
        if following is None or (window.until is not None and following > window.until):
            break
        transitions.append((following, state))
        instant = following
    return Timeline(window.start, initial, tuple(transitions), zone)


def closures(provider: Provider, start: dt.datetime, until: dt.datetime
             ) -> tuple[tuple[time_based.Closure, ...], str | None]:
    """The dated closures (holidays, closed dates, closed ranges) of a TimeBasedSpotSchedule
    over [start, until), for a preview to mark, and why the list stops early (None: it does
    not); nothing for another kind or an invalid spec."""
    if provider.kind != "TimeBasedSpotSchedule" or provider.group != PROVIDER_GROUP:
        return (), None
    try:
        spec = TimeBasedSpotScheduleSpec.model_validate(provider.spec)
    except ValidationError:
        return (), None
    return time_based.closures(spec, start, until)


def _composite(provider: Provider, by_key: Mapping[tuple[str, str, str, str], Provider],
               window: _Window, path: tuple[str, ...]) -> Timeline:
    parsed = composite.parse_spec(provider.spec)
    if isinstance(parsed, ValidationError):
        return _invalid(window, parsed)
    if provider.name in path:
        return Timeline(window.start, None, (), problem=(
            f"CompositeSchedule {' -> '.join((*path, provider.name))} is a cycle"))
    children: dict[tuple[str, str, str], Timeline] = {}
    for ref in composite.references(parsed):
        child = by_key.get((provider.namespace, ref.group, ref.kind, ref.name))
        if child is None:
            children[ref.key] = Timeline(window.start, None, (), problem="not among the objects given")
            continue
        timeline = _timeline(child, by_key, window, (*path, provider.name))
        if timeline.problem is not None and "is a cycle" in timeline.problem:
            return Timeline(window.start, None, (), problem=timeline.problem)
        children[ref.key] = timeline

    def at(instant: dt.datetime) -> bool | None:
        return composite.truth(parsed, lambda ref: children[ref.key].at(instant))

    instants = sorted({when for t in children.values() for when, _ in t.transitions})
    initial = at(window.start)
    state, transitions = initial, []
    for instant in instants:
        value = at(instant)
        if value != state:
            transitions.append((instant, value))
            state = value
            if len(transitions) >= window.count:
                break
    horizon = min((t.transitions[-1][0] for t in children.values()
                   if len(t.transitions) >= window.count), default=None)
    if horizon is not None:
        # Past the first child's last known transition the composite's future is not known.
        transitions = [(when, value) for when, value in transitions if when <= horizon]
    zones = {t.timezone for t in children.values() if t.transitions}
    return Timeline(window.start, initial, tuple(transitions), zones.pop() if len(zones) == 1 else "UTC")
