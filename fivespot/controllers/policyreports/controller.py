"""The audit controller: keeps one PolicyReport per namespace current with what the admission
policies in force now say of every stored ScheduledCapacity, and the metric an alert reads.

Why a controller of its own, and not the webhook's cache or the capacity controller: writing
reports needs create and patch on PolicyReports in every tenant namespace, which neither of
those identities should hold (the capacity identity has no create at all, and the webhook is the
component a cluster's writes wait on); it runs like every controller (one leader per partition,
`fivespot.runtime.manager`), reads ScheduledCapacities, the policies and the tenant limits, and writes
nothing else.

A namespace is reconciled when one of its ScheduledCapacities changes (a status write aside:
`changes_the_report`), when any tenant's limits or one of fivespot's policies or bindings change
(every namespace then), and on taking a partition (namespaces with objects, and those with an
earlier report to clear); the informers' resync is the backstop. Each reconcile judges every
object of the namespace (`fivespot.controllers.inforce`: as `fivespot check` decides a create of it
today), and writes the report only when it differs from the stored one: created when there is
none, else applied server-side on the resourceVersion read (the Manager's conditional writer). Where the
PolicyReport CRD is not installed there is no report; the metric is kept anyway.

A namespace's report is rebuilt at most once every REBUILD_EVERY_S (`rebuild_wait`, decision
0046): the first change after a quiet spell is judged at once, and the changes that follow within
that time are judged together when it has passed. Each rebuild judges the whole namespace, so
without it a burst of n creates in a namespace (a GitOps sync of a large repository, an import)
would cost up to n rebuilds of up to n objects each, and as many writes of a growing report.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

from fivespot.api.identities import AUDIT_CONTROLLER
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.provider_contract import LookupFailed
from fivespot.controllers.policyreports import reports
from fivespot.controllers.inforce import PoliciesInForce, created_form
from fivespot.runtime import kube, metrics
from fivespot.runtime.cache import MODIFIED, Obj
from fivespot.runtime.clock import SYSTEM_CLOCK, Clock
from fivespot.runtime.reconcile import Request, Result
from fivespot.runtime.writes import APPLY
from fivespot.runtime.kube import ApiClient
from fivespot.runtime.manager import Manager, Primary, Settings

log = logging.getLogger("fivespot.audit")

KIND: Final = Primary(scap.GROUP, scap.VERSION, scap.PLURAL)
RECHECK_CRD_S: Final = 60.0
"""How often a missing PolicyReport CRD is looked for again."""
REBUILD_EVERY_S: Final = 5.0
"""The least time between two rebuilds of one namespace's report: half the bound within which a
report reflects a change (docs/design/numbers.md), so a change that just misses one rebuild is
still in the next well within it."""


def rebuild_wait(last_rebuilt: float | None, now: float, every_s: float = REBUILD_EVERY_S) -> float:
    """Seconds before a namespace's report may be rebuilt again (0: now), given when (on the
    monotonic clock) it was last rebuilt, if ever."""
    if last_rebuilt is None:
        return 0.0
    return max(0.0, last_rebuilt + every_s - now)


def changes_the_report(event: str, obj: Obj, old: Obj | None) -> bool:
    """Whether an event of a ScheduledCapacity can change its namespace's report: all but a
    change that leaves what a create of it would show the policies as it was (`created_form`),
    such as the status write the capacity controller makes of every object at a boundary. Each
    reconcile judges and compares the whole namespace, so those would cost work in proportion to
    the namespace's size for each object flipped, and change nothing."""
    return event != MODIFIED or old is None or created_form(old) != created_form(obj)


def report_key(obj: Obj) -> str:
    """The key reconciled for an object: its namespace's report."""
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f"{namespace}/{reports.NAME}"


