"""Which reconciler a built-in provider's Manager runs: `ProviderReconciler`, or for the kind
that reads other providers (CompositeSchedule) `CompositeReconciler` with its children's kinds
watched. Its own module so that neither reconciler module imports the other's subclass.
"""

from __future__ import annotations

from fivespot.controllers.spotschedules.composite_controller import CompositeReconciler
from fivespot.controllers.spotschedules.controller import ProviderReconciler, ProviderType
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock
from fivespot.runtime.kube import ApiClient
from fivespot.runtime.manager import Manager, Settings


def provider_manager(api: ApiClient, provider: ProviderType, settings: Settings, *,
                     clock: Clock = SYSTEM_CLOCK) -> tuple[Manager, ProviderReconciler]:
    """A Manager running `provider`'s reconciler (CompositeSchedule's with its children's kinds
    watched: every provider kind the bundle installs)."""
    mgr = Manager(api, settings, component=provider.component, clock=clock)
    if provider.kind.reads_providers:
        return mgr, CompositeReconciler(
            mgr, provider, [(p.group, p.kind) for p in settings.bundle.providers])
    return mgr, ProviderReconciler(mgr, provider)
