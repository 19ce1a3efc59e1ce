"""The Manager: what every fivespot controller process shares, in the shape controller-runtime
made standard. A controller is a reconciler (`reconcile(key) -> Result`) plus its watches; the
Manager owns everything around it:

- the informers (`informer`, `kind_watches`), started and synced before any work, stopped last,
  and together the readiness probe (a stalled watch is not ready);
- the work queue and its worker pool (`fivespot.runtime.workers`), and the primary kind's event handling
  (`reconcile`): the controller's own writes coming back are not reconciled, a predicate (say,
  "the generation changed") filters the rest, and a `related` hook queues other keys an event
  concerns;
- leader election, one Lease per partition: a key is queued and reconciled only while this
  replica leads its partition; on taking a partition every object of it is queued; before
  handing one back its in-flight reconciles finish (`drain`);
- the one own-writes mechanism (`fivespot.runtime.ownwrites`): decisions rest on the newer of the cache and
  our own last write (`current`), and `write` records each answer;
- the one conditional writer (`writes`, `fivespot.runtime.writes`) every write a controller makes goes
  through, and on it the primary object's writer (`write`): a merge patch conditional on the
  resourceVersion the decision read, so a write decided on anything older — above all one
  from a replica that lost its lease while the write was on its way — fails with 409 instead of
  overwriting a newer one (the guarantee `fivespot.runtime.leaderelection` rests on);
- the event recorder (`record`), the health server (`serve_probes`) and the `fivespot_*` metrics.

Stopping is ordered: stop acting (the workers finish what is in flight), the controller's own
`on_stopping` hooks (a held-back status sent), release the leases, stop the event sender and the
watches.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from fivespot.api.bundle import Bundle
from fivespot.api.identities import reporting_controller
from fivespot.runtime import kube
from fivespot.runtime.cache import DELETED, Obj, strip
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock
from fivespot.runtime.events import EventRecorder, EventType, reference
from fivespot.runtime.health import HealthServer
from fivespot.runtime.informer import (
    DEFAULT_RESYNC_S,
    DEFAULT_STALL_AFTER_S,
    DEFAULT_WATCH_TIMEOUT_S,
    EventHandler,
    Informer,
)
from fivespot.runtime.kindwatches import KindWatches
from fivespot.runtime.kube import ApiClient, ResolvedKind
from fivespot.runtime.leaderelection import LeaderElector, Timing, leases_for
from fivespot.runtime.ownwrites import OwnWrites, Seen
from fivespot.runtime.partitions import Partitions
from fivespot.runtime.reconcile import Reconciler, Request, Result, requeue_after
from fivespot.runtime.workers import Workers
from fivespot.runtime.workqueue import WorkQueue
from fivespot.runtime.writes import Writes

log = logging.getLogger("fivespot.manager")

REQUEUE_SLACK_S: Final = 0.05
"""Deadlines are whole seconds; look again just after one, not just before."""


@dataclass(frozen=True)
class Settings:
    """Everything a controller process is configured with (the CLI fills it from flags and the
    bundle)."""

    bundle: Bundle
    identity: str
    namespace: str
    """Where the partition Leases live (the install namespace)."""
    partitions: Partitions
    timing: Timing = field(default_factory=Timing)
    workers: int = 4
    resync_s: float = DEFAULT_RESYNC_S
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    watch_timeout_s: float = DEFAULT_WATCH_TIMEOUT_S
    resolve_retry_s: float = 5.0


Predicate = Callable[[str, Obj, Obj | None], bool]
"""`(event type, object, old object)`: does this event of the primary kind need a reconcile?"""
Related = Callable[[str, Obj, Obj | None], None]
"""Queues the other keys an event of the primary kind concerns."""


@dataclass(frozen=True)
class Primary:
    """The kind a controller reconciles, as `kube.resource_path` names it."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str | None = None,
             subresource: str | None = None) -> str:
        return kube.resource_path(self.group, self.version, self.plural, namespace, name,
                                  subresource)


