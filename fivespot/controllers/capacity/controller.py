"""The capacity controller: the reconciler around `decide` (watch, observe, decide, write,
requeue), on the shared Manager (`fivespot.runtime.manager`: informers, queue, workers, leases, own
writes, events, probes).

One reconcile of one ScheduledCapacity:

1. only if this replica leads the object's partition (the Manager hands a `Request` only then,
   and its conditional writer checks again right before each write);
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
   next reconcile of the object decides with the held-back status as the prior and sends one
   patch for both (a close whose drain counter already reads 0 goes to Inactive in one status
   write), or sends it first when the object changed since or another write is due.

Event-driven reactions map provider, target and ScheduledMachine events back to the
ScheduledCapacities that reference them through cache indexes, and the informers' slow resync
re-queues everything as a backstop. All state lives in status, so a restart loses nothing and
replays nothing: an unchanged world produces no write and no status patch.

A replica that lost its lease while a write was on its way cannot overwrite anything when that
write lands late: the target write is conditional on the target's resourceVersion as observed,
and the status write on the ScheduledCapacity's, so once the new leader has written either, the
late one fails with 409. A target write that fails for any other reason (the webhook down and
failing closed, a timeout, a refusal) is reported at once: `CapacityWritten=False/WriteFailed`,
`Stalled=True` with the server's message, a Warning Event and a warning log line; it is retried
with backoff and the condition clears when the write lands.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from fivespot.api.bundle import Consumer
from fivespot.api.fieldgovernance import (
    AUTOSCALERS,
    Claim,
    Governs,
    OtherWriter,
    Standing,
    claim_of,
    standing,
    target_key,
    writer_of,
    written_by,
)
from fivespot.api.identities import CAPACITY_CONTROLLER
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds import scheduled_machine
from fivespot.api.kinds.scheduled_capacity import (
    INACTIVE_VALUE,
    ConditionStatus,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
    api_group,
)
from fivespot.api.provider_contract import LookupFailed, ScheduleObservation
from fivespot.controllers.capacity import conditions as cond
from fivespot.controllers.capacity.decide import Decision, Event, decide, refusal, write_failed
from fivespot.controllers.inforce import PoliciesInForce
from fivespot.controllers.capacity.observations import (
    DecisionInput,
    InvalidSpec,
    MachinesObservation,
    SpecMemo,
    TargetFound,
    TargetNotFound,
    TargetObservation,
    WithinPolicy,
    field_owner,
    observe_machines,
    observe_target,
)
from fivespot.controllers.capacity.patches import as_scaled, scale_apply, status_patch, target_patch
from fivespot.runtime import kube, metrics
from fivespot.runtime.cache import DELETED, MODIFIED, Obj, strip
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock
from fivespot.runtime.reconcile import Request, Result
from fivespot.runtime.fresh import fresh_list
from fivespot.runtime.kube import ApiClient, ResolvedKind
from fivespot.runtime.manager import Manager, Primary, Settings
from fivespot.runtime.ownwrites import OwnWrites, Seen, revision
from fivespot.runtime.schedules import read_next_transition, read_schedule
from fivespot.runtime.writes import APPLY

log = logging.getLogger("fivespot.capacity")

FIELD_MANAGER: Final = CAPACITY_CONTROLLER
KIND: Final = Primary(scap.GROUP, scap.VERSION, scap.PLURAL)
ACTIVE: Final = "active"
"""A target write of the active value: its watch event needs no reconcile."""
ZERO: Final = "zero"
"""A target write of 0: its watch event completes a handback (reconciled after the burst)."""

BY_SCHEDULE: Final = "schedule"
BY_TARGET: Final = "target"
BY_NODE: Final = "node"


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


@dataclass(frozen=True)
class PendingStatus:
    """The status patch (and Events) of a decision whose target write has landed, held back so
    that a burst's target writes go first (`WorkQueue.add_later`). The next reconcile of the key,
    whichever lane it comes from, decides with it as the prior status (and sends one patch for
    both) or sends it before deciding anything, so no decision is ever made on a status that is
    missing a write already made."""

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


class CapacityReconciler:
    """ScheduledCapacities in, one merge patch of a target's field out, on a Manager."""

    def __init__(self, mgr: Manager):
        self.mgr = mgr
        self.api = mgr.api
        self.settings = mgr.settings
        self.scaps = mgr.reconcile(KIND, self, predicate=_generation_changed,
                                   related=self._enqueue_rivals)
        for index in (BY_SCHEDULE, BY_TARGET, BY_NODE):
            self.scaps.add_index(index, _indexer(index))
        self.machines = mgr.informer(scheduled_machine.GROUP, scheduled_machine.VERSION,
                                     scheduled_machine.PLURAL)
        self.machines.add_handler(self._on_machine)
        self.providers = mgr.kind_watches(self._on_provider, on_change=self._on_kind_changed)
        self.targets = mgr.kind_watches(self._on_target, on_change=self._on_kind_changed)
        for provider in self.settings.bundle.providers:
            self.providers.want(provider.group, provider.kind)
        for consumer in self.settings.bundle.consumers:
            self.targets.want(consumer.group, consumer.kind)
        self.autoscalers = mgr.kind_watches(self._on_autoscaler, on_change=self._on_autoscaler_kind)
        """HPAs and KEDA ScaledObjects: governors of a field fivespot does not run (a KEDA
        that is not installed is an unresolved kind, watched once its CRD appears)."""
        for group, kind in AUTOSCALERS:
            self.autoscalers.want(group, kind)
        self.in_force = PoliciesInForce(mgr, self._on_limits)
        """The admission policies, their bindings and the tenant limits in force in the cluster
        now."""
        self.target_writes = OwnWrites()
        """Target ref key -> our last merge patch of it (`fivespot.runtime.ownwrites`), tagged ACTIVE for
        a write of the active value (its echo needs no reconcile) or ZERO (its echo completes a
        handback). Every decision reads the newer of the cached target and this: with the active
        value just written and a ScheduledMachine taking the node (or the schedule closing) a
        moment later, the cached copy still reads 0, so "hand back" would look done and no zero
        write would be sent."""
        self._specs = SpecMemo()
        """Each object's parsed spec per (uid, generation): parsed once, not every reconcile."""
        self._pending: dict[str, PendingStatus] = {}
        """Key -> the status of a landed target write, not yet sent (`PendingStatus`)."""
        self._pending_lock = threading.Lock()
        mgr.on_started_leading(self._drop_pending)
        mgr.on_handing_back(self.flush_pending)
        mgr.on_stopping(self.flush_pending)
        self._label = CAPACITY_CONTROLLER
        for rule, condition in (("host", cond.HOST_GOVERNANCE_CONFLICT), ("field", cond.FIELD_GOVERNANCE_CONFLICT)):
            metrics.GOVERNANCE_CONFLICTED.labels(controller=self._label, rule=rule).set_function(
                functools.partial(self._conflicted, condition))

    # --- event handlers: map every change to the ScheduledCapacities it concerns ----------------

    def _enqueue_rivals(self, event: str, obj: Obj, old: Obj | None) -> None:
        """A ScheduledCapacity that appears, goes or changes its target changes the standing of
        the others naming the same target (one field, one governor): the governor's deletion
        hands the field over on the next reconcile of the one that yielded."""
        key = kube.object_key(obj)
        targets = set(scap_references(obj)[BY_TARGET])
        if old is not None:
            targets.update(scap_references(old)[BY_TARGET])
        for target in targets:
            self.mgr.enqueue_objects(o for o in self.scaps.by_index(BY_TARGET, target)
                                     if kube.object_key(o) != key)

    def _on_provider(self, event: str, obj: Obj, old: Obj | None) -> None:
        self.mgr.enqueue_objects(self.scaps.by_index(BY_SCHEDULE, object_ref_key(obj)))

    def _on_target(self, event: str, obj: Obj, old: Obj | None) -> None:
        key = object_ref_key(obj)
        seen = self.target_writes.observe(key, obj, deleted=event == DELETED)
        if event == MODIFIED and seen.seen is Seen.OWN:
            if seen.tag == ACTIVE:
                return  # exactly the revision our own active write made: nothing else changed
            # our own zero write coming back: the handback completes on it, after the burst
            for scap_obj in self.scaps.by_index(BY_TARGET, key):
                self.mgr.enqueue(kube.object_key(scap_obj), later=True)
            return
        self.mgr.enqueue_objects(self.scaps.by_index(BY_TARGET, key))

    def _on_autoscaler(self, event: str, obj: Obj, old: Obj | None) -> None:
        """An autoscaler that appears, goes or changes its scale target changes whether the
        ScheduledCapacities on that target may write."""
        keys = {w.key for w in (_autoscaler_writer(o) for o in (obj, old) if o is not None)
                if w is not None}
        for key in keys:
            self.mgr.enqueue_objects(self.scaps.by_index(BY_TARGET, key))

    def _on_autoscaler_kind(self, group_kind: tuple[str, str]) -> None:
        self.mgr.enqueue_objects(self.scaps.list())

    def _observe_autoscalers(self, obj: Obj) -> tuple[OtherWriter, ...]:
        """The autoscalers in the namespace that scale this object's field, from the caches
        (an unsynced cache counts none: its initial list re-queues the objects it concerns)."""
        claim = claim_of(obj)
        if claim is None:
            return ()
        found: list[OtherWriter] = []
        for group, kind in AUTOSCALERS:
            watched = self.autoscalers.get(group, kind)
            informer = watched.informer if watched is not None else None
            if informer is None:
                continue
            for item in informer.list(claim.namespace):
                writer = _autoscaler_writer(item)
                if writer is not None and written_by(claim, writer) is not None:
                    found.append(writer)
        return tuple(sorted(found, key=lambda w: (w.kind, w.name)))

    def _on_machine(self, event: str, obj: Obj, old: Obj | None) -> None:
        namespace = str(_mapping(obj.get("metadata")).get("namespace", ""))
        for node in {machine_node(obj), machine_node(old)} - {None}:
            self.mgr.enqueue_objects(self.scaps.by_index(BY_NODE, f"{namespace}/{node}"))

    def _on_kind_changed(self, group_kind: tuple[str, str]) -> None:
        group, kind = group_kind
        for obj in self.scaps.list():
            refs = scap_references(obj)
            if any(f"/{group}/{kind}/" in k for k in refs[BY_SCHEDULE] + refs[BY_TARGET]):
                self.mgr.enqueue(kube.object_key(obj))

    def _on_limits(self, event: str, obj: Obj, old: Obj | None) -> None:
        """A tenant's limits, or one of fivespot's policies or bindings, changed in the cluster:
        every object may now be in or out of policy (a rare event: they change with the config
        repo)."""
        self.mgr.enqueue_objects(self.scaps.list())

    def _drop_pending(self, partition: str) -> None:
        """Held back in an earlier term: the statuses have moved on since."""
        with self._pending_lock:
            for key in [k for k in self._pending if self.mgr.partition_of(kube.split_key(k)[0]) == partition]:
                del self._pending[key]

    # --- observing ------------------------------------------------------------------------------

    def _observe_schedule(self, spec: ScheduledCapacitySpec, namespace: str) -> ScheduleObservation:
        return read_schedule(self.providers, namespace, api_group(spec.schedule.api_version),
                             spec.schedule.kind, spec.schedule.name)

    def _expect_flip(self, key: str, spec: ScheduledCapacitySpec, namespace: str) -> None:
        """The schedule's published next flip is when this object's next target write is due:
        told to the Manager, a resting lease is taken back before it, not by that write. Only a
        hint (the contract's nextTransitionTime is informational): the write itself still
        follows the schedule's `active`."""
        self.mgr.expect_write(key, read_next_transition(
            self.providers, namespace, api_group(spec.schedule.api_version), spec.schedule.kind,
            spec.schedule.name))

    def _target_kind(self, spec: ScheduledCapacitySpec) -> tuple[ResolvedKind | None, str | None]:
        watched = self.targets.get(spec.target_ref.group, spec.target_ref.kind)
        if watched is None:
            return None, None
        return watched.resolved, watched.last_error

    def _observe_target(self, spec: ScheduledCapacitySpec, namespace: str) -> TargetObservation:
        """From the target cache and our own last write of it (`OwnWrites.known`); read from the API
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
            return observe_target(self.target_writes.known(
                key, informer.get(namespace, spec.target_ref.name)), spec)
        path = kube.resource_path(resolved.group, resolved.version, resolved.plural, namespace,
                                  spec.target_ref.name)
        try:
            return observe_target(kube.request(self.api, "GET", path), spec)
        except kube.ApiError as failure:
            if failure.not_found:
                return TargetNotFound()
            return LookupFailed(f"reading the target: {failure}")

    def _target_now(self, spec: ScheduledCapacitySpec, namespace: str, key: str) -> Obj | None:
        """The target as the caches (and our own last write of it) hold it now."""
        watched = self.targets.get(spec.target_ref.group, spec.target_ref.kind)
        informer = watched.informer if watched is not None else None
        if informer is None or not informer.has_synced():
            return None
        return self.target_writes.known(key, informer.get(namespace, spec.target_ref.name))

    def _field_writer(self, spec: ScheduledCapacitySpec, namespace: str) -> str:
        """The field manager owning spec.capacity.path on the target, read from the API server
        with its managedFields ("" when that fails). Read only for a repair, never cached: the
        informers drop managedFields (most of an object's size, on every event of every target)
        for a question asked only when another writer is at work, at most
        `contest.MAX_WRITES_PER_MINUTE` times a minute per object (decision record 0029)."""
        resolved, _ = self._target_kind(spec)
        if resolved is None:
            return ""
        path = kube.resource_path(resolved.group, resolved.version, resolved.plural, namespace,
                                  spec.target_ref.name)
        try:
            found = kube.request(self.api, "GET", path)
        except kube.ApiError as failure:
            log.info("reading the field's manager failed", extra={"error": str(failure)[:300]})
            return ""
        managed = _mapping(found.get("metadata") if isinstance(found, Mapping) else None).get("managedFields")
        return field_owner(managed, spec.capacity.path, FIELD_MANAGER) or ""

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
        """The namespace's ScheduledMachines read from the API server now (`fivespot.runtime.fresh`: the
        cache can lag), and the etcd revision the list reflects."""
        try:
            found = fresh_list(self.api, scheduled_machine.GROUP, scheduled_machine.VERSION,
                               scheduled_machine.PLURAL, namespace)
        except kube.ApiError as failure:
            return LookupFailed(f"listing ScheduledMachines: {failure}"), None
        return observe_machines(found.items), found.resource_version

    def _observe_machines(self, namespace: str) -> MachinesObservation:
        if not self.machines.has_synced():
            return LookupFailed("the ScheduledMachine cache has not synced yet")
        return observe_machines(self.machines.list(namespace))

    # --- the reconcile --------------------------------------------------------------------------

    def reconcile(self, request: Request) -> Result:
        key, namespace, name, partition = request.key, request.namespace, request.name, \
            request.partition
        held, sent = self._held_back(key, partition)
        if not sent:
            return Result(retry=True)
        obj = held.obj if held is not None else request.current()
        if obj is None:
            self._specs.forget(key)
            return Result()
        meta = _mapping(obj.get("metadata"))
        spec = self._specs.parse(key, obj)
        raw_status = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
        prior = held.status if held is not None else self._specs.status(key, obj)
        entry = None
        schedule: ScheduleObservation = LookupFailed("not read: the spec is refused")
        target: TargetObservation = TargetNotFound()
        machines: MachinesObservation = ()
        if isinstance(spec, ScheduledCapacitySpec):
            entry = self.settings.bundle.consumer_of_kind(spec.target_ref.group,
                                                          spec.target_ref.kind)
            if refusal(spec, entry) is None:
                schedule = self._observe_schedule(spec, namespace)
                self._expect_flip(key, spec, namespace)
                target = self._observe_target(spec, namespace)
                machines = self._observe_machines(namespace)
        inp = DecisionInput(
            namespace=namespace, name=name, generation=int(meta.get("generation") or 0),
            spec=spec, schedule=schedule, target=target, machines=machines, allowlist=entry,
            prior=prior, now=self.mgr.clock.now(), field_standing=self._field_standing(obj),
            policy=self.in_force.observe(obj) if isinstance(spec, ScheduledCapacitySpec)
            else WithinPolicy(),
            autoscalers=self._observe_autoscalers(obj),
        )
        decision = decide(inp)
        if decision.ask_writer and isinstance(spec, ScheduledCapacitySpec) \
                and isinstance(inp.target, TargetFound):
            # A repair: someone rewrote the field. Who, from the target's managedFields.
            inp = replace(inp, target=replace(inp.target, writer=self._field_writer(spec, namespace)))
            decision = decide(inp)
        machines_rv: str | None = None
        # No fresh read of the target before a write: the observation already holds our own
        # last write of it (`OwnWrites.known`); whether to write rests on the schedule, the host and
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
        if held is not None and (decision.transient is not None or decision.write is not None):
            # More than the record of the held-back write to complete: send that record first,
            # then decide again on the object as it is now.
            if not self._send_held(key, partition, held):
                return Result(retry=True)
            return self.reconcile(request)
        if decision.transient is not None:
            log.info("transient lookup failure; nothing changed, retrying",
                     extra={"key": key, "why": decision.transient})
            return Result(retry=True)
        if decision.write is not None:
            outcome = self._write_target(key, partition, spec, entry, decision, inp, machines_rv)
            if outcome is not None:
                return outcome
            # Held back as it is: whether it changes anything is worked out when it is sent
            # (`status_patch`), not here, between this target write and the next.
            with self._pending_lock:
                self._pending[key] = PendingStatus(obj, raw_status, decision.status, prior,
                                                   decision.events)
            self.mgr.enqueue(key, later=True)
            return self.mgr.requeue_at(decision.requeue_at)
        if held is not None:
            return self._complete_held(key, held, decision)
        if self._write_status(key, obj, raw_status, decision.status, prior) is not None:
            return Result(retry=True)
        for event in decision.events:
            self._record(obj, event)
        return self.mgr.requeue_at(decision.requeue_at)

    def _held_back(self, key: str, partition: str) -> tuple[PendingStatus | None, bool]:
        """`key`'s held-back status, taken out to be completed by this reconcile — when the object
        is still the version that status was decided on (nothing else has written it since) —
        and False to retry when it had to be sent first and that failed.

        Completing it means deciding with the held-back status as the prior and sending one
        status patch for both: after a zero write, the later reconcile that sees the write's
        answer finds the handback complete (HandingBack, then Inactive) and writes the object's
        status once per flip instead of twice. Any other case sends it first (`_send_held`)."""
        with self._pending_lock:
            pending = self._pending.pop(key, None)
        if pending is None:
            return None, True
        current = self.mgr.current(key)
        if current is not None and revision(current) == revision(pending.obj) \
                and self.mgr.holds(partition):
            return pending, True
        return None, self._send_held(key, partition, pending)

    def _complete_held(self, key: str, held: PendingStatus, decision: Decision) -> Result:
        """One status patch from the status the held-back write was decided on to what this
        decision (made on that held-back status) says, then both decisions' Events. On a
        failure other than a conflict the held-back status is kept for the retry, as `_flush`
        keeps it; a conflict means someone else wrote the object: decide again on that."""
        failed = self._write_status(key, held.obj, held.raw, decision.status, held.status,
                                    held=True)
        if failed is not None:
            if not failed.conflict:
                with self._pending_lock:
                    self._pending.setdefault(key, held)
            return Result(retry=True)
        self._count_transitions(held.prior, held.status)
        for event in (*held.events, *decision.events):
            self._record(held.obj, event)
        return self.mgr.requeue_at(decision.requeue_at)

    def _flush(self, key: str, partition: str) -> bool:
        """Send `key`'s held-back status and Events, if any; False to retry (kept for then)."""
        with self._pending_lock:
            pending = self._pending.pop(key, None)
        if pending is None:
            return True
        return self._send_held(key, partition, pending)

    def _send_held(self, key: str, partition: str, pending: PendingStatus) -> bool:
        """Send a held-back status and its Events; False to retry (kept for then).

        A conflict means the object changed since the decision (its spec, or a status written by
        another hand): the held-back status is dropped and the reconcile decides on what is there
        now, as after any status write that failed."""
        if not self.mgr.holds(partition):
            return True  # not ours any more: the partition's leader decides afresh
        failed = self._write_status(key, pending.obj, pending.raw, pending.status,
                                    pending.prior, held=True)
        if failed is not None and not failed.conflict:
            with self._pending_lock:
                self._pending.setdefault(key, pending)
            return False
        if failed is None:
            for event in pending.events:
                self._record(pending.obj, event)
        return True

    def flush_pending(self, only: str | None = None) -> None:
        """Send every held-back status now (of partition `only`, if given): shutting down, or
        handing a partition back (its in-flight reconciles have finished)."""
        with self._pending_lock:
            keys = sorted(self._pending)
        for key in keys:
            partition = self.mgr.partition_of(kube.split_key(key)[0])
            if partition is not None and only in (None, partition):
                self._flush(key, partition)

    def _write_target(
        self, key: str, partition: str, spec: ScheduledCapacitySpec | InvalidSpec,
        entry: Consumer | None, decision: Decision, inp: DecisionInput, machines_rv: str | None,
    ) -> Result | None:
        """Send the one merge patch, conditional on the target's resourceVersion as observed;
        None when it landed, else what the reconcile returns."""
        assert isinstance(spec, ScheduledCapacitySpec) and decision.write is not None
        problem = guard_write(spec, entry, decision)
        if problem is not None:
            log.error("refusing a write the bundle does not allow", extra={"key": key, "why": problem})
            return Result()
        resolved, _ = self._target_kind(spec)
        if resolved is None:
            return Result(retry=True)
        if not isinstance(inp.target, TargetFound) or inp.target.resource_version is None:
            return Result(retry=True)  # nothing observed to make the write conditional on
        scale = entry is not None and entry.through_scale
        path = kube.resource_path(resolved.group, resolved.version, resolved.plural, inp.namespace,
                                  spec.target_ref.name, "scale" if scale else None)
        written_key = ref_key(inp.namespace, spec.target_ref.api_version, spec.target_ref.kind,
                              spec.target_ref.name)
        tag = ACTIVE if decision.write == spec.capacity.active_value else ZERO
        written: Obj | None = None
        observed = self._target_now(spec, inp.namespace, written_key) if scale else None
        self.target_writes.begin(written_key)
        try:
            if scale:
                sent = self.mgr.writes.patch(
                    partition, path, scale_apply(inp.namespace, spec.target_ref.name, decision.write),
                    inp.target.resource_version, what="target", content_type=APPLY, force=True)
            else:
                sent = self.mgr.writes.patch(partition, path,
                                             target_patch(spec.capacity.path, decision.write),
                                             inp.target.resource_version, what="target")
            if sent is None:
                return Result()  # no longer ours to write
            written = as_scaled(observed, inp.target.resource_version, decision.write, sent) \
                if scale else strip(sent)
        except kube.ApiError as error:
            if error.not_found or error.conflict:
                # gone, or changed since we looked (by anyone: a newer view decides again)
                log.info("target write not applied; deciding again",
                         extra={"key": key, "error": str(error)[:300]})
                return Result(retry=True)
            self._report_write_failure(key, inp, decision, error)
            return Result(retry=True)
        finally:
            if self.target_writes.landed(written_key, written, tag):
                self.mgr.enqueue_objects(self.scaps.by_index(BY_TARGET, written_key))
        audit: dict[str, object] = {
            "key": key, "partition": partition, "identity": self.settings.identity,
            "target": f"{spec.target_ref.kind}/{inp.namespace}/{spec.target_ref.name}",
            "path": spec.capacity.path, "value": decision.write,
            "resource_version": _mapping(_mapping(sent).get("metadata")).get("resourceVersion"),
        }
        if machines_rv is not None:
            audit["machines_checked_at"] = machines_rv
        log.info("target written", extra=audit)
        return None

    def _report_write_failure(self, key: str, inp: DecisionInput, decision: Decision,
                              error: kube.ApiError) -> None:
        """A target write refused or failing (the webhook down and failing closed, a timeout, a
        refusal): the status says so at once — CapacityWritten=False/WriteFailed, Stalled=True
        with the server's message — with a Warning Event and a warning log line, the first time
        that message is seen; the write is retried with backoff and the condition clears when it
        lands."""
        reason = error.message or error.reason or f"HTTP {error.status}"
        log.warning("target write failed; retrying",
                    extra={"key": key, "status": error.status, "error": reason[:300]})
        obj = self.mgr.current(key)
        if obj is None:
            return
        raw = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
        failed = write_failed(inp, decision, reason[:500])
        before = inp.prior.condition(cond.CAPACITY_WRITTEN) if inp.prior is not None else None
        after = failed.condition(cond.CAPACITY_WRITTEN)
        if self._write_status(key, obj, raw, failed, inp.prior) is None and after is not None and (
                before is None or before.message != after.message):
            self.mgr.record(obj, "Warning", cond.Reason.WRITE_FAILED, after.message)

    def _write_status(
        self, key: str, obj: Obj, raw: Mapping[str, Any] | None,
        desired: ScheduledCapacityStatus, prior: ScheduledCapacityStatus | None,
        *, held: bool = False,
    ) -> kube.ApiError | None:
        """Patch the status when it changed, conditional on the resourceVersion read; the error
        when that failed, else None. `held`: the record of a write already made, sent while the
        lease is still ours (even when handing it back), not only while leading."""
        patch = status_patch(raw, desired)
        if patch is None:
            return None
        error = self.mgr.write(key, obj, patch, held=held)
        if error is None:
            self._count_transitions(prior, desired)
            self._parse_written_status(key)
        return error

    def _parse_written_status(self, key: str) -> None:
        """Parse the status just written, from the write's answer, into the memo: the next
        boundary's reconcile of the object reads that version and finds it parsed. Status writes
        trail a boundary's target writes (the queue's later lane), so the parse leaves the path
        the next boundary's writes wait on."""
        answer = self.mgr.current(key)
        if answer is not None:
            self._specs.status(key, answer)

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
            if not self.mgr.leading(self.mgr.partition_of(_mapping(obj.get("metadata")).get("namespace"))):
                continue
            for entry in _mapping(obj.get("status")).get("conditions") or ():
                if isinstance(entry, Mapping) and entry.get("type") == condition \
                        and entry.get("status") == "True" and reason in (None, entry.get("reason")):
                    count += 1
        return count

    # --- events ---------------------------------------------------------------------------------

    def _record(self, obj: Obj, event: Event) -> None:
        """An Event on the ScheduledCapacity, or on the ScheduledMachine `event.machine` names."""
        if event.machine is None:
            self.mgr.record(obj, event.type, event.reason, event.message)
            return
        namespace = str(_mapping(obj.get("metadata")).get("namespace"))
        machine = self.machines.get(namespace, event.machine)
        if machine is not None:
            self.mgr.record(machine, event.type, event.reason, event.message)


def _autoscaler_writer(obj: Obj) -> OtherWriter | None:
    """What an autoscaler from a cache scales (informers fill in a list item's kind)."""
    writer = writer_of(obj)
    return writer if writer is not None and writer.autoscaler else None


def _generation_changed(event: str, obj: Obj, old: Obj | None) -> bool:
    """Every event but a status-only change (usually our own write): nothing new to decide."""
    if event == MODIFIED and old is not None:
        return _mapping(obj.get("metadata")).get("generation") != \
            _mapping(old.get("metadata")).get("generation")
    return True


def capacity_manager(api: ApiClient, settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> Manager:
    """A Manager running the capacity controller."""
    mgr = Manager(api, settings, component=CAPACITY_CONTROLLER, clock=clock)
    CapacityReconciler(mgr)
    return mgr


def _indexer(index: str) -> Callable[[Obj], list[str]]:
    def keys(obj: Obj) -> list[str]:
        return scap_references(obj)[index]

    return keys


__all__ = ["CapacityReconciler", "TargetFound", "capacity_manager", "guard_write", "scap_references"]
