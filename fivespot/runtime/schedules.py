"""Reading a provider reference through watches, the way every consumer of a provider must.

The capacity controller, the CompositeSchedule provider and the ScheduledMachine controller all
follow references `{apiVersion, kind, name}` into the provider group. This turns one reference
into an observation per the contract (`fivespot.api.provider_contract`): the kind is resolved by group +
kind in any served version (`KindWatches`), a kind whose CRD is not installed is unresolved
(`ProviderCRDNotInstalled`), and a kind still being resolved or a cache not yet synced is
`LookupFailed` — never "absent", so nothing flips on a consumer's own start-up.
"""

from __future__ import annotations

from datetime import datetime

from fivespot.api.provider_contract import (
    LookupFailed,
    ScheduleObservation,
    observe_schedule,
    published_next_transition,
)
from fivespot.runtime.kindwatches import NOT_SERVED, KindWatches


def read_schedule(
    watches: KindWatches,
    namespace: str,
    group: str,
    kind: str,
    name: str,
    *,
    reference: str = "spec.schedule",
) -> ScheduleObservation:
    """The provider object `namespace/name` of `kind` in `group`, observed from `watches`' cache.

    Asks `watches` to watch the kind if it does not yet; `reference` names the consumer's field
    in the messages."""
    watches.want(group, kind)
    watched = watches.get(group, kind)
    if watched is None or watched.informer is None:
        if watched is not None and watched.last_error == NOT_SERVED:
            return observe_schedule(None, crd_installed=False, reference=reference)
        error = (watched.last_error if watched else None) or "pending"
        return LookupFailed(f"resolving {kind}.{group}: {error}")
    if not watched.informer.has_synced():
        return LookupFailed(f"the {kind} cache has not synced yet")
    return observe_schedule(watched.informer.get(namespace, name), reference=reference)


def read_next_transition(
    watches: KindWatches, namespace: str, group: str, kind: str, name: str
) -> datetime | None:
    """The referenced provider's published nextTransitionTime, from `watches`' cache."""
    watched = watches.get(group, kind)
    if watched is None or watched.informer is None:
        return None
    return published_next_transition(watched.informer.get(namespace, name))
