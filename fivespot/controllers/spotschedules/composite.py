"""CompositeSchedule: the three-valued decision over its children, pure.

A child is observed per the provider contract (`fivespot.api.provider_contract`): resolved to active or
inactive, unresolved (its CRD missing, the object missing, no boolean `active`, Ready not True),
or not observable right now (`LookupFailed`: a cache not synced). The expression is evaluated in
Kleene's three-valued logic, so an unresolved child matters only when the answer depends on it:
`anyOf` with one active child is active whatever the others say, `allOf` with one inactive
child is inactive, `not` keeps "unknown" unknown. When the root is unknown the composite is
unresolved itself: `Ready=False/ChildUnresolved` naming the children that decide it, `active`
held at its last value (its consumers hold theirs). When the answer depends on a child that
could not be looked at, nothing is written and the reconcile is retried: a controller's own
start-up must not flip Ready.

A cycle (this object reachable from itself through CompositeSchedule children) is an invalid
spec: `Ready=False/InvalidSpec` with the path. A direct self-reference is refused at admission
(`fivespot.api.kinds.composite.SELF_REFERENCE_RULE`, at the object's root); a cycle through other objects
is not visible to a rule on one object, so this is where it is caught, and where a
self-reference stored before the rule existed still is.

`nextTransitionTime` is derived from the children's own `nextTransitionTime`: their next flips
are applied in time order and the first one that changes the root's value is the composite's
next transition. That is exact whenever no child flips twice before it; every child status
change recomputes it, so the published value never lags a child's.

A `spec.override` in force decides whatever the children say, unresolved or not yet looked at
(`override.py`); its `nextTransitionTime` comes from what the children's next flips foretell at
the expiry (`foretold`), and the object is requeued at the expiry.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from fivespot.api.kinds.composite import CompositeScheduleSpec
from fivespot.api.kinds.composite import KIND as COMPOSITE_KIND
from fivespot.api.kinds.providers import Override
from fivespot.api.kinds.scheduled_capacity import PROVIDER_GROUP, api_group
from fivespot.api.provider_contract import LookupFailed, Resolved, ScheduleObservation, Unresolved
from fivespot.controllers.spotschedules.override import in_force, overridden
from fivespot.controllers.spotschedules.status import (
    REASON_INVALID_SPEC,
    Decision,
    desired_status,
    read_prior_status,
    spec_error_message,
    status_patch,
)

REASON_TRUE: Final = "ExpressionTrue"
REASON_FALSE: Final = "ExpressionFalse"
REASON_CHILD_UNRESOLVED: Final = "ChildUnresolved"
LOOKUP_RETRY_S: Final = 1.0
"""While a child that decides the answer cannot be looked at (its cache is syncing)."""

Truth = bool | None
"""Kleene's three values: True, False, None (unknown)."""


@dataclass(frozen=True)
class Ref:
    """A reference node; `field` is where it is in the spec (for messages)."""

    group: str
    kind: str
    name: str
    field: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.group, self.kind, self.name

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class AnyOf:
    children: tuple[Expr, ...]


@dataclass(frozen=True)
class AllOf:
    children: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    child: Expr


Expr = Ref | AnyOf | AllOf | Not


def parse(spec: BaseModel, field: str = "spec") -> Expr:
    """The expression of a validated CompositeScheduleSpec node."""
    values = spec.__dict__
    if values.get("kind") is not None:
        return Ref(api_group(str(values["api_version"])), str(values["kind"]), str(values["name"]),
                   field)
    if values.get("any_of") is not None:
        return AnyOf(tuple(parse(c, f"{field}.anyOf[{i}]") for i, c in enumerate(values["any_of"])))
    if values.get("all_of") is not None:
        return AllOf(tuple(parse(c, f"{field}.allOf[{i}]") for i, c in enumerate(values["all_of"])))
    return Not(parse(values["not_"], f"{field}.not"))


def references(expr: Expr) -> Iterator[Ref]:
    """Every reference in the expression, in spec order."""
    if isinstance(expr, Ref):
        yield expr
    elif isinstance(expr, Not):
        yield from references(expr.child)
    else:
        for child in expr.children:
            yield from references(child)


def truth(expr: Expr, value: Callable[[Ref], Truth]) -> Truth:
    """The expression in three-valued logic, `value` giving each reference's."""
    if isinstance(expr, Ref):
        return value(expr)
    if isinstance(expr, Not):
        inner = truth(expr.child, value)
        return None if inner is None else not inner
    results = [truth(child, value) for child in expr.children]
    decisive = isinstance(expr, AnyOf)  # anyOf: one True decides; allOf: one False decides
    if decisive in results:
        return decisive
    if None in results:
        return None
    return not decisive


