"""The names of fivespot's components and identities, shared by every emitter and the runtime.

One identity per component (seed 000: compromising one must not grant another's powers): the
capacity controller, the webhook, and one per built-in provider.
"""

from __future__ import annotations

from typing import Final

from compiler.spec import BuiltinProvider

CAPACITY_CONTROLLER: Final = "fivespot-capacity-controller"
WEBHOOK: Final = "fivespot-webhook"
BUNDLE_CONFIGMAP: Final = "fivespot-bundle"
BUNDLE_KEY: Final = "bundle.json"
BUNDLE_MOUNT: Final = "/etc/fivespot"
WEBHOOK_TLS_SECRET: Final = "fivespot-webhook-tls"
WEBHOOK_CONFIGURATION: Final = "fivespot-webhook"
METRICS_PORT: Final = 8080
WEBHOOK_PORT: Final = 8443

PROVIDER_COMMANDS: Final = {
    BuiltinProvider.MANUAL: "manual",
    BuiltinProvider.TIME_BASED: "time-based",
    BuiltinProvider.CAPITAL_MARKETS: "capital-markets",
}


def provider_component(kind: BuiltinProvider) -> str:
    return f"fivespot-provider-{PROVIDER_COMMANDS[kind]}"


def service_account_user(namespace: str, name: str) -> str:
    """The username the API server gives requests made by that ServiceAccount."""
    return f"system:serviceaccount:{namespace}:{name}"


def lease_name(component: str, partition: str) -> str:
    return f"{component}-{partition}"
