"""The compiled bundle, as the webhook reads it: checked once at start, immutable afterwards.

The bundle (`compiler.emit.bundle`) is the only configuration the webhook has: the consumers'
allowlists, the capacity controller's identity, what host governance does, the namespaces the
webhook never decides, and (polyfill) the admission policies. Its policies are compiled here, at
start, by the same evaluator as `fivespot check`, so a request only evaluates and a bad bundle
stops the process before it serves anything instead of failing requests one by one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, cast

from policies.admission_eval import PolicyConfigError, PolicySet

SUPPORTED_BUNDLE_VERSION: Final = 1
DEFAULT_TIMEOUT_SECONDS: Final = 5
"""For a bundle compiled before it carried `webhook.timeoutSeconds` (the Platform's default)."""
HostGovernanceAction = Literal["Deny", "Warn"]


class BundleError(ValueError):
    """The bundle cannot be used; the message says which field and why."""


@dataclass(frozen=True)
class Consumer:
    """A governed target kind and what the capacity controller may change on it."""

    name: str
    group: str
    version: str
    kind: str
    resource: str
    capacity_paths: tuple[str, ...]
    max_active_value: int

    @property
    def path_segments(self) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(p.split(".")) for p in self.capacity_paths)


@dataclass(frozen=True, eq=False)
class Bundle:
    namespace: str
    consumers: tuple[Consumer, ...]
    host_governance: HostGovernanceAction
    polyfill: bool
    capacity_identity: str
    excluded_namespaces: frozenset[str]
    timeout_seconds: int
    """The compiled webhooks' timeoutSeconds: how long the API server waits for an answer."""
    policies: PolicySet | None
    """Compiled admission policies; None unless the polyfill is on."""

    def consumer_for(self, group: str, resource: str) -> Consumer | None:
        for consumer in self.consumers:
            if consumer.group == group and consumer.resource == resource:
                return consumer
        return None


def _field(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BundleError(f"{where}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def parse_bundle(data: Any) -> Bundle:
    """A Bundle from the decoded JSON; raises BundleError."""
    if not isinstance(data, Mapping):
        raise BundleError("bundle: expected a JSON object")
    version = data.get("bundleVersion")
    if version != SUPPORTED_BUNDLE_VERSION:
        raise BundleError(f"bundle.bundleVersion: {version!r} is not supported (this webhook "
                          f"reads version {SUPPORTED_BUNDLE_VERSION}); recompile with the same "
                          "fivespot release as the image")
    webhook = _field(data, "webhook", Mapping, "bundle")
    action = webhook.get("hostGovernance")
    if action not in ("Deny", "Warn"):
        raise BundleError(f"bundle.webhook.hostGovernance: {action!r} is not Deny or Warn")
    consumers = []
    for index, raw in enumerate(_field(data, "consumers", list, "bundle")):
        where = f"bundle.consumers[{index}]"
        if not isinstance(raw, Mapping):
            raise BundleError(f"{where}: expected an object")
        paths = _field(raw, "capacityPaths", list, where)
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise BundleError(f"{where}.capacityPaths: expected a non-empty list of paths")
        consumers.append(Consumer(
            name=_field(raw, "name", str, where), group=_field(raw, "group", str, where),
            version=_field(raw, "version", str, where), kind=_field(raw, "kind", str, where),
            resource=_field(raw, "resource", str, where), capacity_paths=tuple(paths),
            max_active_value=_field(raw, "maxActiveValue", int, where)))
    polyfill = _field(webhook, "polyfill", bool, "bundle.webhook")
    policies = None
    if polyfill:
        admission = _field(data, "admission", Mapping, "bundle")
        try:
            policies = PolicySet.compile(_field(admission, "policies", list, "bundle.admission"),
                                         _field(admission, "params", list, "bundle.admission"))
        except PolicyConfigError as error:
            raise BundleError(f"bundle.admission: {error}") from None
    excluded = _field(webhook, "excludedNamespaces", list, "bundle.webhook")
    timeout = webhook.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 30:
        raise BundleError(f"bundle.webhook.timeoutSeconds: {timeout!r} is not an integer from 1 "
                          "to 30")
    return Bundle(
        namespace=_field(data, "namespace", str, "bundle"),
        consumers=tuple(consumers),
        host_governance=cast(HostGovernanceAction, action),
        polyfill=polyfill,
        capacity_identity=_field(webhook, "capacityIdentity", str, "bundle.webhook"),
        excluded_namespaces=frozenset(str(n) for n in excluded),
        timeout_seconds=timeout,
        policies=policies,
    )


def load_bundle(path: Path) -> Bundle:
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
