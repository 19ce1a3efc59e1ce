"""The compiled bundle: the one document the webhook and the controllers are configured by.

`fivespot compile` builds a `Bundle` and writes `Bundle.to_json()` as `bundle.json` at the top of
OUT_DIR and into the `fivespot-bundle` ConfigMap mounted into every pod; every process reads it
back with `load_bundle`. One model, one parser, one error type, so what the compiler wrote and
what a process reads cannot drift apart. It carries the allowlists (consumers: group, kind,
resource, paths, drain counter, ceiling), the partitions, the installed provider kinds, the
webhook's settings and the admission objects its polyfill evaluates.

A process refuses to start on a bundle it does not understand rather than guess: an unknown
version could mean allowlist semantics it does not implement, and an unknown or mistyped field
names itself (`bundle.consumers[0].maxActiveValue: ...`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError
from pydantic.alias_generators import to_camel

from fivespot.api import fieldgovernance

BUNDLE_VERSION: Final = 1
"""The bundle format this build writes and reads."""

DEFAULT_TIMEOUT_SECONDS: Final = 5
HostGovernanceAction = Literal["Deny", "Warn"]


class BundleError(ValueError):
    """The bundle cannot be used; the message says which file, which field and why."""


class _Part(BaseModel):
    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=to_camel, frozen=True
    )


class Partition(_Part):
    """A named set of namespaces with its own Lease-elected leader."""

    name: StrictStr
    namespaces: tuple[StrictStr, ...] = ()


class Consumer(_Part):
    """A governed target kind (a CapacityConsumer) and what the capacity controller may change."""

    name: StrictStr
    group: StrictStr
    version: StrictStr
    kind: StrictStr
    resource: StrictStr
    capacity_paths: tuple[StrictStr, ...] = Field(min_length=1)
    drained_path: StrictStr | None = None
    max_active_value: StrictInt

    @property
    def path_segments(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(p.split(".")) for p in self.capacity_paths)

    @property
    def through_scale(self) -> bool:
        """Written through the `/scale` subresource (`fieldgovernance.through_scale`)."""
        return fieldgovernance.through_scale(self.group, self.kind, self.capacity_paths)


class Provider(_Part):
    """A schedule provider kind the compiled output installs (built-in or custom)."""

    group: StrictStr
    kind: StrictStr
    plural: StrictStr
    version: StrictStr


class EmbeddableKind(_Part):
    """A bootstrap or infrastructure kind a ScheduledMachine may embed."""

    group: StrictStr
    version: StrictStr
    kind: StrictStr
    resource: StrictStr


class Cluster(_Part):
    """A CAPI Cluster ScheduledMachines may join (its kubeconfig: `<name>-kubeconfig`)."""

    namespace: StrictStr
    name: StrictStr


class Machines(_Part):
    """What the machine controller may create (a `MachineProvisioning`), and where."""

    clusters: tuple[Cluster, ...] = Field(min_length=1)
    bootstrap: tuple[EmbeddableKind, ...] = Field(min_length=1)
    infrastructure: tuple[EmbeddableKind, ...] = Field(min_length=1)
    machine_version: StrictStr

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(sorted({c.namespace for c in self.clusters}))

    def allows_cluster(self, namespace: str, name: str) -> bool:
        return any((c.namespace, c.name) == (namespace, name) for c in self.clusters)

    def bootstrap_kind(self, group: str, kind: str) -> EmbeddableKind | None:
        return next((k for k in self.bootstrap if (k.group, k.kind) == (group, kind)), None)

    def infrastructure_kind(self, group: str, kind: str) -> EmbeddableKind | None:
        return next((k for k in self.infrastructure if (k.group, k.kind) == (group, kind)), None)


class WebhookSettings(_Part):
    host_governance: HostGovernanceAction
    polyfill: StrictBool
    capacity_identity: StrictStr
    """The username of the capacity controller's ServiceAccount (the target guard's subject)."""
    webhook_identity: StrictStr
    excluded_namespaces: tuple[StrictStr, ...]
    """Namespaces the webhook never decides (the install namespace and kube-system)."""
    timeout_seconds: StrictInt = Field(default=DEFAULT_TIMEOUT_SECONDS, ge=1, le=30)
    """The compiled webhooks' timeoutSeconds: how long the API server waits for an answer. A
    bundle compiled before it carried the field gets the Platform's default."""


class Admission(_Part):
    """The ValidatingAdmissionPolicies, bindings and params objects, as compiled."""

    policies: tuple[dict[str, Any], ...] = ()
    params: tuple[dict[str, Any], ...] = ()
    vaps: StrictBool = False
    """The output installs these as ValidatingAdmissionPolicies (enforcement `vap` or `both`):
    the controllers then judge by the ones in the cluster, which a GitOps sync changes at once,
    rather than by these copies, which change when the controllers roll out."""


class Bundle(_Part):
    bundle_version: Literal[1] = BUNDLE_VERSION
    namespace: StrictStr = Field(min_length=1)
    """The install namespace."""
    partitions: tuple[Partition, ...]
    consumers: tuple[Consumer, ...]
    providers: tuple[Provider, ...]
    webhook: WebhookSettings
    admission: Admission
    machines: Machines | None = None
    """Set when the repo declares MachineProvisioning (a machine controller is installed)."""

    def consumer_for(self, group: str, resource: str) -> Consumer | None:
        """The consumer of a group and resource (how admission requests name a kind)."""
        return next((c for c in self.consumers if (c.group, c.resource) == (group, resource)), None)

    def consumer_of_kind(self, group: str, kind: str) -> Consumer | None:
        """The consumer of a group and kind (how a ScheduledCapacity's targetRef names it). The
        compiler refuses two consumers for one group and kind, so the first match is the only one."""
        return next((c for c in self.consumers if (c.group, c.kind) == (group, kind)), None)

    def installs_provider(self, group: str, kind: str) -> bool:
        return any((p.group, p.kind) == (group, kind) for p in self.providers)

    def to_json(self) -> str:
        """The bundle as `fivespot compile` writes it: sorted keys, two-space indent."""
        data = self.model_dump(mode="json", by_alias=True)
        if data.get("machines") is None:
            data.pop("machines", None)  # a repo without machines compiles as it always did
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def parse_bundle(data: Any) -> Bundle:
    """A Bundle from decoded JSON; raises BundleError naming the field at fault."""
    if not isinstance(data, Mapping):
        raise BundleError("bundle: expected a JSON object")
    version = data.get("bundleVersion")
    if version != BUNDLE_VERSION or isinstance(version, bool):
        raise BundleError(f"bundle.bundleVersion: {version!r} is not supported (this build reads "
                          f"version {BUNDLE_VERSION}); recompile with the same fivespot release "
                          "as the image")
    try:
        return Bundle.model_validate(data)
    except ValidationError as error:
        raise BundleError("; ".join(_describe(e) for e in error.errors())) from None


def _describe(error: Mapping[str, Any]) -> str:
    path = "bundle"
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return f"{path}: {error['msg']}"


def load_bundle(path: Path) -> Bundle:
    """Read and parse a bundle file; raises BundleError starting with the file's path."""
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise BundleError(f"{path}: cannot read the bundle: {error.strerror}") from None
    except ValueError as error:
        raise BundleError(f"{path}: not JSON: {error}") from None
    try:
        return parse_bundle(data)
    except BundleError as error:
        raise BundleError(f"{path}: {error}") from None
