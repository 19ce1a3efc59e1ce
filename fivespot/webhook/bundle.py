"""The compiled bundle as the webhook serves it: checked once at start, immutable afterwards.

The bundle (`fivespot.api.bundle`, parsed there) is the only configuration the webhook has: the consumers'
allowlists, the capacity controller's identity, what host governance does, the namespaces the
webhook never decides, and (polyfill) the admission policies. Those policies are compiled here,
at start, by the same evaluator as `fivespot check`, so a request only evaluates and a bad bundle
stops the process before it serves anything instead of failing requests one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fivespot.api import bundle as api_bundle
from fivespot.api.bundle import Bundle, BundleError, Consumer, HostGovernanceAction
from fivespot.policies.admission_eval import PolicyConfigError, PolicySet


@dataclass(frozen=True, eq=False)
class WebhookBundle:
    """The bundle, and its admission policies compiled (None unless the polyfill is on)."""

    bundle: Bundle
    policies: PolicySet | None

    @property
    def namespace(self) -> str:
        return self.bundle.namespace

    @property
    def host_governance(self) -> HostGovernanceAction:
        return self.bundle.webhook.host_governance

    @property
    def polyfill(self) -> bool:
        return self.bundle.webhook.polyfill

    @property
    def capacity_identity(self) -> str:
        return self.bundle.webhook.capacity_identity

    @property
    def excluded_namespaces(self) -> tuple[str, ...]:
        return self.bundle.webhook.excluded_namespaces

    @property
    def timeout_seconds(self) -> int:
        return self.bundle.webhook.timeout_seconds

    def consumer_for(self, group: str, resource: str) -> Consumer | None:
        return self.bundle.consumer_for(group, resource)


def prepare(bundle: Bundle) -> WebhookBundle:
    """Compile the bundle's policies when the polyfill is on; raises BundleError."""
    if not bundle.webhook.polyfill:
        return WebhookBundle(bundle, None)
    try:
        policies = PolicySet.compile(list(bundle.admission.policies), list(bundle.admission.params))
    except PolicyConfigError as error:
        raise BundleError(f"bundle.admission: {error}") from None
    return WebhookBundle(bundle, policies)


def load_bundle(path: Path) -> WebhookBundle:
    """`fivespot.api.bundle.load_bundle`, then `prepare`; raises BundleError naming the file."""
    loaded = api_bundle.load_bundle(path)
    try:
        return prepare(loaded)
    except BundleError as error:
        raise BundleError(f"{path}: {error}") from None
