"""The machine controller: the reconciler around `decide` (watch, observe, decide, act, report),
on the shared Manager (`fivespot.runtime.manager`: informers, queue, workers, leases, own writes, events).

One reconcile of one ScheduledMachine:

1. only if this replica leads the namespace's partition (the Manager hands a `Request` only
   then, and the writer checks again before each action);
2. observe, in the management cluster: the object and its prior status, the provider's status
   (group + kind through discovery, any served version), the Machine (from a per-namespace
   watch: the identity may read Machines only in the declared clusters' namespaces), the
   bootstrap and infrastructure objects (read by name), and the ScheduledCapacities naming
   the machine's node; "cache not synced" and API errors are LookupFailed, never absent;
3. `decide`; when it asks for the node (`needs_node`), read the workload cluster through CAPI's
   `<cluster>-kubeconfig` Secret — the node and the pods bound to it — and decide again; a
   kubeconfig with anything but an https server, its inline CA and inline credentials is refused
   (KubeconfigRefused, nothing sent), never handed to the `kubernetes` client's loader;
4. the actions, in order: create (AlreadyExists is success: the next reconcile judges the
   owner), delete (with a UID precondition), cordon + taint (one strategic merge patch of the
   node), evictions (a 429 from a PodDisruptionBudget is an answer, retried at the next poll);
   the first failure stops the rest and retries with backoff, before the status records it;
5. the status patch (only when changed, conditional on the resourceVersion read), the Events,
   the finalizer's removal once a deleted ScheduledMachine's machine has left, and the requeue
   at the decision's deadline.

What a replica that lost its lease while a write was on its way can do when that write lands
late: nothing that overwrites. Every action goes out through the Manager's conditional writer
(`fivespot.runtime.writes`): the status and finalizer writes are conditional on the ScheduledMachine's
resourceVersion, a Machine's delete on its uid and resourceVersion, the cordon on the node's
resourceVersion and each eviction on its pod's uid and resourceVersion, so a late one fails with
409 once the new leader has written (or the node or pod changed). A create cannot carry a
precondition but is conditional by nature: the names are fixed, so a late create of an object that exists is an AlreadyExists, and one of an
object the new leader decided against is seen by its Machine watch and taken out again (a
Machine that never got a node is deleted after the grace period with nothing to drain).

Machine and provider events re-queue the ScheduledMachines they concern; the informers' slow
resync is the backstop. Everything is in status and the object names are
fixed, so a SIGKILL at any point loses nothing and can never create a second Machine.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from fivespot.api.bundle import Machines
from fivespot.api.identities import KUBECONFIG_SECRET_KEY, MACHINE_CONTROLLER, kubeconfig_secret
from fivespot.api.kinds import machine_lifecycle as lifecycle
from fivespot.api.kinds.machine_lifecycle import MachineSpec
from fivespot.api.kinds.scheduled_capacity import api_group
from fivespot.controllers.machine import objects
from fivespot.controllers.machine.decide import (
    AddFinalizer,
    Cordon,
    Create,
    Decision,
    Delete,
    Event,
    Evict,
    Part,
    action_failed,
    decide,
)
from fivespot.controllers.machine.observations import (
    DecisionInput,
    LookupFailed,
    NodeObservation,
    NodeSeen,
    ObjectObservation,
    RefusedKubeconfig,
    ScheduleObservation,
    observe_node,
    observe_owned,
    parse_spec,
    parse_status,
    provider_generation,
)
from fivespot.runtime import kube, metrics
from fivespot.runtime.cache import MODIFIED, Obj
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock
from fivespot.runtime.reconcile import Request, Result
from fivespot.runtime.informer import Informer
from fivespot.runtime.kube import ApiClient
from fivespot.runtime.kubeconfig import KubeconfigRefused
from fivespot.runtime.manager import Manager, Primary, Settings
from fivespot.runtime.schedules import read_schedule

log = logging.getLogger("fivespot.machine")

BY_SCHEDULE: Final = "schedule"
KIND: Final = Primary(lifecycle.GROUP, lifecycle.VERSION, lifecycle.PLURAL)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def schedule_key(obj: Obj) -> list[str]:
    meta, spec = _mapping(obj.get("metadata")), _mapping(obj.get("spec"))
    schedule = _mapping(spec.get("schedule"))
    if not schedule:
        return []
    return [f"{meta.get('namespace')}/{api_group(str(schedule.get('apiVersion', '')))}/"
            f"{schedule.get('kind')}/{schedule.get('name')}"]


def refusal(machines: Machines, namespace: str, spec: MachineSpec) -> str | None:
    """Why the compiled MachineProvisioning does not allow this spec, or None. The CRD's CEL
    rules refuse an embedded kind at admission already; this is the check that still holds
    when the installed CRD is older than the bundle."""
    if not machines.allows_cluster(namespace, spec.cluster_name):
        allowed = ", ".join(f"{c.namespace}/{c.name}" for c in machines.clusters)
        return (f"spec.clusterName {spec.cluster_name} in namespace {namespace} is not a cluster "
                f"the platform declares (MachineProvisioning clusters: {allowed})")
    if machines.bootstrap_kind(spec.bootstrap_spec.group, spec.bootstrap_spec.kind) is None:
        return (f"spec.bootstrapSpec {spec.bootstrap_spec.kind}.{spec.bootstrap_spec.group} is not "
                "a bootstrap kind the platform allows")
    if machines.infrastructure_kind(spec.infrastructure_spec.group,
                                    spec.infrastructure_spec.kind) is None:
        return (f"spec.infrastructureSpec {spec.infrastructure_spec.kind}."
                f"{spec.infrastructure_spec.group} is not an infrastructure kind the platform allows")
    return None


class MachineReconciler:
    """ScheduledMachines in, CAPI Machines out, on a Manager."""

    def __init__(self, mgr: Manager):
        machines = mgr.settings.bundle.machines
        if machines is None:
            raise ValueError("the bundle declares no MachineProvisioning: there is nothing for "
                             "the machine controller to do; compile a repo with one")
        self.mgr = mgr
        self.api = mgr.api
        self.machines_cfg: Machines = machines
        self.sms = mgr.reconcile(KIND, self, predicate=_needs_reconcile)
        self.sms.add_index(BY_SCHEDULE, schedule_key)
        self.capi: dict[str, Informer] = {}
        for namespace in self.machines_cfg.namespaces:
            informer = mgr.informer(objects.CAPI_GROUP, self.machines_cfg.machine_version,
                                    "machines", namespace)
            informer.add_handler(self._on_owned)
            self.capi[namespace] = informer
        self.providers = mgr.kind_watches(self._on_provider, on_change=self._on_kind_changed)
        self._workload: dict[tuple[str, str], tuple[str, ApiClient]] = {}
        self._workload_lock = threading.Lock()
        mgr.on_stopping(self._close_workload_clients)

    def _close_workload_clients(self) -> None:
        with self._workload_lock:
            for _, client in self._workload.values():
                client.close()
            self._workload.clear()

    # --- events -> keys -------------------------------------------------------------------------

    def _on_owned(self, event: str, obj: Obj, old: Obj | None) -> None:
        meta = _mapping(obj.get("metadata"))
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("kind") == lifecycle.KIND:
                self.mgr.enqueue(f"{meta.get('namespace')}/{ref.get('name')}")

    def _on_provider(self, event: str, obj: Obj, old: Obj | None) -> None:
        meta = _mapping(obj.get("metadata"))
        key = (f"{meta.get('namespace')}/{api_group(str(obj.get('apiVersion', '')))}/"
               f"{obj.get('kind')}/{meta.get('name')}")
        self.mgr.enqueue_objects(self.sms.by_index(BY_SCHEDULE, key))

    def _on_kind_changed(self, group_kind: tuple[str, str]) -> None:
        self.mgr.enqueue_objects(
            obj for obj in self.sms.list()
            if any(f"/{group_kind[0]}/{group_kind[1]}/" in k for k in schedule_key(obj)))

    # --- observing ------------------------------------------------------------------------------

    def _observe_schedule(self, spec: MachineSpec, namespace: str
                          ) -> tuple[ScheduleObservation, int | None]:
        group = api_group(spec.schedule.api_version)
        observed = read_schedule(self.providers, namespace, group, spec.schedule.kind,
                                 spec.schedule.name)
        watched = self.providers.get(group, spec.schedule.kind)
        provider = (watched.informer.get(namespace, spec.schedule.name)
                    if watched is not None and watched.informer is not None else None)
        return observed, provider_generation(provider)

    def _observe_machine(self, namespace: str, name: str, uid: str) -> ObjectObservation:
        informer = self.capi.get(namespace)
        if informer is None or not informer.has_synced():
            return LookupFailed("the Machine cache has not synced yet")
        return observe_owned(informer.get(namespace, name), uid)

    def _embedded_path(self, obj: lifecycle.EmbeddedObject, namespace: str, name: str | None = None,
                       bootstrap: bool = True) -> str:
        kinds = self.machines_cfg.bootstrap if bootstrap else self.machines_cfg.infrastructure
        kind = next(k for k in kinds if (k.group, k.kind) == (obj.group, obj.kind))
        version = obj.api_version.rpartition("/")[2]
        return kube.resource_path(kind.group, version, kind.resource, namespace, name)

    def _observe_embedded(self, obj: lifecycle.EmbeddedObject, namespace: str, name: str, uid: str,
                          bootstrap: bool) -> ObjectObservation:
        try:
            found = kube.request(self.api, "GET", self._embedded_path(obj, namespace, name, bootstrap))
        except kube.ApiError as error:
            if error.not_found:
                return None
            return LookupFailed(str(error)[:300])
        return observe_owned(found, uid)

    def workload_client(self, namespace: str, cluster: str) -> ApiClient:
        """A client for the workload cluster, from CAPI's kubeconfig Secret (re-read each time;
        the client is rebuilt only when the Secret changed). Whoever can write that Secret is not
        trusted with the controller: only an https server, its inline CA and inline credentials
        are used (`fivespot.runtime.kubeconfig`); anything else raises KubeconfigRefused."""
        secret = kube.request(self.api, "GET", kube.resource_path(
            "", "v1", "secrets", namespace, kubeconfig_secret(cluster)))
        version = str(_mapping(secret.get("metadata")).get("resourceVersion"))
        with self._workload_lock:
            cached = self._workload.get((namespace, cluster))
            if cached is not None and cached[0] == version:
                return cached[1]
        raw = _mapping(secret.get("data")).get(KUBECONFIG_SECRET_KEY)
        if not isinstance(raw, str):
            raise kube.KubeconfigError(f"Secret {namespace}/{kubeconfig_secret(cluster)} has no "
                                       f"key {KUBECONFIG_SECRET_KEY}")
        client = kube.client_from_kubeconfig(
            base64.b64decode(raw), source=f"Secret {namespace}/{kubeconfig_secret(cluster)}")
        with self._workload_lock:
            old = self._workload.get((namespace, cluster))
            self._workload[(namespace, cluster)] = (version, client)
        if old is not None:
            old[1].close()
        return client

    def _observe_node(self, namespace: str, cluster: str, node: str) -> NodeObservation:
        try:
            workload = self.workload_client(namespace, cluster)
            try:
                found: Obj | None = kube.request(workload, "GET",
                                                 kube.resource_path("", "v1", "nodes", None, node))
            except kube.ApiError as error:
                if not error.not_found:
                    raise
                found = None
            pods = kube.request(workload, "GET", "/api/v1/pods",
                                query={"fieldSelector": f"spec.nodeName={node}"}) if found else {}
        except KubeconfigRefused as error:
            return RefusedKubeconfig(str(error)[:1024])
        except (kube.ApiError, kube.KubeconfigError) as error:
            return LookupFailed(str(error)[:300])
        raw_items = pods.get("items")
        items = raw_items if isinstance(raw_items, list) else []
        return observe_node(found, [p for p in items if isinstance(p, Mapping)])

    # --- the reconcile --------------------------------------------------------------------------

    def reconcile(self, request: Request) -> Result:
        key, namespace, name, partition = request.key, request.namespace, request.name, \
            request.partition
        obj = request.current()
        if obj is None:
            return Result()
        meta = _mapping(obj.get("metadata"))
        uid = str(meta.get("uid", ""))
        spec = parse_spec(obj.get("spec"))
        raw_status = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
        prior = parse_status(raw_status)
        n = objects.names(name)
        inp = DecisionInput(
            namespace=namespace, name=name, uid=uid, generation=int(meta.get("generation") or 0),
            spec=spec, refusal=None, schedule=LookupFailed("not read: the spec is refused"),
            provider_generation=None, prior=prior, machine=None, bootstrap=None,
            infrastructure=None, node=None, now=self.mgr.clock.now(),
            machine_api_version=f"{objects.CAPI_GROUP}/{self.machines_cfg.machine_version}",
            finalizer=lifecycle.FINALIZER in (meta.get("finalizers") or ()),
            deleting_since=_deleting_since(obj))
        if isinstance(spec, MachineSpec):
            why = refusal(self.machines_cfg, namespace, spec)
            inp = replace(inp, refusal=why)
            if why is None:
                schedule, generation = self._observe_schedule(spec, namespace)
                machine = self._observe_machine(namespace, n.machine, uid)
                inp = replace(
                    inp, schedule=schedule, provider_generation=generation, machine=machine,
                    bootstrap=self._observe_embedded(spec.bootstrap_spec, namespace, n.bootstrap,
                                                     uid, True),
                    infrastructure=self._observe_embedded(spec.infrastructure_spec, namespace,
                                                          n.infrastructure, uid, False))
        decision = decide(inp)
        if decision.needs_node and isinstance(spec, MachineSpec):
            node = getattr(inp.machine, "node", None)
            assert isinstance(node, str)
            inp = replace(inp, node=self._observe_node(namespace, spec.cluster_name, node),
                          now=self.mgr.clock.now())
            decision = decide(inp)
        if decision.resolution_error is not None:
            metrics.SPOT_SCHEDULE_RESOLUTION_ERRORS.labels(
                controller=MACHINE_CONTROLLER, reason=decision.resolution_error).inc()
        if decision.transient is not None:
            log.info("transient lookup failure; nothing changed, retrying",
                     extra={"key": key, "why": decision.transient})
            return Result(retry=True)
        done, report = self._act(request, inp, decision)
        if any(isinstance(action, AddFinalizer) for action in decision.actions):
            obj = self.mgr.current(key) or obj  # our own finalizer write: the status goes on top
        if not done:
            if report is not None and self._write_status(key, obj, raw_status, report):
                for event in report.events:
                    self._record_event(obj, event)
            return Result(retry=True)
        if not self._write_status(key, obj, raw_status, decision):
            return Result(retry=True)
        for event in decision.events:
            self._record_event(obj, event)
        if decision.release and not self._finalize(key, add=False):
            return Result(retry=True)
        return self.mgr.requeue_at(decision.requeue_at)

    # --- acting ---------------------------------------------------------------------------------

    def _act(self, request: Request, inp: DecisionInput,
             decision: Decision) -> tuple[bool, Decision | None]:
        """Perform the actions in order, each through the Manager's conditional writer (nothing
        is sent once this replica no longer leads the partition): (True, None) when all landed;
        (False, report) at the first that failed, where `report` is the decision to write for a
        refusal a retry alone will not fix (None for a transient failure: then nothing is
        written)."""
        spec, key, partition = inp.spec, request.key, request.partition
        for action in decision.actions:
            try:
                if isinstance(action, Create):
                    assert isinstance(spec, MachineSpec)
                    self._create(partition, inp, spec, action.part)
                elif isinstance(action, Delete):
                    assert isinstance(spec, MachineSpec)
                    self._delete(partition, inp, spec, action.part)
                elif isinstance(action, Cordon):
                    assert isinstance(spec, MachineSpec)
                    self._cordon(partition, inp, spec.cluster_name, action.node)
                elif isinstance(action, Evict):
                    assert isinstance(spec, MachineSpec)
                    self._evict(partition, key, inp.namespace, spec.cluster_name, action)
                elif isinstance(action, AddFinalizer) and not self._finalize(key, add=True):
                    return False, None
            except (kube.ApiError, kube.KubeconfigError, KubeconfigRefused) as error:
                log.warning("action failed; retrying", extra={
                    "key": key, "action": type(action).__name__, "error": str(error)[:300]})
                if isinstance(error, kube.ApiError) and (error.transient or error.conflict):
                    return False, None  # retried with backoff, on what is there then
                return False, action_failed(inp, decision, action,
                                            error.message if isinstance(error, kube.ApiError)
                                            else str(error))
        return True, None

    def _part_path(self, inp: DecisionInput, spec: MachineSpec, part: Part,
                   named: bool) -> tuple[str, str]:
        n = objects.names(inp.name)
        if part is Part.MACHINE:
            return kube.resource_path(objects.CAPI_GROUP, self.machines_cfg.machine_version,
                                      "machines", inp.namespace, n.machine if named else None), n.machine
        if part is Part.BOOTSTRAP:
            return self._embedded_path(spec.bootstrap_spec, inp.namespace,
                                       n.bootstrap if named else None, True), n.bootstrap
        return self._embedded_path(spec.infrastructure_spec, inp.namespace,
                                   n.infrastructure if named else None, False), n.infrastructure

    def _create(self, partition: str, inp: DecisionInput, spec: MachineSpec, part: Part) -> None:
        path, name = self._part_path(inp, spec, part, named=False)
        if part is Part.MACHINE:
            body = objects.machine(spec, inp.name, inp.uid, inp.namespace,
                                   self.machines_cfg.machine_version)
        else:
            template = spec.bootstrap_spec if part is Part.BOOTSTRAP else spec.infrastructure_spec
            body = objects.embedded(template, spec, inp.name, inp.uid, name, inp.namespace)
        try:
            if self.mgr.writes.create(partition, path, body, what=part.value) is None:
                return
        except kube.ApiError as error:
            if error.conflict:
                return  # it exists: the next reconcile reads it and judges its owner
            raise
        log.info("created", extra={"key": f"{inp.namespace}/{inp.name}", "part": part.value,
                                   "object": f"{body['kind']}/{inp.namespace}/{name}",
                                   "identity": self.mgr.settings.identity})

    def _delete(self, partition: str, inp: DecisionInput, spec: MachineSpec, part: Part) -> None:
        observed = {Part.MACHINE: inp.machine, Part.BOOTSTRAP: inp.bootstrap,
                    Part.INFRASTRUCTURE: inp.infrastructure}[part]
        uid = getattr(observed, "uid", None)
        if not uid:
            return
        path, name = self._part_path(inp, spec, part, named=True)
        try:
            if not self.mgr.writes.delete(partition, path, uid,
                                          getattr(observed, "resource_version", None),
                                          what=f"delete-{part.value}"):
                return
        except kube.ApiError as error:
            if error.not_found:
                return  # gone already
            raise  # 409: replaced by another object, or changed since observed: decide again
        log.info("deleted", extra={"key": f"{inp.namespace}/{inp.name}", "part": part.value,
                                   "object": f"{inp.namespace}/{name}", "uid": uid,
                                   "identity": self.mgr.settings.identity})

    def _cordon(self, partition: str, inp: DecisionInput, cluster: str, node: str) -> None:
        """One strategic merge patch of the node, conditional on its resourceVersion as the
        decision observed it (a node changed since is looked at again: 409, retried)."""
        seen = inp.node
        assert isinstance(seen, NodeSeen) and seen.resource_version is not None, \
            "the decision cordons only a node it observed"
        workload = self.workload_client(inp.namespace, cluster)
        if self.mgr.writes.patch(partition, kube.resource_path("", "v1", "nodes", None, node),
                                 objects.cordon_patch(), seen.resource_version, what="cordon",
                                 client=workload, content_type=kube.STRATEGIC_MERGE_PATCH) is None:
            return
        log.info("cordoned and tainted",
                 extra={"node": node, "cluster": f"{inp.namespace}/{cluster}"})

    def _evict(self, partition: str, key: str, namespace: str, cluster: str,
               action: Evict) -> None:
        workload = self.workload_client(namespace, cluster)
        for pod in action.pods:
            try:
                if not self.mgr.writes.evict(partition, workload, pod.namespace, pod.name, pod.uid,
                                             pod.resource_version):
                    return
            except kube.ApiError as error:
                if error.not_found:
                    continue
                if error.status == 429:  # a PodDisruptionBudget allows no disruption right now
                    log.info("eviction refused by a disruption budget; retrying", extra={
                        "key": key, "pod": f"{pod.namespace}/{pod.name}", "error": error.message[:200]})
                    continue
                if error.conflict:  # the pod changed or was replaced since it was observed
                    log.info("pod changed since observed; evicted at the next poll", extra={
                        "key": key, "pod": f"{pod.namespace}/{pod.name}"})
                    continue
                if error.transient:
                    raise
                log.warning("eviction failed", extra={"key": key, "pod": f"{pod.namespace}/{pod.name}",
                                                      "error": str(error)[:300]})
                continue
            log.info("evicted", extra={"key": key, "pod": f"{pod.namespace}/{pod.name}"})

    def _finalize(self, key: str, *, add: bool) -> bool:
        """Add or remove the controller's finalizer, conditional on the resourceVersion read (a
        concurrent change makes it a conflict, retried on what is there then); True when done.
        Other finalizers on the object are kept as they are."""
        obj = self.mgr.current(key)
        if obj is None:
            return True
        meta = _mapping(obj.get("metadata"))
        present = [str(f) for f in meta.get("finalizers") or ()]
        wanted = ([*present, lifecycle.FINALIZER] if lifecycle.FINALIZER not in present else present) if add \
            else [f for f in present if f != lifecycle.FINALIZER]
        if wanted == present:
            return True
        error = self.mgr.write(key, obj, {"metadata": {"finalizers": wanted or None}},
                               subresource=None, what="finalizer" if add else "release")
        if error is not None:
            return error.not_found
        log.info("finalizer added" if add else "finalizer removed: the ScheduledMachine may go",
                 extra={"key": key})
        return True

    # --- reporting ------------------------------------------------------------------------------

    def _write_status(self, key: str, obj: Obj, raw: Mapping[str, Any] | None,
                      decision: Decision) -> bool:
        patch = objects.status_patch(raw, decision.status)
        if patch is None:
            return True
        if self.mgr.write(key, obj, patch) is not None:
            return False
        if raw is None or raw.get("phase") != decision.status.phase.value:
            log.info("phase", extra={"key": key, "phase": decision.status.phase.value,
                                     "why": decision.status.message[:300]})
        return True

    def _record_event(self, obj: Obj, event: Event) -> None:
        self.mgr.record(obj, event.type, event.reason, event.message)


def _needs_reconcile(event: str, obj: Obj, old: Obj | None) -> bool:
    """Every event but a status-only change (usually our own write): the same generation and
    the same deletionTimestamp."""
    return not (event == MODIFIED and old is not None and _generation(obj) == _generation(old)
                and _deleting_since(obj) == _deleting_since(old))


def machine_manager(api: ApiClient, settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> Manager:
    """A Manager running the machine controller."""
    mgr = Manager(api, settings, component=MACHINE_CONTROLLER, clock=clock)
    MachineReconciler(mgr)
    return mgr


def _generation(obj: Obj) -> object:
    return _mapping(obj.get("metadata")).get("generation")


def _deleting_since(obj: Obj) -> datetime | None:
    raw = _mapping(obj.get("metadata")).get("deletionTimestamp")
    if not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


__all__ = ["MachineReconciler", "machine_manager", "refusal"]
