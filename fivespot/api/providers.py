"""The built-in schedule providers, listed once: kind, names, models, command and identity.

Every place that knows about a built-in provider reads this registry: the config repo's
`ScheduleProvider.spec.builtin` (its values), the CRD emitter (plural, short names, models), the
component list and the RBAC (command, identity), the provider controllers (which kind a command
reconciles) and the bundle. Adding a built-in provider is one entry here, its models in
`fivespot.api.kinds`, and its decision function in `fivespot.controllers.spotschedules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from pydantic import BaseModel

from fivespot.api.identities import provider_identity
from fivespot.api.kinds.composite import OBJECT_RULES as COMPOSITE_OBJECT_RULES
from fivespot.api.kinds.composite import CompositeScheduleSpec
from fivespot.api.kinds.providers import (
    VERSION,
    CapitalMarketsScheduleSpec,
    ManualScheduleSpec,
    ProviderStatus,
    TimeBasedSpotScheduleSpec,
)
from fivespot.api.kinds.scheduled_capacity import PROVIDER_GROUP


class BuiltinProvider(StrEnum):
    """A built-in provider, by kind (how a config repo names it in `spec.builtin`)."""

    MANUAL = "ManualSchedule"
    TIME_BASED = "TimeBasedSpotSchedule"
    CAPITAL_MARKETS = "CapitalMarketsSchedule"
    COMPOSITE = "CompositeSchedule"


@dataclass(frozen=True)
class ProviderKind:
    """One built-in provider kind: its CRD's names and models, and the process that runs it."""

    builtin: BuiltinProvider
    plural: str
    singular: str
    short_names: tuple[str, ...]
    spec_model: type[BaseModel]
    status_model: type[ProviderStatus]
    command: str
    """`fivespot provider <command>`; also names its Deployment, ServiceAccount and Leases."""
    reads_providers: bool = False
    """Whether its controller reads other provider kinds' status (CompositeSchedule's
    children): its identity may then get, list and watch every provider kind."""
    object_rules: tuple[Mapping[str, str], ...] = ()
    """`x-kubernetes-validations` of the object's root schema: rules that need
    `metadata.name` (CompositeSchedule's self-reference), which the spec's rules cannot see."""

    @property
    def kind(self) -> str:
        return self.builtin.value

    @property
    def group(self) -> str:
        return PROVIDER_GROUP

    @property
    def version(self) -> str:
        return VERSION

    @property
    def crd_name(self) -> str:
        """`<plural>.<group>`, the CRD's metadata.name."""
        return f"{self.plural}.{PROVIDER_GROUP}"

    @property
    def identity(self) -> str:
        """Deployment, ServiceAccount and lease-name prefix (`fivespot-provider-<command>`)."""
        return provider_identity(self.command)


MANUAL_SCHEDULE: Final = ProviderKind(
    BuiltinProvider.MANUAL, "manualschedules", "manualschedule", ("ms",), ManualScheduleSpec,
    ProviderStatus, "manual",
)
TIME_BASED_SPOT_SCHEDULE: Final = ProviderKind(
    BuiltinProvider.TIME_BASED, "timebasedspotschedules", "timebasedspotschedule", ("tbss",),
    TimeBasedSpotScheduleSpec, ProviderStatus, "time-based",
)
CAPITAL_MARKETS_SCHEDULE: Final = ProviderKind(
    BuiltinProvider.CAPITAL_MARKETS, "capitalmarketsschedules", "capitalmarketsschedule",
    ("cms",), CapitalMarketsScheduleSpec, ProviderStatus, "capital-markets",
)

COMPOSITE_SCHEDULE: Final = ProviderKind(
    BuiltinProvider.COMPOSITE, "compositeschedules", "compositeschedule", ("csch",),
    CompositeScheduleSpec, ProviderStatus, "composite", reads_providers=True,
    object_rules=COMPOSITE_OBJECT_RULES,
)

BUILTIN_PROVIDERS: Final[Mapping[BuiltinProvider, ProviderKind]] = MappingProxyType({
    p.builtin: p for p in (MANUAL_SCHEDULE, TIME_BASED_SPOT_SCHEDULE, CAPITAL_MARKETS_SCHEDULE,
                           COMPOSITE_SCHEDULE)
})
"""Every built-in provider, in declaration order; a test checks each BuiltinProvider has one."""

BY_COMMAND: Final[Mapping[str, ProviderKind]] = MappingProxyType({
    p.command: p for p in BUILTIN_PROVIDERS.values()
})
"""By command name: manual, time-based, capital-markets, composite."""
