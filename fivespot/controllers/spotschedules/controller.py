"""A built-in provider's controller: the reconciler around the pure `evaluate` of its kind.

One process per provider kind, running as that provider's own ServiceAccount, which may read
the kind and write only its `/status`. The Manager (`fivespot.runtime.manager`) does the rest: an informer
on the kind in every namespace, whose every event queues the object's key (a spec edit takes
effect at once), one Lease per partition from the bundle, the queue and workers, the probes.

The reconcile reads the object (the newer of the cache and our own last write), asks
`reconcile.plan` what to write and when to look again, writes the status merge patch only when it
changed (conditional on the resourceVersion it computed from), and requeues the key exactly at the
next boundary: nothing polls, and a schedule with no boundary in sight costs nothing until one
arrives or the spec changes. On taking a partition every object of it is queued, so a boundary
missed during a failover is caught up at once; the informer's slow resync is the second clock.
The watch event of our own status write is not reconciled (`fivespot.runtime.ownwrites`): at a market
open, when every schedule flips in the same second, that halves the reconciles. The status is
the output; the only Events are an override's start and end (`override.events`), recorded once
the status write that tells them landed.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fivespot.api.bundle import Bundle
from fivespot.api.providers import BUILTIN_PROVIDERS, BuiltinProvider, ProviderKind
from fivespot.controllers.spotschedules import capital_markets, composite, manual, time_based
from fivespot.controllers.spotschedules.reconcile import Evaluate, Plan, plan
from fivespot.runtime.cache import Obj
from fivespot.runtime.manager import Manager, Primary
from fivespot.runtime.reconcile import Request, Result

log = logging.getLogger("fivespot.provider")

DEFAULT_WORKERS: Final = 8
"""Status writes are network-bound; enough workers keep a burst of boundaries (every schedule
following one exchange flips at its open) from queueing behind one round trip each. Measured in
bench/providers: 8 workers halve the p99 of a 700-object burst against 4."""
DEFAULT_RESYNC_S: Final = 600.0
"""The backstop clock. Requeues at boundaries carry the schedule; the resync only guards
against a missed event, so it can be slow: at 1,000 objects it costs a few tenths of a CPU
second each time."""


@dataclass(frozen=True)
class ProviderType:
    """A built-in provider: its kind (from the registry, `fivespot.api.providers`) and its pure decision."""

    kind: ProviderKind
    evaluate: Evaluate

    @property
    def command(self) -> str:
        return self.kind.command

    @property
    def component(self) -> str:
        """Deployment, ServiceAccount and lease-name prefix (`fivespot-provider-<command>`)."""
        return self.kind.identity


EVALUATORS: Final[Mapping[BuiltinProvider, Evaluate]] = {
    BuiltinProvider.MANUAL: manual.evaluate,
    BuiltinProvider.TIME_BASED: time_based.evaluate,
    BuiltinProvider.CAPITAL_MARKETS: capital_markets.evaluate,
    BuiltinProvider.COMPOSITE: composite.evaluate,
}
"""The decision of each built-in provider kind."""

PROVIDER_TYPES: Final = {
    kind.command: ProviderType(kind, EVALUATORS[kind.builtin]) for kind in BUILTIN_PROVIDERS.values()
}
"""By command name: manual, time-based, capital-markets, composite."""


def bundle_lists(bundle: Bundle, provider: ProviderType) -> bool:
    """Whether the compiled bundle installs this provider's kind (its CRD and RBAC exist)."""
    return bundle.installs_provider(provider.kind.group, provider.kind.kind)


class ProviderReconciler:
    """Reconciles one provider kind on a Manager."""

    def __init__(self, mgr: Manager, provider: ProviderType):
        self.mgr = mgr
        self.provider = provider
        self.kind = Primary(provider.kind.group, provider.kind.version, provider.kind.plural)
        self.informer = mgr.reconcile(self.kind, self)

    def plan(self, obj: Obj, now: dt.datetime) -> Plan:
        """What to write for `obj` at `now`: the kind's pure decision (a CompositeSchedule's
        reconciler adds what it observed of the children)."""
        return plan(obj, self.provider.evaluate, now)

    def reconcile(self, request: Request) -> Result | None:
        obj = request.current()
        if obj is None:
            return None
        decided = self.plan(obj, self.mgr.clock.now())
        if decided.patch is not None:
            error = self.mgr.write(request.key, obj, decided.patch)
            if error is not None:
                if error.not_found:
                    return None
                if error.conflict or error.transient:
                    return Result(retry=True)  # a conflict: the cache is behind, decide again
                raise error
            status = decided.patch.get("status", {})
            log.info("status written", extra={
                "controller": self.mgr.component, "key": request.key,
                "partition": request.partition,
                "active": status.get("active"),
                "nextTransitionTime": status.get("nextTransitionTime"),
            })
            for event in decided.events:
                self.mgr.record(obj, event.type, event.reason, event.note)
        # Measured from after the write, so a slow round trip does not push the boundary back;
        # exactly at the boundary (the kinds' boundaries are exact, not whole seconds).
        self.mgr.expect_write(request.key, decided.requeue_at)
        return self.mgr.requeue_at(decided.requeue_at, slack_s=0.0)