class AuditReconciler:
    """ScheduledCapacities in, a PolicyReport per namespace out."""

    def __init__(self, mgr: Manager):
        self.mgr = mgr
        self.scaps = mgr.reconcile(KIND, self, predicate=changes_the_report, key=report_key)
        self.in_force = PoliciesInForce(mgr, self._on_limits)
        self._crd_served: bool | None = None
        self._crd_checked = 0.0
        self._counted: dict[str, int] = {}
        self._rebuilt: dict[str, float] = {}
        """Namespace -> when (monotonic) its report was last rebuilt."""
        self._lock = threading.Lock()
        mgr.on_started_leading(self._started)
        mgr.on_stopped_leading(self._stopped)

    # --- events -------------------------------------------------------------------------------

    def _on_limits(self, event: str, obj: Obj, old: Obj | None) -> None:
        for namespace in {str(kube.split_key(kube.object_key(o))[0]) for o in self.scaps.list()}:
            self.mgr.enqueue(f"{namespace}/{reports.NAME}")

    def _started(self, partition: str) -> None:
        """Namespaces with an earlier report are looked at too: one may need clearing."""
        if not self._reports_served():
            return
        try:
            listed = kube.request(self.mgr.api, "GET", kube.resource_path(
                reports.GROUP, reports.VERSION, reports.PLURAL),
                query={"labelSelector": "app.kubernetes.io/managed-by=fivespot"})
        except kube.ApiError as error:
            log.warning("could not list earlier PolicyReports", extra={"error": str(error)[:300]})
            return
        for item in listed.get("items") or []:
            namespace = (item.get("metadata") or {}).get("namespace")
            if self.mgr.partition_of(namespace) == partition:
                self.mgr.enqueue(f"{namespace}/{reports.NAME}")

    def _stopped(self, partition: str) -> None:
        """Another replica counts these namespaces now."""
        with self._lock:
            for namespace in [n for n in self._counted if self.mgr.partition_of(n) == partition]:
                metrics.OUT_OF_POLICY.remove(namespace)
                del self._counted[namespace]
            for namespace in [n for n in self._rebuilt if self.mgr.partition_of(n) == partition]:
                del self._rebuilt[namespace]

    # --- the reconcile ------------------------------------------------------------------------

    def reconcile(self, request: Request) -> Result | None:
        namespace = request.namespace
        now = self.mgr.clock.monotonic()
        with self._lock:
            wait = rebuild_wait(self._rebuilt.get(namespace), now)
        if wait > 0:
            return Result(requeue_after_s=wait)  # the queue keeps one, the earliest
        if isinstance(self.in_force.policy_set(), LookupFailed):
            return Result(retry=True)
        objects = sorted(self.scaps.list(namespace),
                         key=lambda o: str((o.get("metadata") or {}).get("name")))
        judged = [(obj, self.in_force.observe(obj)) for obj in objects]
        if any(isinstance(observation, LookupFailed) for _, observation in judged):
            return Result(retry=True)
        with self._lock:
            self._rebuilt[namespace] = now
        stored = self._stored(namespace)
        listed = reports.results(judged, int(self.mgr.clock.now().timestamp()),
                                 reports.timestamps(stored))
        body = reports.report(namespace, listed)
        self._count(namespace, reports.failing(body))
        if not self._reports_served() or (stored is None and not objects):
            return None
        if stored is not None and (stored.get("results") or []) == body["results"] \
                and stored.get("summary") == body["summary"]:
            return None
        try:
            if not self._write(request.partition, namespace, body, stored):
                return None  # no longer ours to write
        except kube.ApiError as error:
            if error.conflict:
                return Result(retry=True)  # created or changed since it was read: judge again
            raise
        log.info("policy report written", extra={"namespace": namespace,
                                                 "fail": body["summary"]["fail"],
                                                 "pass": body["summary"]["pass"]})
        return None

    def _write(self, partition: str, namespace: str, body: dict[str, Any],
               stored: Mapping[str, Any] | None) -> bool:
        """The report through the conditional writer: applied on the version read, or created
        when there was none (a create is conditional by nature: one made meanwhile answers
        AlreadyExists); False when not sent."""
        if stored is None:
            return self.mgr.writes.create(partition, self._path(namespace, named=False), body,
                                          what="policyreport") is not None
        version = str((stored.get("metadata") or {}).get("resourceVersion"))
        return self.mgr.writes.patch(partition, self._path(namespace), body, version,
                                     what="policyreport", content_type=APPLY,
                                     force=True) is not None

    def _count(self, namespace: str, failing: int) -> None:
        with self._lock:
            self._counted[namespace] = failing
            metrics.OUT_OF_POLICY.labels(namespace=namespace).set(failing)

    def _path(self, namespace: str, *, named: bool = True) -> str:
        return kube.resource_path(reports.GROUP, reports.VERSION, reports.PLURAL, namespace,
                                  reports.NAME if named else None)

    def _stored(self, namespace: str) -> dict[str, Any] | None:
        if not self._reports_served():
            return None
        try:
            return kube.request(self.mgr.api, "GET", self._path(namespace))
        except kube.ApiError as error:
            if error.not_found:
                return None
            raise

    def _reports_served(self) -> bool:
        """Whether the API server serves PolicyReports (their CRD is installed), looked up again
        at most every RECHECK_CRD_S while it is not."""
        now = time.monotonic()
        if self._crd_served is None or (not self._crd_served and now - self._crd_checked > RECHECK_CRD_S):
            self._crd_checked = now
            served = kube.resolve_kind(self.mgr.api, reports.GROUP, reports.KIND) is not None
            if not served and self._crd_served is not False:
                log.warning("the PolicyReport CRD (wgpolicyk8s.io/v1alpha2) is not installed: "
                            "no reports, the fivespot_objects_out_of_policy metric only")
            self._crd_served = served
        return bool(self._crd_served)


def audit_manager(api: ApiClient, settings: Settings, *, clock: Clock = SYSTEM_CLOCK) -> Manager:
    """A Manager running the audit controller."""
    mgr = Manager(api, settings, component=AUDIT_CONTROLLER, clock=clock)
    AuditReconciler(mgr)
    return mgr
