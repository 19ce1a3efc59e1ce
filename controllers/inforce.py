"""The admission policies in force in the cluster now, decided for a stored object.

The compiled ValidatingAdmissionPolicies (from the bundle) with the tenant limits as they are in
the cluster: the params objects of each params kind, watched, when the kind is served (a
TenantPolicy tightened by a GitOps sync is in force at once); the compiled params where it is not
(webhook-only enforcement installs no params CRD). An object is decided as a create of it today
would be — `fivespot check`'s evaluator, its messages — since an update of it to itself is
ratcheted and always admitted. The capacity controller acts on the answer (nothing above what
the limits allow) and the audit controller reports it (PolicyReports); this module is what the
two share.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.kinds import scheduled_capacity as scap
from api.kinds.scheduled_capacity import api_group
from api.provider_contract import LookupFailed
from policies.admission_eval import NamespaceRequired, PolicySet, Violation, review
from runtime.cache import Obj
from runtime.informer import EventHandler, Informer
from runtime.kindwatches import NOT_SERVED
from runtime.manager import Manager


@dataclass(frozen=True)
class WithinPolicy:
    """The admission policies in force now would admit this object as it is (or none apply)."""


@dataclass(frozen=True)
class OutOfPolicy:
    """The admission policies in force now would deny this object if it were created today
    (a TenantPolicy tightened after it was stored): their violations, as `fivespot check`
    gives them."""

    violations: tuple[Violation, ...]

    @property
    def messages(self) -> tuple[str, ...]:
        return tuple(v.message for v in self.violations)


PolicyObservation = WithinPolicy | OutOfPolicy | LookupFailed


def as_created(obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The AdmissionRequest of creating `obj` (a ScheduledCapacity) today."""
    kind = {"group": scap.GROUP, "version": scap.VERSION, "kind": scap.KIND}
    resource = {"group": scap.GROUP, "version": scap.VERSION, "resource": scap.PLURAL}
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return {"uid": "", "kind": kind, "resource": resource, "subResource": "",
            "requestKind": kind, "requestResource": resource, "requestSubResource": "",
            "name": str(name or ""), "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:fivespot:audit"}, "object": obj,
            "oldObject": None, "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}


class PoliciesInForce:
    """The bundle's policies on `mgr`, with the params kinds watched (`on_change` hears of every
    change to a params object)."""

    def __init__(self, mgr: Manager, on_change: EventHandler):
        admission = mgr.settings.bundle.admission
        self.compiled = (PolicySet.compile(list(admission.policies), list(admission.params))
                         if admission.policies else None)
        self.params = mgr.kind_watches(on_change)
        if self.compiled is not None:
            for api_version, kind in sorted(self.compiled.param_kinds):
                self.params.want(api_group(api_version), kind)
        self._memo: tuple[tuple[str, ...], PolicySet] | None = None
        self._lock = threading.Lock()

    def policy_set(self) -> PolicySet | LookupFailed | None:
        """The policies with the params in force now; None when the bundle has no policies."""
        if self.compiled is None:
            return None
        informers: list[Informer] = []
        for api_version, kind in sorted(self.compiled.param_kinds):
            group = api_group(api_version)
            watched = self.params.get(group, kind)
            if watched is not None and watched.informer is None and watched.last_error == NOT_SERVED:
                continue
            if watched is None or watched.informer is None:
                error = (watched.last_error if watched else None) or "pending"
                return LookupFailed(f"resolving {kind}.{group}: {error}")
            if not watched.informer.has_synced():
                return LookupFailed(f"the {kind} cache has not synced yet")
            informers.append(watched.informer)
        if not informers:
            return self.compiled
        objects = [obj for informer in informers for obj in informer.list()]
        versions = tuple(sorted(str((o.get("metadata") or {}).get("resourceVersion"))
                                for o in objects))
        with self._lock:
            if self._memo is None or self._memo[0] != versions:
                self._memo = (versions, self.compiled.with_params(objects))
            return self._memo[1]

    def observe(self, obj: Obj) -> PolicyObservation:
        """Whether the policies in force now would admit `obj` were it created today."""
        policies = self.policy_set()
        if policies is None:
            return WithinPolicy()
        if isinstance(policies, LookupFailed):
            return policies
        meta = obj.get("metadata")
        namespace = str(meta.get("namespace", "")) if isinstance(meta, Mapping) else ""
        try:
            verdict = review(policies, as_created(obj, namespace))
        except NamespaceRequired as needed:  # a selector on namespace labels: not compiled so
            return LookupFailed(str(needed))
        if verdict.allowed:
            return WithinPolicy()
        return OutOfPolicy(tuple(verdict.violations))
