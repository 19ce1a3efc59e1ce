"""The names of fivespot's components and identities, shared by the compiler and the processes.

One identity per component (docs/design/decisions/0001-one-identity-per-component.md:
compromising one must not grant another's powers): the
capacity controller, the machine controller, the audit controller, the webhook, and one per built-in
provider (`fivespot.api.providers` lists them).
The compiler names Deployments, ServiceAccounts, Roles and Lease names with these; the running
processes look for the same names, so RBAC and what a process asks for cannot disagree.
"""

from __future__ import annotations

from typing import Final

CAPACITY_CONTROLLER: Final = "fivespot-capacity-controller"
MACHINE_CONTROLLER: Final = "fivespot-machine-controller"
AUDIT_CONTROLLER: Final = "fivespot-audit-controller"
WEBHOOK: Final = "fivespot-webhook"
BUNDLE_CONFIGMAP: Final = "fivespot-bundle"
BUNDLE_KEY: Final = "bundle.json"
BUNDLE_MOUNT: Final = "/etc/fivespot"
WEBHOOK_TLS_SECRET: Final = "fivespot-webhook-tls"
WEBHOOK_CONFIGURATION: Final = "fivespot-webhook"
METRICS_PORT: Final = 8080
WEBHOOK_PORT: Final = 8443
CREATE_ONLY: Final = ("kustomize.toolkit.fluxcd.io/ssa", "IfNotPresent")
"""The annotation (key, value) on an object the output creates for a process to fill, the
webhook's TLS Secret: Flux creates it once and never applies it again, and so does
`fivespot install`; Argo CD, which has no such option, ignores its data instead."""


def provider_identity(command: str) -> str:
    """A built-in provider's component name: `fivespot-provider-<command>`."""
    return f"fivespot-provider-{command}"


def reporting_controller(component: str) -> str:
    """The `reportingController` of a component's Events: `5spot.finos.org/` and the component
    name without its `fivespot-` prefix (`5spot.finos.org/capacity-controller`)."""
    return f"5spot.finos.org/{component.removeprefix('fivespot-')}"


def service_account_user(namespace: str, name: str) -> str:
    """The username the API server gives requests made by that ServiceAccount."""
    return f"system:serviceaccount:{namespace}:{name}"


def kubeconfig_secret(cluster: str) -> str:
    """The Secret CAPI writes a workload cluster's admin kubeconfig to (key `value`)."""
    return f"{cluster}-kubeconfig"


KUBECONFIG_SECRET_KEY: Final = "value"


def lease_name(component: str, partition: str) -> str:
    return f"{component}-{partition}"
