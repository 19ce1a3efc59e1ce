"""Which fivespot components run for a repo, and under which identity: shared by RBAC and workloads.

A component is one binary with one Deployment and one ServiceAccount (compromising one must not
grant another's powers: docs/design/decisions/0001-one-identity-per-component.md). The RBAC emitter
and the workloads emitter both walk this one list, so a component can never get a Deployment
without its permissions or the reverse, and no identity exists for a component the repo does not
install (no consumer, no capacity controller).

Custom provider kinds are identities without a component: the platform team runs its own
provider Deployment, and fivespot only emits the least-privilege identity it should run as.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from fivespot.api.identities import (
    AUDIT_CONTROLLER,
    BUNDLE_KEY,
    BUNDLE_MOUNT,
    CAPACITY_CONTROLLER,
    MACHINE_CONTROLLER,
    WEBHOOK,
    WEBHOOK_PORT,
    lease_name,
)
from fivespot.api.providers import BUILTIN_PROVIDERS, BuiltinProvider
from fivespot.compiler.repo import Repo
from fivespot.compiler.spec import CustomProvider

MAX_NAME: Final = 63
"""Label values (app.kubernetes.io/name carries the component) are limited to 63 characters."""

BUNDLE_PATH: Final = f"{BUNDLE_MOUNT}/{BUNDLE_KEY}"


@dataclass(frozen=True)
class Component:
    """One binary: its name (Deployment, ServiceAccount, ClusterRole), its arguments, its scale."""

    name: str
    args: tuple[str, ...]
    replicas: int
    leases: tuple[str, ...]
    """Lease names it may hold, one per partition; empty for components that are not sharded."""
    serves_admission: bool = False
    provider_kind: BuiltinProvider | None = None
    """The kind a built-in provider reconciles; None for the other components."""
    reconciles_machines: bool = False
    """The machine controller (ScheduledMachine -> CAPI Machines)."""
    audits: bool = False
    """The audit controller (PolicyReports of what the policies in force deny)."""


def partition_leases(repo: Repo, component: str) -> tuple[str, ...]:
    return tuple(sorted(lease_name(component, p.name) for p in repo.platform.spec.partitions))


def controller(repo: Repo, name: str, command: str, *, reconciles_machines: bool = False,
               audits: bool = False) -> Component:
    """A sharded controller, run as `fivespot controller COMMAND`."""
    return Component(
        name=name,
        args=("controller", command, "--bundle", BUNDLE_PATH),
        replicas=repo.platform.spec.controller_replicas,
        leases=partition_leases(repo, name),
        reconciles_machines=reconciles_machines,
        audits=audits,
    )


def capacity_controller(repo: Repo) -> Component:
    return controller(repo, CAPACITY_CONTROLLER, "capacity")


def machine_controller(repo: Repo) -> Component:
    return controller(repo, MACHINE_CONTROLLER, "machine", reconciles_machines=True)


def audit_controller(repo: Repo) -> Component:
    return controller(repo, AUDIT_CONTROLLER, "audit", audits=True)


def builtin_provider(repo: Repo, kind: BuiltinProvider) -> Component:
    provider = BUILTIN_PROVIDERS[kind]
    name = provider.identity
    return Component(
        name=name,
        args=("provider", provider.command, "--bundle", BUNDLE_PATH),
        replicas=repo.platform.spec.controller_replicas,
        leases=partition_leases(repo, name),
        provider_kind=kind,
    )


def webhook(repo: Repo) -> Component:
    return Component(
        name=WEBHOOK,
        args=("webhook", "serve", "--bundle", BUNDLE_PATH, "--port", str(WEBHOOK_PORT)),
        replicas=repo.platform.spec.webhook.replicas,
        leases=(),
        serves_admission=True,
    )


def components(repo: Repo) -> list[Component]:
    """Every component the repo installs, sorted by name."""
    found = [builtin_provider(repo, kind) for kind in repo.builtin_providers]
    if repo.has_capacity:
        found.append(capacity_controller(repo))
        found.append(audit_controller(repo))
    if repo.has_machines:
        found.append(machine_controller(repo))
    if repo.has_webhook:
        found.append(webhook(repo))
    return sorted(found, key=lambda c: c.name)


def bounded_name(name: str) -> str:
    """`name`, or a prefix of it plus a short hash when it would not fit in a label value."""
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9].rstrip('-')}-{digest}"


def custom_provider_identity(provider: CustomProvider) -> str:
    """The ServiceAccount a custom provider's own Deployment runs as.

    The `custom-` prefix keeps it apart from the built-in providers' names whatever plural the
    platform team chooses (a plural `manual` would otherwise be `fivespot-provider-manual`).
    """
    return bounded_name(f"fivespot-custom-provider-{provider.plural_name}")


def custom_identities(repo: Repo) -> list[tuple[str, CustomProvider]]:
    return sorted(((custom_provider_identity(p), p) for p in repo.custom_providers if p.compiled),
                  key=lambda pair: pair[0])
