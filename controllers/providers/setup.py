"""A built-in provider's Manager with its reconciler: the plain one, or CompositeSchedule's.

It sits above both reconcilers (`controller`, and `composite_controller`, which extends it), so
choosing between them makes no import circle.
"""

from __future__ import annotations

from controllers.providers.composite_controller import CompositeReconciler
from controllers.providers.controller import ProviderReconciler, ProviderType
from runtime.clock import SYSTEM_CLOCK, Clock
from runtime.kube import ApiClient
from runtime.manager import Manager, Settings


def provider_manager(api: ApiClient, provider: ProviderType, settings: Settings, *,
                     clock: Clock = SYSTEM_CLOCK) -> tuple[Manager, ProviderReconciler]:
    """A Manager running `provider`'s reconciler (CompositeSchedule's with its children's kinds
    watched: every provider kind the bundle installs)."""
    mgr = Manager(api, settings, component=provider.component,
                  reporting_controller=f"5spot.finos.org/{provider.component}", clock=clock)
    if provider.kind.reads_providers:
        return mgr, CompositeReconciler(
            mgr, provider, [(p.group, p.kind) for p in settings.bundle.providers])
    return mgr, ProviderReconciler(mgr, provider)
