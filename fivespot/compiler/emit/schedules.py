"""Exchange calendars, compiled into CapitalMarketsSchedule objects in the tenant namespaces.

A ScheduleProvider may declare `calendars:` (an exchange code, the years, the namespaces). The
compiler expands each into the exchange's concrete sessions, holidays and early closes with
`exchange_calendars` and writes one CapitalMarketsSchedule per namespace into the `schedules`
layer. Expanding here rather than in the controller means the dates the controller follows are
in the pull request: a library upgrade that moves a holiday shows up as a diff to review, and the
controller needs neither the library nor the network.

The objects get their own layer, synced last, because they live in tenant namespaces the
platform does not own: a namespace that does not exist yet fails that layer alone, never the
CRDs, RBAC or workloads before it.

Everything that can go wrong (the optional library missing, an unknown exchange, a calendar
the CapitalMarketsSchedule vocabulary cannot express, overrides that make the spec invalid, the
same object declared twice) is reported as a diagnostic on the line that declared the calendar.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import ValidationError

from fivespot.api.kinds.providers import VERSION, CapitalMarketsScheduleSpec
from fivespot.api.kinds.scheduled_capacity import PROVIDER_GROUP
from fivespot.api.providers import CAPITAL_MARKETS_SCHEDULE, BuiltinProvider
from fivespot.compiler.calendars import (
    CalendarBuildFailed,
    CalendarsUnavailable,
    InexpressibleCalendar,
    UnknownExchange,
    resolve_exchange,
)
from fivespot.compiler.diagnostics import CompileError, Diagnostic
from fivespot.compiler.emit.base import SCHEDULES, Artifact, metadata
from fivespot.compiler.repo import CalendarDeclaration, Repo

COMPONENT: Final = "fivespot-calendar"
EXCHANGE_ANNOTATION: Final = f"{PROVIDER_GROUP}/exchange"
YEARS_ANNOTATION: Final = f"{PROVIDER_GROUP}/calendar-years"
_KIND_FILE: Final = CAPITAL_MARKETS_SCHEDULE.kind.lower()


def emit(repo: Repo) -> list[Artifact]:
    """One CapitalMarketsSchedule per declared calendar and namespace; CompileError listing
    every calendar that cannot be expanded."""
    problems: list[Diagnostic] = []
    artifacts: dict[tuple[str, str], Artifact] = {}
    declared_at: dict[tuple[str, str], CalendarDeclaration] = {}
    installed = BuiltinProvider.CAPITAL_MARKETS in repo.builtin_providers
    for declaration in repo.calendars:
        if not installed:
            problems.append(Diagnostic(
                declaration.locate(), declaration.field(),
                "a calendar compiles into CapitalMarketsSchedule objects, which need their CRD "
                "and controller: add CapitalMarketsSchedule to spec.builtin"))
            continue
        spec, problem = _expand(declaration)
        if problem is not None:
            problems.append(problem)
            continue
        calendar = declaration.calendar
        for index, namespace in enumerate(calendar.namespaces):
            key = (namespace, calendar.name)
            if key in declared_at:
                problems.append(Diagnostic(
                    declaration.locate("namespaces", index), declaration.field("namespaces", index),
                    f"CapitalMarketsSchedule {namespace}/{calendar.name} is already declared at "
                    f"{declared_at[key].locate('name')}; give this calendar another name"))
                continue
            declared_at[key] = declaration
            artifacts[key] = _artifact(declaration, namespace, spec)
    if problems:
        raise CompileError(problems)
    return [artifacts[key] for key in sorted(artifacts)]


def _expand(declaration: CalendarDeclaration) -> tuple[dict[str, Any], Diagnostic | None]:
    """The CapitalMarketsSchedule spec of one calendar, or the diagnostic saying why not."""
    calendar = declaration.calendar
    years = calendar.years
    try:
        spec = resolve_exchange({"exchange": calendar.exchange, **calendar.overrides()},
                                years.first, years.last)
    except (CalendarsUnavailable, UnknownExchange, CalendarBuildFailed) as error:
        return {}, Diagnostic(declaration.locate("exchange"), declaration.field("exchange"),
                              str(error))
    except InexpressibleCalendar as error:
        return {}, Diagnostic(declaration.locate("exchange"), declaration.field("exchange"),
                              f"cannot be written as a CapitalMarketsSchedule: {error}")
    except ValueError as error:
        # The library's own refusals of a year range (pandas' date bounds, for instance).
        return {}, Diagnostic(declaration.locate("years"), declaration.field("years"),
                              f"{calendar.exchange} cannot be expanded for {years.first}.."
                              f"{years.last}: {error}")
    try:
        CapitalMarketsScheduleSpec.model_validate(spec)
    except ValidationError as error:
        details = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: "
            f"{str(item['msg']).removeprefix('Value error, ')}"
            for item in error.errors(include_url=False))
        return {}, Diagnostic(declaration.locate(), declaration.field(),
                              f"{calendar.exchange} {years.first}..{years.last} with these "
                              f"overrides is not a valid CapitalMarketsSchedule: {details}")
    return spec, None


def _artifact(declaration: CalendarDeclaration, namespace: str, spec: dict[str, Any]) -> Artifact:
    calendar = declaration.calendar
    obj = {
        "apiVersion": f"{PROVIDER_GROUP}/{VERSION}",
        "kind": CAPITAL_MARKETS_SCHEDULE.kind,
        "metadata": metadata(calendar.name, COMPONENT, namespace, annotations={
            EXCHANGE_ANNOTATION: calendar.exchange,
            YEARS_ANNOTATION: f"{calendar.years.first}-{calendar.years.last}",
        }),
        "spec": spec,
    }
    return Artifact(SCHEDULES, f"{SCHEDULES}/{namespace}/{calendar.name}.{_KIND_FILE}.yaml", obj)
