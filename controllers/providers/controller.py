"""A built-in provider's controller: the thin I/O shell around the pure `evaluate` of its kind.

One process per provider kind, running as that provider's own ServiceAccount, which may read
the kind and write only its `/status`. On the shared runtime:
- an Informer watches the kind in every namespace; every event queues the object's key, so a
  spec edit takes effect at once;
- the reconcile reads the cached object, asks `reconcile.plan` what to write and when to look
  again, writes the status merge patch only when it changed (with the object's resourceVersion
  as a precondition), and requeues the key exactly at the next boundary: nothing polls, and a
  schedule with no boundary in sight costs nothing until one arrives or the spec changes;
- one Lease per partition (from the bundle); a replica reconciles a namespace only while it
  leads that namespace's partition, checks that again right before every write, and queues the
  whole partition when it starts leading (whatever the previous leader left behind is
  re-evaluated, and a boundary missed during a failover is caught up at once);
- the informer's slow resync re-delivers every object as a backstop (the second clock);
- the watch event of the controller's own status write is not reconciled (`runtime.echoes`): it
  carries exactly the resourceVersion the patch answered with, so it is the object the reconcile
  computed from plus the status it decided (the patch was conditional on the resourceVersion it
  computed from), and that reconcile already requeued the key at the next boundary. At a market
  open, when every schedule flips in the same second, this halves the reconciles (one per
  object, not two). No Events are recorded: a status write is the whole output.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from api.bundle import Bundle
from api.providers import BUILTIN_PROVIDERS, BuiltinProvider, ProviderKind
from controllers.providers import capital_markets, composite, manual, time_based
from controllers.providers.reconcile import Evaluate, Plan, plan, requeue_delay
from runtime import kube, metrics
from runtime.cache import DELETED, MODIFIED, Obj
from runtime.echoes import OwnWrites
from runtime.clock import SYSTEM_CLOCK, Clock
from runtime.controller import Controller, Result
from runtime.informer import (
    DEFAULT_STALL_AFTER_S,
    DEFAULT_WATCH_TIMEOUT_S,
    Informer,
)
from runtime.kube import ApiClient
from runtime.leaderelection import LeaderElector, Timing, leases_for
from runtime.partitions import Partitions
from runtime.workqueue import WorkQueue

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
    """A built-in provider: its kind (from the registry, `api.providers`) and its pure decision."""

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


class ProviderController:
    """Informer + work queue + workers + per-partition leader election for one provider kind."""

    def __init__(
        self,
        api_client: ApiClient,
        provider: ProviderType,
        partitions: Partitions,
        *,
        lease_namespace: str,
        identity: str,
        workers: int = DEFAULT_WORKERS,
        resync_s: float = DEFAULT_RESYNC_S,
        stall_after_s: float = DEFAULT_STALL_AFTER_S,
        watch_timeout_s: float = DEFAULT_WATCH_TIMEOUT_S,
        timing: Timing = Timing(),
        clock: Clock = SYSTEM_CLOCK,
    ):
        self.api_client = api_client
        self.provider = provider
        self.partitions = partitions
        self.name = provider.component
        self._clock = clock
        self._plural = provider.kind.plural
        self.informer = Informer(api_client, provider.kind.group, provider.kind.version, self._plural,
                                 resync_s=resync_s, stall_after_s=stall_after_s,
                                 watch_timeout_s=watch_timeout_s, clock=clock)
        self.queue = WorkQueue(self.name, clock=clock)
        self.elector = LeaderElector(
            api_client, lease_namespace, leases_for(self.name, partitions.campaign), identity,
            timing=timing, clock=clock, controller=self.name,
            on_started_leading=self._started_leading,
            on_stopped_leading=self._stopped_leading,
            drain=lambda partition, timeout_s: self.controller.wait_idle(
                lambda key: self._partition(kube.split_key(key)[0]) == partition, timeout_s),
        )
        self.controller = Controller(self.name, self.queue, self.reconcile, workers=workers)
        self._writes = metrics.WRITES.labels(controller=self.name, what="status")
        self._own_writes = OwnWrites()
        self.informer.add_handler(self._on_event)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self, stop: threading.Event, sync_timeout_s: float | None = None) -> bool:
        """Sync the cache, then start the workers and the campaign; False if `stop` was set (or
        the timeout passed) before the cache synced."""
        self.informer.start()
        deadline = None if sync_timeout_s is None else self._clock.monotonic() + sync_timeout_s
        while not self.informer.wait_synced(0.2):
            if stop.is_set() or (deadline is not None and self._clock.monotonic() > deadline):
                return False
        self.controller.start()
        self.elector.start()
        return True

    def stop(self) -> None:
        """Stop acting first (release the leases), then drain the workers and the watch."""
        self.elector.stop(release=True)
        self.controller.stop()
        self.informer.stop()

    def alive(self) -> bool:
        return self.controller.alive()

    def ready(self) -> bool:
        return self.informer.healthy()

    # --- events and leadership ------------------------------------------------------------------

    def _partition(self, namespace: str | None) -> str | None:
        partition = self.partitions.of(namespace)
        return partition if partition in self.partitions.campaign else None

    def _on_event(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        key = kube.object_key(obj)
        if event_type == DELETED:
            self._own_writes.forget(key)
            return
        if event_type == MODIFIED:
            meta = obj.get("metadata")
            if self._own_writes.is_echo(key, meta.get("resourceVersion")
                                        if isinstance(meta, Mapping) else None):
                return
        self._queue(key)

    def _queue(self, key: str) -> None:
        partition = self._partition(kube.split_key(key)[0])
        if partition is not None and self.elector.is_leading(partition):
            self.queue.add(key)

    def _started_leading(self, partition: str) -> None:
        keys = [kube.object_key(o) for o in self.informer.list()]
        for key in keys:
            if self._partition(kube.split_key(key)[0]) == partition:
                self.queue.add(key)
        log.info("leading partition; queued its objects",
                 extra={"controller": self.name, "partition": partition})

    def _stopped_leading(self, partition: str) -> None:
        # Keys already queued are dropped by `reconcile`, which checks leadership first.
        log.info("no longer leading partition", extra={"controller": self.name,
                                                       "partition": partition})

    # --- the reconcile --------------------------------------------------------------------------

    def plan(self, obj: Obj, now: dt.datetime) -> Plan:
        """What to write for `obj` at `now`: the kind's pure decision (a CompositeSchedule's
        controller adds what it observed of the children)."""
        return plan(obj, self.provider.evaluate, now)

    def reconcile(self, key: str) -> Result | None:
        namespace, name = kube.split_key(key)
        partition = self._partition(namespace)
        if partition is None or not self.elector.is_leading(partition):
            return None
        obj = self.informer.get(namespace, name)
        if obj is None:
            return None
        decided = self.plan(obj, self._clock.now())
        if decided.patch is not None:
            if not self.elector.is_leading(partition):
                return None
            path = kube.resource_path(self.provider.kind.group, self.provider.kind.version,
                                      self._plural, namespace, name, "status")
            version: str | None = None
            self._own_writes.begin(key)
            try:
                written = kube.merge_patch(self.api_client, path, decided.patch,
                                           field_manager=self.name)
                meta = written.get("metadata")
                answered = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
                version = answered if isinstance(answered, str) else None
            except kube.ApiError as error:
                if error.not_found:
                    return None
                if error.conflict or error.transient:
                    # A conflict means the cache is behind; the watch event is on its way.
                    return Result(retry=True)
                raise
            finally:
                if self._own_writes.landed(key, version):
                    self._queue(key)
            self._writes.inc()
            status = decided.patch.get("status", {})
            log.info("status written", extra={
                "controller": self.name, "key": key, "partition": partition,
                "active": status.get("active"),
                "nextTransitionTime": status.get("nextTransitionTime"),
            })
        # Measured from after the write, so a slow round trip does not push the boundary back.
        return Result(requeue_after_s=requeue_delay(decided.requeue_at, self._clock.now()))