def deciding_unknowns(expr: Expr, value: Callable[[Ref], Truth]) -> list[Ref]:
    """The unknown references the (unknown) result depends on: none under a decided node."""
    if truth(expr, value) is not None:
        return []
    if isinstance(expr, Ref):
        return [expr]
    if isinstance(expr, Not):
        return deciding_unknowns(expr.child, value)
    return [ref for child in expr.children for ref in deciding_unknowns(child, value)]


def next_transition(
    expr: Expr,
    value: Callable[[Ref], Truth],
    upcoming: Callable[[Ref], dt.datetime | None],
) -> dt.datetime | None:
    """The first of the children's next flips, taken in time order, that changes the result."""
    current = truth(expr, value)
    if current is None:
        return None
    flips: dict[tuple[str, str, str], dt.datetime] = {}
    for ref in references(expr):
        when = upcoming(ref)
        if when is not None and value(ref) is not None:
            flips[ref.key] = when
    flipped: set[tuple[str, str, str]] = set()

    def after(ref: Ref) -> Truth:
        now = value(ref)
        return (not now) if ref.key in flipped and now is not None else now

    for key, when in sorted(flips.items(), key=lambda item: item[1]):
        flipped.add(key)
        if any(other <= when for k, other in flips.items() if k not in flipped):
            continue  # another child flips at the same instant; judge them together
        if truth(expr, after) != current:
            return when
    return None


def foretold(expr: Expr, value: Callable[[Ref], Truth],
             upcoming: Callable[[Ref], dt.datetime | None],
             instant: dt.datetime) -> tuple[bool, dt.datetime | None] | None:
    """The result at a later `instant` as the children's next flips foretell it (each child whose
    next flip is at or before `instant` has flipped, once), and its first flip after `instant`;
    None when it would be unresolved then. As exact as `next_transition`."""
    flipped = {ref.key for ref in references(expr)
               if value(ref) is not None and (when := upcoming(ref)) is not None and when <= instant}

    def then(ref: Ref) -> Truth:
        now = value(ref)
        return (not now) if ref.key in flipped and now is not None else now

    result = truth(expr, then)
    if result is None:
        return None
    return result, next_transition(expr, then,
                                   lambda ref: None if ref.key in flipped else upcoming(ref))


def describe(expr: Expr, value: Callable[[Ref], Truth]) -> str:
    """The expression with each reference's value, for the Ready message."""
    if isinstance(expr, Ref):
        shown = {True: "active", False: "inactive", None: "unresolved"}[value(expr)]
        return f"{expr}={shown}"
    if isinstance(expr, Not):
        return f"not({describe(expr.child, value)})"
    name = "anyOf" if isinstance(expr, AnyOf) else "allOf"
    return f"{name}({', '.join(describe(c, value) for c in expr.children)})"


# --- one reconcile -------------------------------------------------------------------------------


Lookup = Callable[[Ref], ScheduleObservation]
"""How the controller observes a child (from its caches)."""
Upcoming = Callable[[Ref], dt.datetime | None]
"""A child's published nextTransitionTime."""
Graph = Callable[[str], Expr | None]
"""Another CompositeSchedule's expression in the same namespace, by name (None: absent or
invalid), for cycle detection."""


@dataclass(frozen=True)
class Children:
    """What the controller shell observed, handed to `evaluate_with`."""

    name: str
    lookup: Lookup
    upcoming: Upcoming
    graph: Graph


def cycle(name: str, expr: Expr, graph: Graph) -> list[str] | None:
    """A path of CompositeSchedule names from `name` back to itself, if there is one."""

    def walk(current: Expr, path: list[str], seen: set[str]) -> list[str] | None:
        for ref in references(current):
            if ref.kind != COMPOSITE_KIND or ref.group != PROVIDER_GROUP:
                continue
            if ref.name == name:
                return [*path, ref.name]
            if ref.name in seen:
                continue
            seen.add(ref.name)
            inner = graph(ref.name)
            if inner is not None:
                found = walk(inner, [*path, ref.name], seen)
                if found is not None:
                    return found
        return None

    return walk(expr, [name], set())


def parse_spec(spec: Mapping[str, Any] | None) -> Expr | ValidationError:
    parsed = parse_with_override(spec)
    return parsed if isinstance(parsed, ValidationError) else parsed[0]


