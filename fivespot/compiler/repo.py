"""A whole config repo, checked as a whole: the facts no single document can check on its own.

Exactly one Platform; names unique per kind; tenant policies naming consumers that exist and
never covering the same namespace twice; provider kinds unique. The result is sorted by name,
so everything emitted from it is independent of file names and file order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Iterable

from fivespot.api.kinds.scheduled_capacity import PROVIDER_GROUP
from fivespot.api.providers import BUILTIN_PROVIDERS, BuiltinProvider
from fivespot.compiler.diagnostics import CompileError, Diagnostic, Location, field_path
from fivespot.compiler.loader import LoadedDocument, LoadResult, SourceDocument
from fivespot.compiler.spec import (
    RESERVED_NAMESPACES,
    CapacityConsumer,
    CustomProvider,
    Enforcement,
    ExchangeCalendarSpec,
    Fixture,
    MachineProvisioning,
    Platform,
    TenantPolicy,
)


@dataclass(frozen=True, eq=False)
class CalendarDeclaration:
    """One `spec.calendars[i]` of a ScheduleProvider and where it was written, so a problem
    found while expanding it (at emit time) is reported on the line that declared it."""

    calendar: ExchangeCalendarSpec
    source: SourceDocument
    path: tuple[str | int, ...]
    """('spec', 'calendars', i) inside `source`."""

    def locate(self, *fields: str | int) -> Location:
        return self.source.locate(self.path + fields)

    def field(self, *fields: str | int) -> str:
        return field_path(self.path + fields)


@dataclass(frozen=True, eq=False)
class Repo:
    """A checked config repo. Compared and hashed by identity, so emitters can memoise on it."""

    platform: Platform
    consumers: tuple[CapacityConsumer, ...]
    builtin_providers: tuple[BuiltinProvider, ...]
    custom_providers: tuple[CustomProvider, ...]
    tenants: tuple[TenantPolicy, ...]
    fixtures: tuple[Fixture, ...]
    sources: dict[tuple[str, str], Location] = field(default_factory=dict, compare=False)
    custom_provider_sources: dict[str, tuple[SourceDocument, tuple[str | int, ...]]] = field(
        default_factory=dict, compare=False)
    """Custom provider kind -> the document and path of its declaration, to place errors."""
    calendars: tuple[CalendarDeclaration, ...] = ()
    """Every declared exchange calendar, in file order (the emitter sorts what it writes)."""
    machines: MachineProvisioning | None = None
    """The one MachineProvisioning, if any: fivespot then reconciles ScheduledMachines."""

    @property
    def namespace(self) -> str:
        return self.platform.spec.namespace

    @property
    def has_capacity(self) -> bool:
        """No CapacityConsumer, no capacity component: no CRD, controller, RBAC or Deployment."""
        return bool(self.consumers)

    @property
    def has_machines(self) -> bool:
        """No MachineProvisioning, no machine controller: the ScheduledMachine CRD stays thin."""
        return self.machines is not None

    @property
    def provider_kinds(self) -> tuple[str, ...]:
        return tuple(sorted([p.value for p in self.builtin_providers] +
                            [c.kind for c in self.custom_providers]))

    @property
    def emits_vaps(self) -> bool:
        return self.has_capacity and self.platform.spec.enforcement in (Enforcement.VAP, Enforcement.BOTH)

    @property
    def polyfill(self) -> bool:
        return self.has_capacity and self.platform.spec.enforcement in (Enforcement.WEBHOOK, Enforcement.BOTH)

    @property
    def has_webhook(self) -> bool:
        """The webhook guards capacity objects and targets; without consumers it has nothing to do."""
        return self.has_capacity

    def consumer(self, name: str) -> CapacityConsumer:
        return self._consumers_by_name[name]

    @functools.cached_property
    def _consumers_by_name(self) -> dict[str, CapacityConsumer]:
        return {c.metadata.name: c for c in self.consumers}


def assemble(loaded: LoadResult) -> Repo:
    """Check the repo as a whole; raise CompileError with every problem found (loading's too)."""
    diagnostics = list(loaded.diagnostics)
    by_kind: dict[str, list[LoadedDocument]] = {}
    for document in loaded.documents:
        by_kind.setdefault(document.kind, []).append(document)
    for documents in by_kind.values():
        diagnostics += _duplicate_names(documents)

    platforms = by_kind.get("Platform", [])
    if not platforms and "Platform" not in loaded.invalid_kinds and not loaded.unidentified:
        diagnostics.append(Diagnostic(Location(loaded.root, 0, 0), "kind",
                                      f"the repo needs exactly one Platform; none found in {loaded.root}"))
    for extra in platforms[1:]:
        diagnostics.append(Diagnostic(
            extra.source.locate(("kind",)), "kind",
            f"the repo needs exactly one Platform; another is at {platforms[0].source.locate(())}"))

    consumers = {d.name: d for d in by_kind.get("CapacityConsumer", [])}
    diagnostics += _consumer_kinds_unique(list(consumers.values()))
    tenants = by_kind.get("TenantPolicy", [])
    # a consumer that failed to load, or a document that could not be read, may be the one a
    # tenant names: its own error is reported, and a "no such consumer" would send the reader
    # looking for a typo that is not there
    all_consumers_loaded = "CapacityConsumer" not in loaded.invalid_kinds and not loaded.unidentified
    diagnostics += _tenant_references(tenants, consumers, all_consumers_loaded)
    diagnostics += _tenant_namespaces_disjoint(tenants)
    install = platforms[0].model.spec.namespace if platforms else None
    diagnostics += _tenant_namespaces_allowed(tenants, install)
    providers = by_kind.get("ScheduleProvider", [])
    builtin, custom, custom_sources, provider_problems = _providers(providers)
    diagnostics += provider_problems

    provisioning = by_kind.get("MachineProvisioning", [])
    for extra in provisioning[1:]:
        diagnostics.append(Diagnostic(
            extra.source.locate(("kind",)), "kind",
            "a repo has at most one MachineProvisioning (list every cluster and kind in it); "
            f"another is at {provisioning[0].source.locate(())}"))

    if diagnostics or not platforms:
        raise CompileError(diagnostics)
    sources = {(d.kind, d.name): d.source.locate(()) for d in loaded.documents}
    return Repo(
        platform=platforms[0].model,
        consumers=tuple(_sorted_models(consumers.values())),
        builtin_providers=tuple(sorted(builtin)),
        custom_providers=tuple(sorted(custom, key=lambda c: c.kind)),
        tenants=tuple(_sorted_models(tenants)),
        fixtures=tuple(_sorted_models(by_kind.get("Fixture", []))),
        sources=sources,
        custom_provider_sources=custom_sources,
        calendars=_calendars(providers),
        machines=provisioning[0].model if provisioning else None,
    )


def _sorted_models(documents: Iterable[LoadedDocument]) -> list[Any]:
    return [d.model for d in sorted(documents, key=lambda d: d.name)]


def _duplicate_names(documents: list[LoadedDocument]) -> list[Diagnostic]:
    first: dict[str, LoadedDocument] = {}
    problems = []
    for document in sorted(documents, key=lambda d: (d.source.file, d.source.index)):
        if document.name in first:
            problems.append(Diagnostic(
                document.source.locate(("metadata", "name")), "metadata.name",
                f"duplicate {document.kind} name {document.name!r}; "
                f"first defined at {first[document.name].source.locate(('metadata', 'name'))}"))
        else:
            first[document.name] = document
    return problems


def _consumer_kinds_unique(consumers: list[LoadedDocument]) -> list[Diagnostic]:
    seen: dict[tuple[str, str], LoadedDocument] = {}
    problems = []
    for document in sorted(consumers, key=lambda d: (d.source.file, d.source.index)):
        key = (document.model.spec.group, document.model.spec.resource)
        if key in seen:
            problems.append(Diagnostic(
                document.source.locate(("spec", "resource")), "spec.resource",
                f"{key[1]}.{key[0]} is already a consumer ({seen[key].name!r} at "
                f"{seen[key].source.locate(())}); list all its capacity paths there"))
        else:
            seen[key] = document
    return problems


def _tenant_references(tenants: list[LoadedDocument], consumers: dict[str, LoadedDocument],
                       all_loaded: bool) -> list[Diagnostic]:
    problems = []
    for tenant in tenants:
        for index, name in enumerate(tenant.model.spec.consumers):
            if name not in consumers:
                if not all_loaded:
                    continue
                known = ", ".join(sorted(consumers)) or "none are defined"
                problems.append(Diagnostic(
                    tenant.source.locate(("spec", "consumers", index)), f"spec.consumers[{index}]",
                    f"no CapacityConsumer named {name!r} (known: {known})"))
            elif tenant.model.spec.max_active_value > consumers[name].model.spec.max_active_value:
                problems.append(Diagnostic(
                    tenant.source.locate(("spec", "maxActiveValue")), "spec.maxActiveValue",
                    f"{tenant.model.spec.max_active_value} exceeds the maxActiveValue "
                    f"{consumers[name].model.spec.max_active_value} of consumer {name!r}"))
    return problems


def _tenant_namespaces_disjoint(tenants: list[LoadedDocument]) -> list[Diagnostic]:
    owner: dict[str, LoadedDocument] = {}
    problems = []
    for tenant in sorted(tenants, key=lambda d: (d.source.file, d.source.index)):
        for index, namespace in enumerate(tenant.model.spec.namespaces):
            if namespace in owner and owner[namespace] is not tenant:
                problems.append(Diagnostic(
                    tenant.source.locate(("spec", "namespaces", index)), f"spec.namespaces[{index}]",
                    f"namespace {namespace!r} is already covered by TenantPolicy "
                    f"{owner[namespace].name!r} at {owner[namespace].source.locate(())}; "
                    "a namespace has one tenant policy"))
            owner.setdefault(namespace, tenant)
    return problems


def _tenant_namespaces_allowed(tenants: list[LoadedDocument], install: str | None) -> list[Diagnostic]:
    """Kubernetes' own namespaces and fivespot's install namespace are nobody's tenancy."""
    problems = []
    for tenant in sorted(tenants, key=lambda d: (d.source.file, d.source.index)):
        for index, namespace in enumerate(tenant.model.spec.namespaces):
            if namespace in RESERVED_NAMESPACES:
                why = "is one of Kubernetes' own namespaces, which hold the cluster's own objects"
            elif namespace == install:
                why = ("is fivespot's install namespace (Platform spec.namespace), where its own "
                       "workloads run and its webhook decides nothing")
            else:
                continue
            problems.append(Diagnostic(
                tenant.source.locate(("spec", "namespaces", index)), f"spec.namespaces[{index}]",
                f"{namespace} {why}: it cannot be a tenant namespace (the capacity controller "
                "would be given patch on the consumers' objects there); name the team's own "
                "namespace"))
    return problems


def _providers(documents: list[LoadedDocument]) -> tuple[
        set[BuiltinProvider], list[CustomProvider],
        dict[str, tuple[SourceDocument, tuple[str | int, ...]]], list[Diagnostic]]:
    ordered = sorted(documents, key=lambda d: (d.source.file, d.source.index))
    listed: dict[BuiltinProvider, Location] = {}
    for document in ordered:
        for index, kind in enumerate(document.model.spec.builtin):
            listed.setdefault(kind, document.source.locate(("spec", "builtin", index)))
    custom: dict[str, tuple[CustomProvider, LoadedDocument]] = {}
    plurals: dict[str, str] = {}
    problems = []
    for document in ordered:
        for index, provider in enumerate(document.model.spec.custom):
            where = document.source.locate(("spec", "custom", index, "kind"))
            shadowed = _shadowed_builtin(provider, listed)
            if shadowed is not None:
                problems.append(Diagnostic(where, f"spec.custom[{index}].kind", shadowed))
            elif provider.kind in custom:
                problems.append(Diagnostic(where, f"spec.custom[{index}].kind",
                                           f"provider kind {provider.kind} is declared twice; first at "
                                           f"{custom[provider.kind][1].source.locate(())}"))
            elif provider.plural_name in plurals:
                problems.append(Diagnostic(
                    document.source.locate(("spec", "custom", index)), f"spec.custom[{index}].plural",
                    f"plural {provider.plural_name} is already the plural of provider kind "
                    f"{plurals[provider.plural_name]}; give this kind a plural of its own"))
            else:
                custom[provider.kind] = (provider, document)
                plurals[provider.plural_name] = provider.kind
    sources: dict[str, tuple[SourceDocument, tuple[str | int, ...]]] = {
        kind: (document.source, ("spec", "custom", document.model.spec.custom.index(c)))
        for kind, (c, document) in custom.items()}
    return set(listed), [c for c, _ in custom.values()], sources, problems


def _shadowed_builtin(provider: CustomProvider, listed: dict[BuiltinProvider, Location]) -> str | None:
    """Why a custom kind may not sit beside the built-in providers this repo installs: the same
    kind, plural or short name would replace the built-in's CRD (or make kubectl's short name
    ambiguous) and set two controllers writing one kind's status. A built-in's kind name that
    the repo does not install is free (the provider guide's own ManualSchedule, for one)."""
    for builtin, where in sorted(listed.items()):
        info = BUILTIN_PROVIDERS[builtin]
        crd = f"{info.plural}.{PROVIDER_GROUP}"
        clash = ("kind" if provider.kind == builtin.value else
                 "plural" if provider.plural_name == info.plural else
                 "short name" if set(provider.short_names) & set(info.short_names) else None)
        if clash is not None:
            harm = ("would make `kubectl get` of that short name ambiguous" if clash == "short name"
                    else "would replace the built-in's CRD and race its controller over status")
            return (f"{provider.kind} has the {clash} of fivespot's built-in provider "
                    f"{builtin.value} (CRD {crd}), which this repo installs (listed under "
                    f"builtin at {where}): a custom kind {harm}. Give your kind a name of its "
                    f"own (and its own plural and short names), or use the built-in "
                    f"{builtin.value} and drop this declaration")
    return None


def _calendars(documents: list[LoadedDocument]) -> tuple[CalendarDeclaration, ...]:
    return tuple(
        CalendarDeclaration(calendar, document.source, ("spec", "calendars", index))
        for document in sorted(documents, key=lambda d: (d.source.file, d.source.index))
        for index, calendar in enumerate(document.model.spec.calendars))