class Manager:
    """One per controller process: informers, queue, workers, leases, own writes, events."""

    def __init__(self, api: ApiClient, settings: Settings, *, component: str,
                 clock: Clock = SYSTEM_CLOCK):
        self.api = api
        self.settings = settings
        self.component = component
        self.clock = clock
        self.partitions = settings.partitions
        self.queue = WorkQueue(component, clock=clock)
        self.own = OwnWrites()
        self.writes = Writes(api, component, self._may_act)
        """The one conditional writer: every write this controller makes (`fivespot.runtime.writes`)."""
        self.events = EventRecorder(api, reporting_controller(component), settings.identity,
                                    clock=clock)
        self.elector = LeaderElector(
            api, settings.namespace, leases_for(component, settings.partitions.campaign),
            settings.identity, timing=settings.timing, clock=clock, controller=component,
            on_started_leading=self._started_leading, on_stopped_leading=self._stopped_leading,
            drain=self._drain)
        self._informers: list[Informer] = []
        self._kind_watches: list[KindWatches] = []
        self._primary: Informer | None = None
        self._kind: Primary | None = None
        self._workers: Workers | None = None
        self._reconciler: Reconciler | None = None
        self._on_started: list[Callable[[str], None]] = []
        self._on_stopped: list[Callable[[str], None]] = []
        self._on_handing_back: list[Callable[[str], None]] = []
        self._on_stopping: list[Callable[[], None]] = []
        self._readiness: list[Callable[[], bool]] = []
        self._health: HealthServer | None = None

    # --- building a controller ------------------------------------------------------------------

    def informer(self, group: str, version: str, plural: str,
                 namespace: str | None = None) -> Informer:
        """An informer the Manager starts, waits for, reports on and stops."""
        s = self.settings
        informer = Informer(self.api, group, version, plural, namespace, resync_s=s.resync_s,
                            stall_after_s=s.stall_after_s, watch_timeout_s=s.watch_timeout_s,
                            clock=self.clock)
        self._informers.append(informer)
        return informer

    def kind_watches(self, on_event: EventHandler,
                     on_change: Callable[[tuple[str, str]], None] | None = None) -> KindWatches:
        """Watches of kinds resolved by group + kind in any served version (providers,
        targets), each kind's informer built and run by the Manager."""
        watches = KindWatches(self.api, self._informer_for, on_event,
                              retry_s=self.settings.resolve_retry_s, on_change=on_change)
        self._kind_watches.append(watches)
        return watches

    def reconcile(self, kind: Primary, reconciler: Reconciler, *,
                  predicate: Predicate | None = None, related: Related | None = None,
                  key: Callable[[Obj], str] | None = None) -> Informer:
        """Make `reconciler` the controller of `kind` (one per Manager): its informer, whose
        events queue their keys, minus our own writes coming back and what `predicate` turns
        away; `related` queues the other keys an event concerns. `key` maps an object to the
        key reconciled (default its own `namespace/name`; the audit reconciles a namespace)."""
        if self._primary is not None:
            raise ValueError("a Manager reconciles one kind")
        primary = self.informer(kind.group, kind.version, kind.plural)
        self._primary, self._kind, self._reconciler = primary, kind, reconciler

        def on_event(event: str, obj: Obj, old: Obj | None) -> None:
            own_key = kube.object_key(obj)
            seen = self.own.observe(own_key, obj, deleted=event == DELETED)
            if seen.seen is Seen.OWN:
                return
            if predicate is not None and not predicate(event, obj, old):
                return
            if related is not None:
                related(event, obj, old)
            if seen.seen is Seen.HELD:
                return
            if key is not None:
                self.enqueue(key(obj))
            elif event != DELETED:
                self.enqueue(own_key)

        primary.add_handler(on_event)
        self._workers = Workers(self.component, self.queue, self.reconcile_key,
                                workers=self.settings.workers)
        return primary

    def on_started_leading(self, hook: Callable[[str], None]) -> None:
        """Called with a partition this replica just took, before its objects are queued."""
        self._on_started.append(hook)

    def on_stopped_leading(self, hook: Callable[[str], None]) -> None:
        """Called with a partition this replica no longer leads."""
        self._on_stopped.append(hook)

    def on_handing_back(self, hook: Callable[[str], None]) -> None:
        """Called with a partition whose in-flight reconciles have finished, before its lease
        is handed back (what is held back for it goes out now)."""
        self._on_handing_back.append(hook)

    def on_stopping(self, hook: Callable[[], None]) -> None:
        """Called once the workers have stopped, before the leases are released."""
        self._on_stopping.append(hook)

    def add_readiness(self, check: Callable[[], bool]) -> None:
        self._readiness.append(check)

    # --- what a reconcile uses ------------------------------------------------------------------

    @property
    def reconciler(self) -> Reconciler:
        assert self._reconciler is not None, "call reconcile() first"
        return self._reconciler

    @property
    def primary(self) -> Informer:
        assert self._primary is not None, "call reconcile() first"
        return self._primary

    def partition_of(self, namespace: str | None) -> str | None:
        """The partition a namespace belongs to, if this replica campaigns for it."""
        partition = self.partitions.of(namespace)
        return partition if partition in self.partitions.campaign else None

    def leading(self, partition: str | None) -> bool:
        """May this replica act for `partition` now? Checked before a reconcile and each write."""
        return partition is not None and self.elector.is_leading(partition)

    def holds(self, partition: str | None) -> bool:
        """Still holding `partition`'s lease (leading, or handing it back with work finishing)."""
        return partition is not None and self.elector.holds(partition)

    def request(self, key: str) -> Request | None:
        """The Request for a queued key, or None when this replica must not reconcile it now: a
        key without a namespace, one of a namespace no partition of ours takes, or one of a
        partition this replica does not lead (keys queued before it stopped leading)."""
        namespace, name = kube.split_key(key)
        if namespace is None:
            return None
        partition = self.partition_of(namespace)
        if partition is None or not self.leading(partition):
            return None
        return Request(namespace, name, partition, functools.partial(self.current, key))

    def reconcile_key(self, key: str) -> Result | None:
        """One reconcile of a queued key (what the workers run): the reconciler is called only
        with a Request of a partition this replica leads."""
        request = self.request(key)
        if request is None:
            return None
        return self.reconciler.reconcile(request)

    def _may_act(self, partition: str, held: bool) -> AbstractContextManager[bool]:
        return self.elector.writing(partition, held)

    def enqueue(self, key: str, *, later: bool = False) -> None:
        """Queue `key` if this replica leads its partition (`later`: behind the rest)."""
        if self.leading(self.partition_of(kube.split_key(key)[0])):
            if later:
                self.queue.add_later(key)
            else:
                self.queue.add(key)

    def enqueue_objects(self, objs: Iterable[Obj]) -> None:
        for obj in objs:
            self.enqueue(kube.object_key(obj))

    def current(self, key: str) -> Obj | None:
        """The primary object to decide on: the newer of the cache and our own last write."""
        namespace, name = kube.split_key(key)
        return self.own.current(key, self.primary.get(namespace, name))

    def write(self, key: str, obj: Obj, patch: Mapping[str, Any], *,
              subresource: str | None = "status", what: str = "status", held: bool = False,
              timeout: float | tuple[float, float] | None = kube.DEFAULT_TIMEOUT,
              ) -> kube.ApiError | None:
        """A merge patch of the primary object `key` (its status, or with `subresource` None
        the object itself) through the conditional writer (`writes`), conditional on the
        resourceVersion of `obj`, the version the decision read, and recorded as our own write.
        None when it landed — or was not sent because this replica no longer leads the
        partition (`held`: still holds the lease, for the record of work already done) — else
        the error (409: the object changed since; decide again)."""
        namespace, name = kube.split_key(key)
        partition = self.partition_of(namespace)
        if partition is None:
            return None
        assert self._kind is not None
        self.own.begin(key)
        answer: Obj | None = None
        try:
            sent = self.writes.patch(partition, self._kind.path(namespace, name, subresource),
                                     patch, resource_version(obj), what=what, held=held,
                                     timeout=timeout)
            answer = strip(sent) if sent is not None else None
        except kube.ApiError as error:
            level = logging.INFO if error.conflict or error.not_found else logging.WARNING
            log.log(level, f"{what} write failed; retrying",
                    extra={"key": key, "error": str(error)[:300]})
            return error
        finally:
            if self.own.landed(key, answer):
                self.enqueue(key)
        return None

    def record(self, obj: Obj, type_: EventType, reason: str, note: str,
               regarding: Mapping[str, Any] | None = None) -> None:
        """A Kubernetes Event about `obj` (or `regarding`), sent off the reconcile path."""
        self.events.record(regarding if regarding is not None else reference(obj), type_, reason,
                           note)

    def requeue_at(self, at: datetime | None, *, slack_s: float = REQUEUE_SLACK_S) -> Result:
        """A Result that looks again `slack_s` after `at`, measured from now (None: only on an
        event)."""
        return Result(requeue_after_s=requeue_after(at, self.clock.now(), slack_s))

    def expect_write(self, key: str, at: datetime | None) -> None:
        """A write for `key` is due at `at` (a schedule's next flip): a partition resting without
        its lease (decision 0043) takes it back just before, so the boundary's first write does
        not wait for a lease write (`LeaderElector.expect_write`)."""
        if at is None:
            return  # most reconciles: a schedule without a published next flip
        partition = self.partition_of(kube.split_key(key)[0])
        if partition is not None and self.leading(partition):
            self.elector.expect_write(partition, at)

    # --- leadership -----------------------------------------------------------------------------

    def _started_leading(self, partition: str) -> None:
        for hook in self._on_started:
            hook(partition)
        if self._primary is not None:
            for obj in self._primary.list():
                key = kube.object_key(obj)
                if self.partition_of(kube.split_key(key)[0]) == partition:
                    self.queue.add(key)
        log.info("leading partition; queued its objects",
                 extra={"controller": self.component, "partition": partition})

    def _stopped_leading(self, partition: str) -> None:
        # Keys already queued are dropped by `reconcile_key`, which checks leadership first.
        for hook in self._on_stopped:
            hook(partition)
        log.info("no longer leading partition",
                 extra={"controller": self.component, "partition": partition})

    def _drain(self, partition: str, timeout_s: float) -> bool:
        """Before `partition`'s lease is handed back (this replica already stopped acting for
        it): let its in-flight reconciles finish, then the hooks send what is held back."""
        def mine(key: str) -> bool:
            return self.partition_of(kube.split_key(key)[0]) == partition

        if self._workers is not None and not self._workers.wait_idle(mine, timeout_s):
            return False
        for hook in self._on_handing_back:
            hook(partition)
        return True

    # --- lifecycle ------------------------------------------------------------------------------

    def _informer_for(self, resolved: ResolvedKind) -> Informer:
        s = self.settings
        return Informer(self.api, resolved.group, resolved.version, resolved.plural,
                        resync_s=s.resync_s, stall_after_s=s.stall_after_s,
                        watch_timeout_s=s.watch_timeout_s, clock=self.clock)

    def _all_informers(self) -> list[Informer]:
        return self._informers + [i for w in self._kind_watches for i in w.informers()]

    def start(self, stop: threading.Event | None = None, sync_timeout_s: float = 30.0) -> bool:
        """Watch, wait for the caches (at most `sync_timeout_s`, then start anyway: an informer
        that syncs later delivers its objects as events), then work and campaign. False when
        `stop` was set before the caches synced."""
        if self._workers is None:
            raise ValueError("nothing to run: call reconcile() first")
        for informer in self._informers:
            informer.start()
        for watches in self._kind_watches:
            watches.resolve_now()
            watches.start()
        deadline = self.clock.monotonic() + sync_timeout_s
        for informer in self._all_informers():
            while not informer.wait_synced(0.2):
                if stop is not None and stop.is_set():
                    return False
                if self.clock.monotonic() > deadline:
                    log.warning("cache not synced yet; starting anyway",
                                extra={"resource": informer.name})
                    break
        self.events.start()
        self._workers.start()
        self.elector.start()
        return True

    def stop(self) -> None:
        """Stop acting (in-flight reconciles finish), run the stopping hooks, release the
        leases, then stop sending events and watching."""
        if self._workers is not None:
            self._workers.stop()
        for hook in self._on_stopping:
            hook()
        self.elector.stop(release=True)
        self.events.stop()
        for watches in self._kind_watches:
            watches.stop()
        for informer in self._informers:
            informer.stop()
        if self._health is not None:
            self._health.stop()

    def ready(self) -> bool:
        """Every watch healthy (none stalled), and the controller's own checks."""
        return all(i.healthy() for i in self._all_informers()) and all(
            check() for check in self._readiness)

    def alive(self) -> bool:
        """The workers run (before the primary cache synced there are none to judge)."""
        return (self._workers is not None and self._workers.alive()) or (
            self._primary is not None and not self._primary.has_synced())

    def serve_probes(self, port: int) -> int:
        """/healthz (workers), /readyz (caches) and /metrics on `port` (0: any); the port."""
        self._health = HealthServer(port)
        self._health.add_liveness("workers", self.alive)
        self._health.add_readiness("caches", self.ready)
        self._health.start()
        return self._health.port

    @property
    def workers(self) -> Workers:
        assert self._workers is not None, "call reconcile() first"
        return self._workers


def resource_version(obj: Obj) -> str:
    """The resourceVersion a write of `obj` is conditional on (every object the API server or a
    cache hands out has one)."""
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    if not isinstance(version, str) or not version:
        raise ValueError(f"{kube.object_key(obj)} has no metadata.resourceVersion: a write of it "
                         "cannot be conditional")
    return version