def parse_with_override(spec: Mapping[str, Any] | None
                        ) -> tuple[Expr, Override | None] | ValidationError:
    """The expression of a raw spec and its `override`, or why the spec is invalid."""
    try:
        model = CompositeScheduleSpec.model_validate(spec)
    except ValidationError as error:
        return error
    override = getattr(model, "override", None)
    return parse(model), override if isinstance(override, Override) else None


def evaluate_with(
    children: Children | None,
    spec: Mapping[str, Any] | None,
    generation: int,
    prior_status: Mapping[str, Any] | None,
    now: dt.datetime,
) -> tuple[dict[str, Any] | None, dt.datetime | None]:
    """The status patch to write (None: nothing, or could not look) and when to look again
    (None: on the next event). `children` None means nothing could be observed."""
    prior = read_prior_status(prior_status)
    held = prior.active if prior is not None else False

    def publish(active: bool, upcoming: dt.datetime | None, ready: tuple[bool, str, str],
                override_until: dt.datetime | None = None) -> dict[str, Any] | None:
        desired = desired_status(active=active, next_transition=upcoming, generation=generation,
                                 prior=prior, now=now, ready=ready, override_until=override_until)
        return status_patch(prior_status, desired)

    parsed_spec = parse_with_override(spec)
    if isinstance(parsed_spec, ValidationError):
        return publish(held, None, (False, REASON_INVALID_SPEC, spec_error_message(parsed_spec))), None
    parsed, override = parsed_spec
    if children is None:
        return None, now + dt.timedelta(seconds=LOOKUP_RETRY_S)
    loop = cycle(children.name, parsed, children.graph)
    if loop is not None:
        return publish(held, None, (False, REASON_INVALID_SPEC, (
            f"the spec is invalid, so status.active keeps its last value until it is fixed: "
            f"CompositeSchedule {' -> '.join(loop)} is a cycle; a composite cannot depend on "
            "itself"))), None

    observed = {ref.key: children.lookup(ref) for ref in references(parsed)}

    def value(ref: Ref) -> Truth:
        seen = observed[ref.key]
        return seen.active if isinstance(seen, Resolved) else None

    result = truth(parsed, value)
    force = in_force(override, now)
    if force is not None:
        # The override decides, whatever the children say (even unresolved, or not looked at).
        shown = describe(parsed, value)
        own = Decision(held if result is None else result, None,
                       REASON_CHILD_UNRESOLVED if result is None else
                       (REASON_TRUE if result else REASON_FALSE),
                       f"{shown} is {'unresolved' if result is None else _shown(result)}")
        decided = overridden(own, force, foretold(parsed, value, children.upcoming, force.until))
        return publish(decided.active, decided.next_transition,
                       (True, decided.reason, decided.message),
                       decided.override_until), decided.wake_at
    if result is None:
        deciding = deciding_unknowns(parsed, value)
        if any(isinstance(observed[ref.key], LookupFailed) for ref in deciding):
            return None, now + dt.timedelta(seconds=LOOKUP_RETRY_S)
        reasons = "; ".join(_why(ref, observed[ref.key]) for ref in _unique(deciding))
        return publish(held, None, (False, REASON_CHILD_UNRESOLVED, (
            f"the result depends on unresolved children, so status.active keeps its last value: "
            f"{reasons}"))), None
    upcoming = next_transition(parsed, value, children.upcoming)
    shown = describe(parsed, value)
    if result:
        return publish(True, upcoming, (True, REASON_TRUE, f"{shown} is active")), None
    return publish(False, upcoming, (True, REASON_FALSE, f"{shown} is inactive")), None


def _shown(active: bool) -> str:
    return "active" if active else "inactive"


def evaluate(
    spec: Mapping[str, Any] | None,
    generation: int,
    prior_status: Mapping[str, Any] | None,
    now: dt.datetime,
) -> tuple[dict[str, Any] | None, dt.datetime | None]:
    """The provider signature (`reconcile.Evaluate`) with nothing observed: an invalid spec is
    reported, anything else waits for the controller, which calls `evaluate_with`."""
    return evaluate_with(None, spec, generation, prior_status, now)


def _why(ref: Ref, seen: ScheduleObservation) -> str:
    if isinstance(seen, Unresolved):
        return f"{ref} at {ref.field}: {seen.reason.value} ({seen.message})"
    return f"{ref} at {ref.field}: unresolved"


def _unique(refs: Sequence[Ref]) -> list[Ref]:
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for ref in refs:
        if ref.key not in seen:
            seen.add(ref.key)
            unique.append(ref)
    return unique
