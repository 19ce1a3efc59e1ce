"""The capacity controller's I/O shell around `decide`: watch, observe, decide, write, requeue.

One reconcile of one ScheduledCapacity:

1. only if this replica leads the object's partition (checked again right before each write);
2. observe: the object and its prior status, the provider's status, the target's field and
   drain counter, the namespace's ScheduledMachines — from informer caches, turning "cache not
   synced" and API errors into LookupFailed, never into "absent"; where the cache has not yet
   caught up with our own last write of an object, that write's answer is what is observed;
3. `decide` (pure); a transient answer retries with backoff and writes nothing;
4. before the active value goes to a ScheduledCapacity with spec.nodeName, the
   ScheduledMachines are listed fresh and the decision is re-made; the write is re-checked
   against the compiled allowlist (`refusal`) and sent as exactly one JSON merge patch of the
   single field;
5. only after the write landed, the status patch (only if the status changed, conditional on
   the resourceVersion the decision read), then Kubernetes Events, then a requeue at the
   decision's deadline (a handback timeout). After a target write the status and Events are
   held back (`PendingStatus`, the queue's later lane) so a burst's target writes go first; the
   next reconcile of the object sends them before deciding anything.

Event-driven reactions map provider, target and ScheduledMachine events back to the
ScheduledCapacities that reference them through cache indexes, and the informers' slow resync
re-queues everything as a backstop. All state lives in status, so a restart loses nothing and
replays nothing: an unchanged world produces no write and no status patch.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from api.bundle import Bundle, Consumer
from api.fieldgovernance import Claim, Governs, Standing, claim_of, standing, target_key
from api.identities import CAPACITY_CONTROLLER
from api.kinds import scheduled_capacity as scap
from api.kinds import scheduled_machine as sm
from api.kinds.scheduled_capacity import (
    INACTIVE_VALUE,
    ConditionStatus,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
    api_group,
)
from api.provider_contract import LookupFailed, ScheduleObservation
from controllers.capacity import conditions as cond
from controllers.capacity.decide import Decision, Event, decide, refusal, write_failed
from controllers.capacity.observations import (
    DecisionInput,
    InvalidSpec,
    MachinesObservation,
    TargetFound,
    TargetNotFound,
    TargetObservation,
    observe_machines,
    observe_target,
    parse_spec,
    parse_status,
)
from controllers.capacity.patches import status_patch, target_patch
from runtime import kube, metrics
from runtime.cache import DELETED, MODIFIED, Obj, strip
from runtime.clock import SYSTEM_CLOCK, Clock
from runtime.controller import Controller, Result
from runtime.fresh import fresh_list
from runtime.informer import DEFAULT_STALL_AFTER_S, DEFAULT_WATCH_TIMEOUT_S, Informer
from runtime.kindwatches import KindWatches
from runtime.kube import ApiClient, ResolvedKind
from runtime.leaderelection import LeaderElector, Timing, leases_for
from runtime.partitions import Partitions
from runtime.schedules import read_schedule
from runtime.workqueue import WorkQueue

log = logging.getLogger("fivespot.capacity")

FIELD_MANAGER: Final = CAPACITY_CONTROLLER
REPORTING_CONTROLLER: Final = "5spot.finos.org/capacity-controller"
REQUEUE_SLACK_S: Final = 0.05
"""Deadlines are whole seconds; look again just after one, not just before."""

BY_SCHEDULE: Final = "schedule"
BY_TARGET: Final = "target"
BY_NODE: Final = "node"


@dataclass(frozen=True)
class Settings:
    """Everything the controller is configured with (the CLI fills it from flags and bundle)."""

    bundle: Bundle
    identity: str
    namespace: str
    """Install namespace: where the partition Leases live."""
    partitions: Partitions
    timing: Timing = field(default_factory=Timing)
    workers: int = 4
    resync_s: float = 300.0
    stall_after_s: float = DEFAULT_STALL_AFTER_S
    watch_timeout_s: float = DEFAULT_WATCH_TIMEOUT_S
    resolve_retry_s: float = 5.0


def ref_key(namespace: str, api_version: object, kind: object, name: object) -> str:
    """How a reference is indexed: namespace/group/kind/name (the field-governance target key,
    so the target index also finds the ScheduledCapacities that claim a field of one object)."""
    return target_key(namespace, str(api_version), str(kind), str(name))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def scap_references(obj: Obj) -> dict[str, list[str]]:
    """The index keys of one ScheduledCapacity, from its raw spec (which may be invalid)."""
    meta = _mapping(obj.get("metadata"))
    namespace = str(meta.get("namespace", ""))
    spec = _mapping(obj.get("spec"))
    found: dict[str, list[str]] = {BY_SCHEDULE: [], BY_TARGET: [], BY_NODE: []}
    schedule, target = _mapping(spec.get("schedule")), _mapping(spec.get("targetRef"))
    if schedule:
        found[BY_SCHEDULE].append(ref_key(namespace, schedule.get("apiVersion", ""),
                                          schedule.get("kind"), schedule.get("name")))
    if target:
        found[BY_TARGET].append(ref_key(namespace, target.get("apiVersion", ""),
                                        target.get("kind"), target.get("name")))
    if isinstance(spec.get("nodeName"), str):
        found[BY_NODE].append(f"{namespace}/{spec['nodeName']}")
    return found


def object_ref_key(obj: Obj) -> str:
    meta = _mapping(obj.get("metadata"))
    return ref_key(str(meta.get("namespace", "")), obj.get("apiVersion", ""), obj.get("kind"),
                   meta.get("name"))


def machine_node(obj: Obj | None) -> str | None:
    if obj is None:
        return None
    node = _mapping(_mapping(obj.get("status")).get("nodeRef")).get("name")
    return node if isinstance(node, str) else None


def newer(a: Obj | None, b: Obj | None) -> Obj | None:
    """The more recent of two versions of one object, by resourceVersion (etcd revisions);
    `b` on a tie."""
    if a is None or b is None:
        return a or b
    try:
        ra = int(_mapping(a.get("metadata")).get("resourceVersion", 0))
        rb = int(_mapping(b.get("metadata")).get("resourceVersion", 0))
    except (TypeError, ValueError):
        return a
    return b if rb >= ra else a


@dataclass(frozen=True)
class OwnTargetWrite:
    """The target as our last merge patch of it returned it. Until the target watch delivers
    that version, the cache holds an older copy, and a decision made on that copy can be wrong
    in a way nothing would correct: with the active value just written and a ScheduledMachine
    taking the node (or the schedule closing) a moment later, the cached copy still reads 0, so
    "hand back" looks done and no zero write is sent, and the echo of our active write — which
    would show the active value — is `quiet`, skipped as carrying nothing new. So every decision
    reads the newer of the cached copy and this one (`known_target`)."""

    obj: Obj
    quiet: bool
    """A write of the active value: its own watch event needs no reconcile (a zero write's does:
    the handback completes on seeing the 0 land)."""

    def made(self, obj: Obj) -> bool:
        """`obj` is exactly the version this write made, coming back."""
        revision = _revision(obj)
        return revision is not None and revision == _revision(self.obj)

    def is_echo(self, obj: Obj) -> bool:
        """`obj` is exactly the version this write made, coming back, and it needs no reconcile."""
        return self.quiet and self.made(obj)


def known_target(cached: Obj | None, own: OwnTargetWrite | None) -> Obj | None:
    """The target as this replica knows it: the cached copy, or our own last write of it when
    the cache has not caught up with that yet (an object deleted since is gone from the cache,
    and our copy of it is dropped on the deletion's event)."""
    if own is None:
        return cached
    return newer(cached, own.obj) if cached is not None else own.obj


@dataclass(frozen=True)
class PendingStatus:
    """The status patch (and Events) of a decision whose target write has landed, held back so
    that a burst's target writes go first (`WorkQueue.add_later`). The next reconcile of the key,
    whichever lane it comes from, sends it before deciding anything, so no decision is ever made
    on a status that is missing a write already made."""

    obj: Obj
    """The object as the decision read it: the patch is conditional on its resourceVersion."""
    raw: Mapping[str, Any] | None
    status: ScheduledCapacityStatus
    prior: ScheduledCapacityStatus | None
    events: tuple[Event, ...]


def guard_write(
    spec: ScheduledCapacitySpec | InvalidSpec, entry: Consumer | None, decision: Decision
) -> str | None:
    """Why the shell must not send `decision.write`, or None. Defence in depth: `decide` already
    refused, but the write is the security-relevant act, so the bundle check is repeated here."""
    if decision.write is None:
        return None
    if isinstance(spec, InvalidSpec):
        return "the spec is invalid"
    problem = refusal(spec, entry)
    if problem is not None:
        return problem.message
    if decision.write_path != spec.capacity.path:
        return f"the decision names {decision.write_path}, not spec.capacity.path"
    if decision.write not in (INACTIVE_VALUE, spec.capacity.active_value):
        return f"{decision.write} is neither 0 nor spec.capacity.activeValue"
    return None


class CapacityController:
    """Wires informers, the queue, the workers, the elector and the reconcile."""

    def __init__(self, api_client: ApiClient, settings: Settings, *, clock: Clock = SYSTEM_CLOCK):
        self.api = api_client
        self.settings = settings
        self.clock = clock
        self.partitions = settings.partitions
        self.queue = WorkQueue("capacity")
        self.scaps = self._informer(scap.GROUP, scap.VERSION, scap.PLURAL)
        self.machines = self._informer(sm.GROUP, sm.VERSION, sm.PLURAL)
        for index in (BY_SCHEDULE, BY_TARGET, BY_NODE):
            self.scaps.add_index(index, _indexer(index))
        self.scaps.add_handler(self._on_scap)
        self.machines.add_handler(self._on_machine)
        self.providers = KindWatches(api_client, self._informer_for, self._on_provider,
                                     retry_s=settings.resolve_retry_s, on_change=self._on_kind_changed)
        self.targets = KindWatches(api_client, self._informer_for, self._on_target,
                                   retry_s=settings.resolve_retry_s, on_change=self._on_kind_changed)
        for provider in settings.bundle.providers:
            self.providers.want(provider.group, provider.kind)
        for consumer in settings.bundle.consumers:
            self.targets.want(consumer.group, consumer.kind)
        self.elector = LeaderElector(
            api_client, settings.namespace,
            leases_for(CAPACITY_CONTROLLER, self.partitions.campaign), settings.identity,
            timing=settings.timing, clock=clock, controller=CAPACITY_CONTROLLER,
            on_started_leading=self._on_started_leading, drain=self._drain,
        )
        self.workers = Controller(CAPACITY_CONTROLLER, self.queue, self.reconcile,
                                  workers=settings.workers)
        self._own_writes: dict[str, Obj] = {}
        """Objects as our own status writes returned them, until the watch delivers that version."""
        self._own_targets: dict[str, OwnTargetWrite] = {}
        """Target ref key -> our last merge patch of it, until the target watch delivers that
        version or a newer one."""
        self._pending: dict[str, PendingStatus] = {}
        """Key -> the status of a landed target write, not yet sent (`PendingStatus`)."""
        self._own_lock = threading.Lock()
        self._events: queue.Queue[tuple[Obj, Event]] = queue.Queue(maxsize=1000)
        self._stop = threading.Event()
        self._event_thread = threading.Thread(target=self._emit_events, name="events", daemon=True)
        self._label = CAPACITY_CONTROLLER
        for rule, condition in (("host", cond.HOST_GOVERNANCE_CONFLICT), ("field", cond.FIELD_GOVERNANCE_CONFLICT)):
            metrics.GOVERNANCE_CONFLICTED.labels(controller=self._label, rule=rule).set_function(
                functools.partial(self._conflicted, condition))

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self, sync_timeout_s: float = 30.0) -> None:
        """Start watching, wait for the own caches, then campaign and work."""
        self.scaps.start()
        self.machines.start()
        self.providers.resolve_now()
        self.targets.resolve_now()
        self.providers.start()
        self.targets.start()
        for informer in (self.scaps, self.machines, *self.providers.informers(), *self.targets.informers()):
            if not informer.wait_synced(sync_timeout_s):
                log.warning("cache not synced yet; starting anyway", extra={"resource": informer.name})
        self._event_thread.start()
        self.workers.start()
        self.elector.start()

    def stop(self) -> None:
        """Stop acting first (workers drain, held-back statuses are sent), then release the
        leases, then stop watching."""
        self.workers.stop()
        self.flush_pending()
        self._stop.set()
        self.elector.stop(release=True)
        self.providers.stop()
        self.targets.stop()
        self.scaps.stop()
        self.machines.stop()

    def ready(self) -> bool:
        informers = [self.scaps, self.machines, *self.providers.informers(), *self.targets.informers()]
        return all(i.healthy() for i in informers)

    def alive(self) -> bool:
        return self.workers.alive()

    # --- event handlers: map every change to the ScheduledCapacities it concerns ----------------

    def _enqueue(self, key: str, *, later: bool = False) -> None:
        namespace, _ = kube.split_key(key)
        partition = self.partitions.of(namespace)
        if partition is not None and self.elector.is_leading(partition):
            if later:
                self.queue.add_later(key)
            else:
                self.queue.add(key)

    def _enqueue_objects(self, objs: Iterable[Obj]) -> None:
        for obj in objs:
            self._enqueue(kube.object_key(obj))

    def _on_scap(self, event: str, obj: Obj, old: Obj | None) -> None:
        key = kube.object_key(obj)
        with self._own_lock:
            own = self._own_writes.get(key)
            if own is not None and (event == DELETED or newer(own, obj) is obj):
                del self._own_writes[key]  # the cache has caught up with our own write
        if event == MODIFIED and old is not None:
            generation = _mapping(obj.get("metadata")).get("generation")
            if generation == _mapping(old.get("metadata")).get("generation"):
                return  # a status-only change (usually our own write): nothing new to decide
        self._enqueue_rivals(key, obj, old)
        if event != DELETED:
            self._enqueue(key)

    def _enqueue_rivals(self, key: str, obj: Obj, old: Obj | None) -> None:
        """A ScheduledCapacity that appears, goes or changes its target changes the standing of
        the others naming the same target (one field, one governor): the governor's deletion
        hands the field over on the next reconcile of the one that yielded."""
        targets = set(scap_references(obj)[BY_TARGET])
        if old is not None:
            targets.update(scap_references(old)[BY_TARGET])
        for target in targets:
            self._enqueue_objects(o for o in self.scaps.by_index(BY_TARGET, target)
                                  if kube.object_key(o) != key)

    def _on_provider(self, event: str, obj: Obj, old: Obj | None) -> None:
        self._enqueue_objects(self.scaps.by_index(BY_SCHEDULE, object_ref_key(obj)))

    def _on_target(self, event: str, obj: Obj, old: Obj | None) -> None:
        key = object_ref_key(obj)
        with self._own_lock:
            own = self._own_targets.get(key)
            if own is not None and (event == DELETED or newer(own.obj, obj) is obj):
                del self._own_targets[key]  # the cache has caught up with our own write
        if event == MODIFIED and own is not None and own.is_echo(obj):
            return  # exactly the revision our own active write made: nothing else changed
        if event == MODIFIED and own is not None and own.made(obj):
            # our own zero write coming back: the handback completes on it, after the burst
            for scap_obj in self.scaps.by_index(BY_TARGET, key):
                self._enqueue(kube.object_key(scap_obj), later=True)
            return
        self._enqueue_objects(self.scaps.by_index(BY_TARGET, key))

    def _on_machine(self, event: str, obj: Obj, old: Obj | None) -> None:
        namespace = str(_mapping(obj.get("metadata")).get("namespace", ""))
        for node in {machine_node(obj), machine_node(old)} - {None}:
            self._enqueue_objects(self.scaps.by_index(BY_NODE, f"{namespace}/{node}"))

    def _on_kind_changed(self, group_kind: tuple[str, str]) -> None:
        group, kind = group_kind
        for obj in self.scaps.list():
            refs = scap_references(obj)
            if any(f"/{group}/{kind}/" in k for k in refs[BY_SCHEDULE] + refs[BY_TARGET]):
                self._enqueue(kube.object_key(obj))

    def _on_started_leading(self, partition: str) -> None:
        with self._own_lock:  # held back in an earlier term: the statuses have moved on since
            for key in [k for k in self._pending if self.partitions.of(kube.split_key(k)[0]) == partition]:
                del self._pending[key]
        for obj in self.scaps.list():
            if self.partitions.of(_mapping(obj.get("metadata")).get("namespace")) == partition:
                self.queue.add(kube.object_key(obj))

    # --- observing ------------------------------------------------------------------------------

    def _informer_for(self, resolved: ResolvedKind) -> Informer:
        return self._informer(resolved.group, resolved.version, resolved.plural)

    def _informer(self, group: str, version: str, plural: str) -> Informer:
        s = self.settings
        return Informer(self.api, group, version, plural, resync_s=s.resync_s,
                        stall_after_s=s.stall_after_s, watch_timeout_s=s.watch_timeout_s)

    def _current(self, key: str) -> Obj | None:
        namespace, name = kube.split_key(key)
        cached = self.scaps.get(namespace, name)
        if cached is None:
            return None
        with self._own_lock:
            own = self._own_writes.get(key)
        return newer(cached, own)

    def _observe_schedule(self, spec: ScheduledCapacitySpec, namespace: str) -> ScheduleObservation:
        return read_schedule(self.providers, namespace, api_group(spec.schedule.api_version),
                             spec.schedule.kind, spec.schedule.name)

    def _target_kind(self, spec: ScheduledCapacitySpec) -> tuple[ResolvedKind | None, str | None]:
        watched = self.targets.get(spec.target_ref.group, spec.target_ref.kind)
        if watched is None:
            return None, None
        return watched.resolved, watched.last_error

    def _observe_target(self, spec: ScheduledCapacitySpec, namespace: str) -> TargetObservation:
        """From the target cache and our own last write of it (`known_target`); read from the API
        server only while that cache has not synced."""
        resolved, error = self._target_kind(spec)
        if resolved is None:
            if error == "not served by the API server":
                return TargetNotFound()
            return LookupFailed(f"resolving {spec.target_ref.kind}: {error or 'pending'}")
        watched = self.targets.get(spec.target_ref.group, spec.target_ref.kind)
        informer = watched.informer if watched is not None else None
        if informer is not None and informer.has_synced():
            key = ref_key(namespace, spec.target_ref.api_version, spec.target_ref.kind, spec.target_ref.name)
            with self._own_lock:
                own = self._own_targets.get(key)
            return observe_target(known_target(informer.get(namespace, spec.target_ref.name), own), spec)
        path = kube.resource_path(resolved.group, resolved.version, resolved.plural, namespace,
                                  spec.target_ref.name)
        try:
            return observe_target(kube.request(self.api, "GET", path), spec)
        except kube.ApiError as failure:
            if failure.not_found:
                return TargetNotFound()
            return LookupFailed(f"reading the target: {failure}")

    def _field_standing(self, obj: Obj) -> Standing:
        """This object's standing among the ScheduledCapacities naming its target, from the
        cache. The cache is one watch over every namespace, delivered in resourceVersion order,
        so every object created before this one is in it whenever this one is."""
        claim = claim_of(obj)
        if claim is None:
            return Governs()
        others: list[Claim] = []
        for rival in self.scaps.by_index(BY_TARGET, claim.key):
            found = claim_of(rival)
            if found is not None:
                others.append(found)
        return standing(claim, others)

    def _observe_machines_fresh(self, namespace: str) -> tuple[MachinesObservation, str | None]:
        """The namespace's ScheduledMachines read from the API server now (`runtime.fresh`: the
        cache can lag), and the etcd revision the list reflects."""
        try:
            found = fresh_list(self.api, sm.GROUP, sm.VERSION, sm.PLURAL, namespace,
                               timeout=self._write_timeout())
        except kube.ApiError as failure:
            return LookupFailed(f"listing ScheduledMachines: {failure}"), None
        return observe_machines(found.items), found.resource_version

    def _observe_machines(self, namespace: str) -> MachinesObservation:
        if not self.machines.has_synced():
            return LookupFailed("the ScheduledMachine cache has not synced yet")
        return observe_machines(self.machines.list(namespace))

    # --- the reconcile --------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result:
        namespace, name = kube.split_key(key)
        if namespace is None:
            return Result()
        partition = self.partitions.of(namespace)
        if partition is None or not self.elector.is_leading(partition):
            return Result()
        if not self._flush(key, partition):
            return Result(retry=True)
        obj = self._current(key)
        if obj is None:
            return Result()
        meta = _mapping(obj.get("metadata"))
        spec = parse_spec(obj.get("spec"))
        raw_status = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
        prior = parse_status(raw_status)
        entry = None
        schedule: ScheduleObservation = LookupFailed("not read: the spec is refused")
        target: TargetObservation = TargetNotFound()
        machines: MachinesObservation = ()
        if isinstance(spec, ScheduledCapacitySpec):
            entry = self.settings.bundle.consumer_of_kind(spec.target_ref.group,
                                                          spec.target_ref.kind)
            if refusal(spec, entry) is None:
                schedule = self._observe_schedule(spec, namespace)
                target = self._observe_target(spec, namespace)
                machines = self._observe_machines(namespace)
        inp = DecisionInput(
            namespace=namespace, name=name, generation=int(meta.get("generation") or 0),
            spec=spec, schedule=schedule, target=target, machines=machines, allowlist=entry,
            prior=prior, now=self.clock.now(), field_standing=self._field_standing(obj),
        )
        decision = decide(inp)
        machines_rv: str | None = None
        # No fresh read of the target before a write: the observation already holds our own
        # last write of it (`known_target`); whether to write rests on the schedule, the host and
        # the field's governor, the target's value only says whether a write is needed at all (a
        # foreign change the watch has not delivered yet costs at most an identical patch), and a
        # decision that writes never completes a handback (the field does not read 0 yet): the
        # drain counter is judged on a later reconcile, on the write's own answer or newer.
        if decision.write is not None and isinstance(spec, ScheduledCapacitySpec):
            if decision.write == spec.capacity.active_value and spec.node_name is not None:
                # One host, one governor, under load: the machine cache can lag the provider's,
                # so the active value goes out only on a list read from the API server now.
                fresh, machines_rv = self._observe_machines_fresh(namespace)
                inp = replace(inp, machines=fresh)
                decision = decide(inp)
        if decision.transient is not None:
            log.info("transient lookup failure; nothing changed, retrying",
                     extra={"key": key, "why": decision.transient})
            return Result(retry=True)
        if decision.write is not None:
            outcome = self._write_target(key, partition, spec, entry, decision, inp, machines_rv)
            if outcome is not None:
                return outcome
            if status_patch(raw_status, decision.status) is not None or decision.events:
                with self._own_lock:
                    self._pending[key] = PendingStatus(obj, raw_status, decision.status, prior,
                                                       decision.events)
                self.queue.add_later(key)
            return self._requeue(decision.requeue_at)
        if self._write_status(key, partition, obj, raw_status, decision.status, prior) is not None:
            return Result(retry=True)
        for event in decision.events:
            self._queue_event(obj, event)
        return self._requeue(decision.requeue_at)

    def _flush(self, key: str, partition: str) -> bool:
        """Send `key`'s held-back status and Events, if any; False to retry (kept for then).

        A conflict means the object changed since the decision (its spec, or a status written by
        another hand): the held-back status is dropped and the reconcile decides on what is there
        now, as after any status write that failed."""
        with self._own_lock:
            pending = self._pending.pop(key, None)
        if pending is None:
            return True
        if not self.elector.holds(partition):
            return True  # not ours any more: the partition's leader decides afresh
        failed = self._write_status(key, partition, pending.obj, pending.raw, pending.status,
                                    pending.prior, held=True)
        if failed is not None and not failed.conflict:
            with self._own_lock:
                self._pending.setdefault(key, pending)
            return False
        if failed is None:
            for event in pending.events:
                self._queue_event(pending.obj, event)
        return True

    def flush_pending(self, only: str | None = None) -> None:
        """Send every held-back status now (of partition `only`, if given): shutting down, or
        handing a partition back."""
        with self._own_lock:
            keys = sorted(self._pending)
        for key in keys:
            partition = self.partitions.of(kube.split_key(key)[0])
            if partition is not None and only in (None, partition):
                self._flush(key, partition)

    def _drain(self, partition: str, timeout_s: float) -> bool:
        """Before `partition`'s lease is handed back (this replica already stopped acting for
        it): let its in-flight reconciles finish, then send its held-back statuses."""
        def mine(key: str) -> bool:
            return self.partitions.of(kube.split_key(key)[0]) == partition

        if not self.workers.wait_idle(mine, timeout_s):
            return False
        self.flush_pending(partition)
        return True

    def _requeue(self, at: datetime | None) -> Result:
        if at is None:
            return Result()
        return Result(requeue_after_s=max((at - self.clock.now()).total_seconds(), 0.0) + REQUEUE_SLACK_S)

    def _write_target(
        self, key: str, partition: str, spec: ScheduledCapacitySpec | InvalidSpec,
        entry: Consumer | None, decision: Decision, inp: DecisionInput, machines_rv: str | None,
    ) -> Result | None:
        """Send the one merge patch; None when it landed, else what the reconcile returns."""
        assert isinstance(spec, ScheduledCapacitySpec) and decision.write is not None
        problem = guard_write(spec, entry, decision)
        if problem is not None:
            log.error("refusing a write the bundle does not allow", extra={"key": key, "why": problem})
            return Result()
        resolved, _ = self._target_kind(spec)
        if resolved is None:
            return Result(retry=True)
        if not self.elector.is_leading(partition):
            return Result()
        path = kube.resource_path(resolved.group, resolved.version, resolved.plural, inp.namespace,
                                  spec.target_ref.name)
        body = target_patch(spec.capacity.path, decision.write)
        try:
            written = kube.merge_patch(self.api, path, body, field_manager=FIELD_MANAGER,
                                       timeout=self._write_timeout())
        except kube.ApiError as error:
            if error.not_found or error.transient:
                log.info("target write failed; retrying", extra={"key": key, "error": str(error)[:300]})
                return Result(retry=True)
            log.warning("target write refused", extra={"key": key, "error": str(error)[:300]})
            obj = self._current(key)
            if obj is not None:
                raw = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
                failed = write_failed(inp, decision, str(error)[:500])
                self._write_status(key, partition, obj, raw, failed, inp.prior)
            return Result(retry=True)
        metrics.WRITES.labels(controller=self._label, what="target").inc()
        if _revision(written) is not None:
            written_key = ref_key(inp.namespace, spec.target_ref.api_version, spec.target_ref.kind,
                                  spec.target_ref.name)
            with self._own_lock:
                self._own_targets[written_key] = OwnTargetWrite(
                    strip(written), quiet=decision.write == spec.capacity.active_value)
        audit: dict[str, object] = {
            "key": key, "partition": partition, "identity": self.settings.identity,
            "target": f"{spec.target_ref.kind}/{inp.namespace}/{spec.target_ref.name}",
            "path": spec.capacity.path, "value": decision.write,
            "resource_version": _mapping(written.get("metadata")).get("resourceVersion"),
        }
        if machines_rv is not None:
            audit["machines_checked_at"] = machines_rv
        log.info("target written", extra=audit)
        return None

    def _write_status(
        self, key: str, partition: str, obj: Obj, raw: Mapping[str, Any] | None,
        desired: ScheduledCapacityStatus, prior: ScheduledCapacityStatus | None,
        *, held: bool = False,
    ) -> kube.ApiError | None:
        """Patch the status when it changed; the error when that failed, else None. `held`: the
        record of a write already made, sent while the lease is still ours (even when handing
        it back), not only while leading."""
        patch = status_patch(raw, desired)
        if patch is None:
            return None
        if not (self.elector.holds(partition) if held else self.elector.is_leading(partition)):
            return None
        meta = _mapping(obj.get("metadata"))
        namespace, name = kube.split_key(key)
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, **patch}
        path = kube.resource_path(scap.GROUP, scap.VERSION, scap.PLURAL, namespace, name, "status")
        try:
            answer = kube.merge_patch(self.api, path, body, field_manager=FIELD_MANAGER,
                                      timeout=self._write_timeout())
        except kube.ApiError as error:
            level = logging.INFO if error.conflict else logging.WARNING
            log.log(level, "status write failed; retrying", extra={"key": key, "error": str(error)[:300]})
            return error
        metrics.WRITES.labels(controller=self._label, what="status").inc()
        with self._own_lock:
            self._own_writes[key] = strip(answer)
        self._count_transitions(prior, desired)
        return None

    def _count_transitions(self, prior: ScheduledCapacityStatus | None, status: ScheduledCapacityStatus) -> None:
        if status.phase is Phase.HANDBACK_TIMED_OUT and (prior is None or prior.phase is not status.phase):
            metrics.HANDBACK_TIMEOUTS.labels(controller=self._label).inc()
        before = prior.condition(cond.HOST_GOVERNANCE_CONFLICT) if prior is not None else None
        after = status.condition(cond.HOST_GOVERNANCE_CONFLICT)
        was = before is not None and before.status is ConditionStatus.TRUE
        if after is not None and after.status is ConditionStatus.TRUE and not was:
            metrics.HOST_GOVERNANCE_CONFLICTS.labels(controller=self._label).inc()
        yielded = cond.Reason.GOVERNED_BY_OLDER
        before_field = prior.condition(cond.FIELD_GOVERNANCE_CONFLICT) if prior is not None else None
        after_field = status.condition(cond.FIELD_GOVERNANCE_CONFLICT)
        if after_field is not None and after_field.reason == yielded and \
                (before_field is None or before_field.reason != yielded):
            metrics.FIELD_GOVERNANCE_CONFLICTS.labels(controller=self._label).inc()

    def _conflicted(self, condition: str) -> int:
        """How many ScheduledCapacities of the partitions this replica leads report `condition`
        as a conflict now (read from the cache at scrape time, so it is never stale)."""
        reason = cond.Reason.GOVERNED_BY_OLDER if condition == cond.FIELD_GOVERNANCE_CONFLICT else None
        count = 0
        for obj in self.scaps.list():
            partition = self.partitions.of(_mapping(obj.get("metadata")).get("namespace"))
            if partition is None or not self.elector.is_leading(partition):
                continue
            for entry in _mapping(obj.get("status")).get("conditions") or ():
                if isinstance(entry, Mapping) and entry.get("type") == condition \
                        and entry.get("status") == "True" and reason in (None, entry.get("reason")):
                    count += 1
        return count

    def _write_timeout(self) -> tuple[float, float]:
        """Shorter than the lease margin, so a write cannot land after a successor took over."""
        t = self.settings.timing
        margin = t.lease_duration_s - t.renew_deadline_s
        return (min(2.0, margin / 2), max(margin / 2, 0.5))

    # --- events ---------------------------------------------------------------------------------

    def _queue_event(self, obj: Obj, event: Event) -> None:
        try:
            self._events.put_nowait((obj, event))
        except queue.Full:
            log.warning("event queue full; dropping an event", extra={"reason": event.reason})

    def _emit_events(self) -> None:
        while not self._stop.is_set():
            try:
                obj, event = self._events.get(timeout=0.5)
            except queue.Empty:
                continue
            meta = _mapping(obj.get("metadata"))
            regarding = {"apiVersion": f"{scap.GROUP}/{scap.VERSION}", "kind": scap.KIND,
                         "name": meta.get("name"), "namespace": meta.get("namespace"),
                         "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}
            if event.machine is not None:
                machine = self.machines.get(str(meta.get("namespace")), event.machine)
                if machine is None:
                    continue
                regarding = {"apiVersion": f"{sm.GROUP}/{sm.VERSION}", "kind": sm.KIND,
                             "name": event.machine, "namespace": meta.get("namespace"),
                             "uid": _mapping(machine.get("metadata")).get("uid")}
            body = {
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"generateName": f"{regarding['name']}-",
                             "namespace": meta.get("namespace")},
                "eventTime": self.clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "reportingController": REPORTING_CONTROLLER,
                "reportingInstance": self.settings.identity[:128],
                "action": "Reconcile", "reason": event.reason[:128], "note": event.message[:1024],
                "type": event.type, "regarding": regarding,
            }
            path = kube.resource_path("events.k8s.io", "v1", "events", str(meta.get("namespace")))
            try:
                kube.request(self.api, "POST", path, body=body, timeout=(2.0, 5.0))
            except kube.ApiError as error:
                log.info("could not record an event", extra={"reason": event.reason, "error": str(error)[:200]})


def _revision(obj: Mapping[str, Any] | None) -> int | None:
    value = _mapping(_mapping(obj).get("metadata")).get("resourceVersion")
    try:
        return int(value) if isinstance(value, (str, int)) else None
    except ValueError:
        return None


def _indexer(index: str) -> Callable[[Obj], list[str]]:
    def keys(obj: Obj) -> list[str]:
        return scap_references(obj)[index]

    return keys


__all__ = ["CapacityController", "Settings", "TargetFound", "guard_write", "scap_references"]
