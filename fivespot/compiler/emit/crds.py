"""CustomResourceDefinitions: ScheduledCapacity, ScheduledMachine, the provider kinds, and the
tenant-policy params kind — each schema generated from the pydantic model that the controllers
also read objects with.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from fivespot.api.kinds import providers as provider_kinds
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds import machine_lifecycle
from fivespot.api.kinds import scheduled_machine
from fivespot.api.kinds import tenant_limit
from fivespot.api.providers import BUILTIN_PROVIDERS, BuiltinProvider
from fivespot.compiler.emit.base import CRDS, Artifact, labels
from fivespot.compiler.openapi import structural_schema
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import CustomProvider
from fivespot.policies import kubeversions

CATEGORY: Final = "fivespot"

_AGE: Final = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


@dataclass(frozen=True)
class KindInfo:
    group: str
    version: str
    kind: str
    plural: str
    short_names: tuple[str, ...]
    description: str
    spec: dict[str, Any]
    status: dict[str, Any] | None
    columns: tuple[dict[str, Any], ...]
    scope: str = "Namespaced"
    object_rules: tuple[Mapping[str, str], ...] = ()
    """`x-kubernetes-validations` at the root of the object's schema."""
    external: bool = False
    """A kind whose CRD the team installs (a custom provider with `crd: external`): its
    consumers may read it, and fivespot compiles no CRD for it."""

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


