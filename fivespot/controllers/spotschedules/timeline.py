"""The transitions a provider object will make, from the same decision functions its controller
runs: `fivespot schedule preview` prints these and draws them, so neither the table nor the
picture can disagree with the cluster.

For ManualSchedule, TimeBasedSpotSchedule and CapitalMarketsSchedule a timeline is the state at
the start and each later flip, from the kind's `decide` with the spec's override applied
(`override.with_override`), exactly what its controller publishes. A CompositeSchedule's timeline
is its expression (`composite.truth`, three-valued) evaluated at every instant one of its
children's timelines changes, then its own override; with the children's whole timelines known
offline this is exact, where the controller's published `nextTransitionTime` can only use each
child's next one. A child that is not among the given objects is unresolved, as the controller
would see it.

A timeline also carries its marks (`marks.Mark`): the kind's own (`MARK_SOURCES`: a calendar's
holidays, early closes, late opens, special sessions; a weekly schedule's public holidays, closed
dates and closed ranges) and, for every kind, an override, from the window's start (a preview
cannot know when it was written) to its `until`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from fivespot.api.kinds.composite import KIND as COMPOSITE_KIND
from fivespot.api.kinds.providers import (
    CapitalMarketsScheduleSpec,
    ManualScheduleSpec,
    Override,
    TimeBasedSpotScheduleSpec,
)
from fivespot.api.kinds.scheduled_capacity import PROVIDER_GROUP
from fivespot.controllers.spotschedules import capital_markets, composite, manual, time_based
from fivespot.controllers.spotschedules.marks import Mark
from fivespot.controllers.spotschedules.override import with_override
from fivespot.controllers.spotschedules.status import Decision, rfc3339

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
    marks: tuple[Mark, ...] = ()
    """Every mark that meets the window, in time order."""

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


DECIDED: Final[Mapping[str, tuple[type[BaseModel], Callable[[Any, dt.datetime], Decision]]]] = {
    "ManualSchedule": (ManualScheduleSpec, manual.decide),
    "TimeBasedSpotSchedule": (TimeBasedSpotScheduleSpec, time_based.decide),
    "CapitalMarketsSchedule": (CapitalMarketsScheduleSpec, capital_markets.decide),
}
"""The kinds whose timeline their own decision gives: model and `decide(spec, now)`."""

MarkSource = Callable[[Any, dt.datetime, dt.datetime], Iterable[Mark]]
MARK_SOURCES: Final[Mapping[str, MarkSource]] = {
    "CapitalMarketsSchedule": capital_markets.marks,
    "TimeBasedSpotSchedule": time_based.marks,
}
"""By kind: `marks(spec, start, end)` of a parsed spec, the kind's own marks in the window."""


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
    if until is None:
        window.seen = {key: replace(t, transitions=t.transitions[:count])
                       for key, t in window.seen.items()}
    return {key: _marked(t, by_key.get(key), until) for key, t in window.seen.items()}


def _marked(timeline: Timeline, provider: Provider | None, until: dt.datetime | None) -> Timeline:
    """`timeline` with the marks that meet its window: up to `until`, or to its last transition."""
    if provider is None or timeline.problem is not None:
        return timeline
    end = until or (timeline.transitions[-1][0] if timeline.transitions else timeline.start)
    found: list[Mark] = []
    source = MARK_SOURCES.get(provider.kind)
    model = DECIDED.get(provider.kind, (None,))[0]
    if source is not None and model is not None:
        found += source(model.model_validate(provider.spec), timeline.start, end)
    override = _override(provider)
    if override is not None and override.expires > timeline.start:
        state = "active" if override.active else "inactive"
        found.append(Mark(timeline.start, override.expires, "override",
                          f"override: {state} until {rfc3339(override.expires)}"))
    return replace(timeline, marks=tuple(sorted(m for m in found if m.overlaps(timeline.start, end))))


def _override(provider: Provider) -> Override | None:
    raw = provider.spec.get("override")
    return Override.model_validate(raw) if isinstance(raw, Mapping) else None


def _timeline(provider: Provider, by_key: Mapping[tuple[str, str, str, str], Provider],
              window: _Window, path: tuple[str, ...]) -> Timeline:
    if provider.key in window.seen:
        return window.seen[provider.key]
    if provider.group != PROVIDER_GROUP:
        found = Timeline(window.start, None, (), problem=f"{provider.group} is not the provider group")
    elif provider.kind in DECIDED:
        found = _decided(provider, window)
    elif provider.kind == COMPOSITE_KIND:
        found = _composite(provider, by_key, window, path)
    else:
        found = Timeline(window.start, None, (), problem=(
            f"{provider.kind} is not a built-in kind; its controller decides, not fivespot"))
    window.seen[provider.key] = found
    return found


def _invalid(window: _Window, error: ValidationError) -> Timeline:
    from fivespot.controllers.spotschedules.status import spec_error_message

    return Timeline(window.start, None, (), problem=spec_error_message(error))


def _decided(provider: Provider, window: _Window) -> Timeline:
    model, decide = DECIDED[provider.kind]
    try:
        spec = model.model_validate(provider.spec)
    except ValidationError as error:
        return _invalid(window, error)
    deciding = with_override(decide)
    zone = str(getattr(spec, "timezone", "UTC"))
    decision = deciding(spec, window.start)
    if not decision.ready:
        return Timeline(window.start, None, (), zone, problem=decision.message)
    initial, transitions = decision.active, list[tuple[dt.datetime, bool | None]]()
    while len(transitions) < window.count:
        following = decision.next_transition
        if following is None or (window.until is not None and following > window.until):
            break
        decision = deciding(spec, following)
        if not decision.ready:
            break  # the holiday data stops: the object is unresolved from there (time_based)
        transitions.append((following, decision.active))
    return Timeline(window.start, initial, tuple(transitions), zone)


def _composite(provider: Provider, by_key: Mapping[tuple[str, str, str, str], Provider],
               window: _Window, path: tuple[str, ...]) -> Timeline:
    parsed_spec = composite.parse_with_override(provider.spec)
    if isinstance(parsed_spec, ValidationError):
        return _invalid(window, parsed_spec)
    parsed, override = parsed_spec
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
    own = Timeline(window.start, initial, tuple(transitions), zones.pop() if len(zones) == 1 else "UTC")
    return _overridden(own, override)


def _overridden(own: Timeline, override: Override | None) -> Timeline:
    """A composite's timeline with its own override: the override's value until its expiry, the
    expression from then on (as `override.overridden` publishes it)."""
    if override is None or override.expires <= own.start:
        return own
    until = override.expires
    state: bool | None = override.active
    transitions: list[tuple[dt.datetime, bool | None]] = []
    for when, value in [(until, own.at(until)), *((w, v) for w, v in own.transitions if w > until)]:
        if value != state:
            transitions.append((when, value))
            state = value
    return replace(own, initial=override.active, transitions=tuple(transitions))