SCHEDULED_CAPACITY: Final = KindInfo(
    group=scap.GROUP, version=scap.VERSION, kind=scap.KIND, plural=scap.PLURAL,
    short_names=scap.SHORT_NAMES,
    description="Gates one numeric capacity field on an object fivespot does not own, by a spot "
                "schedule. It never creates, deletes or owns the target.",
    spec=structural_schema(scap.ScheduledCapacitySpec),
    status=structural_schema(scap.ScheduledCapacityStatus),
    columns=(
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Written", "type": "integer", "jsonPath": ".status.writtenValue"},
        {"name": "Target", "type": "string", "jsonPath": ".spec.targetRef.kind"},
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule.kind"},
        {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
        {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName"},
        _AGE,
    ),
)

SCHEDULED_MACHINE: Final = KindInfo(
    group=scheduled_machine.GROUP, version=scheduled_machine.VERSION, kind=scheduled_machine.KIND,
    plural=scheduled_machine.PLURAL,
    short_names=scheduled_machine.SHORT_NAMES,
    description="A machine 5-Spot adds to and removes from the cluster by a spot schedule. "
                "fivespot installs this CRD because ScheduledCapacity reads status.nodeRef for "
                "host governance; 5-Spot's own controller reconciles it.",
    spec=structural_schema(scheduled_machine.ScheduledMachineSpec),
    status=structural_schema(scheduled_machine.ScheduledMachineStatus),
    columns=(
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Node", "type": "string", "jsonPath": ".status.nodeRef.name"},
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule.kind"},
        _AGE,
    ),
)

_MACHINE_SPEC: Final = structural_schema(machine_lifecycle.MachineSpec)
_MACHINE_STATUS: Final = structural_schema(machine_lifecycle.MachineStatus)
MACHINE_COLUMNS: Final = (
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
    {"name": "InSchedule", "type": "boolean", "jsonPath": ".status.inSchedule"},
    {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
    {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule.name"},
    {"name": "KillSwitch", "type": "boolean", "jsonPath": ".spec.killSwitch"},
    {"name": "Node", "type": "string", "jsonPath": ".status.nodeRef.name"},
    _AGE,
)


def reconciled_machine(repo: Repo) -> KindInfo:
    """ScheduledMachine when fivespot's machine controller reconciles it: the full schema, the
    embedded objects narrowed to the kinds the repo's MachineProvisioning allows."""
    assert repo.machines is not None
    spec = copy.deepcopy(_MACHINE_SPEC)
    for field, kinds in (("bootstrapSpec", repo.machines.spec.bootstrap),
                         ("infrastructureSpec", repo.machines.spec.infrastructure)):
        rule = machine_lifecycle.embedded_kind_rule(
            f"spec.{field}", [(k.group, k.kind) for k in kinds])
        spec["properties"][field].setdefault("x-kubernetes-validations", []).append(rule)
    return KindInfo(
        group=scheduled_machine.GROUP, version=scheduled_machine.VERSION, kind=scheduled_machine.KIND,
    plural=scheduled_machine.PLURAL,
        short_names=scheduled_machine.SHORT_NAMES,
        description="A CAPI Machine fivespot creates while a spot schedule says active, and "
                    "drains (cordon, evictions honouring PodDisruptionBudgets, nodeDrainTimeout) "
                    "and deletes when it does not.",
        spec=spec, status=_MACHINE_STATUS, columns=MACHINE_COLUMNS,
    )


_CONTRACT_STATUS: Final = structural_schema(provider_kinds.ContractStatus)
"""A custom kind's status: only `active` required, as the provider guide states the contract."""
_PROVIDER_COLUMNS: Final = (
    {"name": "Active", "type": "boolean", "jsonPath": ".status.active"},
    # A string, not a date: kubectl prints a date column as an age and a future time as
    # <invalid>; the RFC 3339 UTC text reads the same for any instant.
    {"name": "Next", "type": "string", "jsonPath": ".status.nextTransitionTime"},
    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
    _AGE,
)
_BUILTIN_PROVIDER_COLUMNS: Final = (
    *_PROVIDER_COLUMNS[:2],
    # While spec.override holds the schedule: until when (docs/explanation/providers.md).
    {"name": "Override", "type": "string", "jsonPath": ".status.overrideUntil"},
    *_PROVIDER_COLUMNS[2:],
)

@functools.cache  # a constant per kind, like TENANT_LIMIT; its schema costs ~6 ms to generate
def builtin_provider(kind: BuiltinProvider) -> KindInfo:
    provider = BUILTIN_PROVIDERS[kind]
    return KindInfo(
        group=provider.group, version=provider.version, kind=provider.kind,
        plural=provider.plural, short_names=provider.short_names,
        description=_doc(provider.spec_model), spec=structural_schema(provider.spec_model),
        status=structural_schema(provider.status_model), columns=_BUILTIN_PROVIDER_COLUMNS,
        object_rules=provider.object_rules,
    )


def custom_provider(provider: CustomProvider) -> KindInfo:
    return KindInfo(
        group=scap.PROVIDER_GROUP, version=provider.version, kind=provider.kind,
        plural=provider.plural_name, short_names=tuple(provider.short_names),
        description=provider.description or f"{provider.kind}: a spot-schedule provider.",
        spec=provider.spec_schema.as_dict() if provider.spec_schema is not None else {},
        status=_CONTRACT_STATUS, columns=_PROVIDER_COLUMNS, external=not provider.compiled,
    )


TENANT_LIMIT: Final = KindInfo(
    group=tenant_limit.GROUP, version=tenant_limit.VERSION, kind=tenant_limit.KIND,
    plural=tenant_limit.PLURAL, short_names=(), scope="Cluster",
    description=_doc(tenant_limit.TenantCapacityLimitSpec),
    spec=structural_schema(tenant_limit.TenantCapacityLimitSpec), status=None,
    columns=({"name": "MaxActive", "type": "integer", "jsonPath": ".spec.maxActiveValue"}, _AGE),
)


def provider_infos(repo: Repo) -> list[KindInfo]:
    return ([builtin_provider(k) for k in repo.builtin_providers]
            + [custom_provider(c) for c in repo.custom_providers])


def kinds(repo: Repo) -> list[KindInfo]:
    """Every CRD this repo installs, in a fixed order."""
    found: list[KindInfo] = []
    if repo.has_machines:
        found.append(reconciled_machine(repo))
    elif repo.has_capacity and repo.platform.spec.install_scheduled_machine_crd:
        found.append(SCHEDULED_MACHINE)
    if repo.has_capacity:
        found.append(SCHEDULED_CAPACITY)
    found += [info for info in provider_infos(repo) if not info.external]
    if repo.emits_vaps and repo.tenants:
        found.append(TENANT_LIMIT)
    return sorted(found, key=lambda k: k.name)


def crd(info: KindInfo) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string", "description": "Versioned schema of this object."},
        "kind": {"type": "string", "description": "The object's kind."},
        "metadata": {"type": "object"},
        "spec": info.spec,
    }
    if info.status is not None:
        properties["status"] = info.status
    root: dict[str, Any] = {
        "type": "object",
        "description": info.description,
        "properties": properties,
        "required": ["spec"],
    }
    if info.object_rules:
        root["x-kubernetes-validations"] = [dict(rule) for rule in info.object_rules]
    version: dict[str, Any] = {
        "name": info.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": root},
        "additionalPrinterColumns": list(info.columns),
    }
    if info.status is not None:
        version["subresources"] = {"status": {}}
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.kind.lower(),
        "categories": [CATEGORY],
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.name, "labels": labels("fivespot-crds")},
        "spec": {"group": info.group, "scope": info.scope, "names": names, "versions": [version]},
    }


def emit(repo: Repo) -> list[Artifact]:
    targets = kubeversions.targets_text(repo.platform.spec.kubernetes_versions())
    found = []
    for info in kinds(repo):
        obj = crd(info)
        obj["metadata"]["annotations"] = {kubeversions.TARGETS_ANNOTATION: targets}
        found.append(Artifact(CRDS, f"{CRDS}/{info.name}.yaml", obj))
    return found
