"""The admission policies in force in the cluster now, decided for a stored object.

What the API server enforces: where the output installs ValidatingAdmissionPolicies
(enforcement `vap` or `both`), fivespot's policies and their bindings as they are in the cluster,
watched — so a TenantPolicy removed, a namespace dropped from one or a tenant added is in force
here as soon as a GitOps sync lands, as a lowered limit is — with the tenant limits as they are in
the cluster: the params objects of each params kind, watched, when the kind is served; the
compiled params where it is not (webhook-only enforcement installs no params CRD, and the
webhook's polyfill judges by the bundle, so the bundle's policies are the ones in force).

What if the cluster's copy is missing or unusable (docs/design/decisions/0025): until the watches
have synced, nothing is decided (`LookupFailed`: the capacity controller holds what it has, the
audit waits); a policy the bundle compiled but the cluster has no ValidatingAdmissionPolicy of
(deleted, not applied yet) or whose copy cannot be compiled is judged as the bundle compiled it,
with the bundle's bindings of it. A missing policy therefore never zeroes anything: the
controller judges no more strictly than the output it was deployed with.

An object is decided as a create of it today would be — `fivespot check`'s evaluator, its
messages — since an update of it to itself is ratcheted and always admitted. The capacity
controller acts on the answer (nothing above what the limits allow) and the audit controller
reports it (PolicyReports); this module is what the two share.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds.scheduled_capacity import api_group
from fivespot.api.provider_contract import LookupFailed
from fivespot.policies.admission_eval import NamespaceRequired, PolicyConfigError, PolicySet, Violation, review
from fivespot.policies.admission_eval.vap import (
    BINDING_KIND,
    BINDING_PLURAL,
    POLICY_KIND,
    POLICY_PLURAL,
)
from fivespot.policies.admission_eval.vap import GROUP as VAP_GROUP
from fivespot.policies.admission_eval.vap import VERSION as VAP_VERSION
from fivespot.runtime.cache import RESYNC, Obj
from fivespot.runtime.informer import EventHandler, Informer
from fivespot.runtime.kindwatches import NOT_SERVED
from fivespot.runtime.manager import Manager

log = logging.getLogger("fivespot.inforce")


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

MAX_VERDICTS: Final = 100_000
"""Verdicts kept (`PoliciesInForce.observe`); past this the memo starts over, so the entries of
deleted objects cannot pile up."""

VOLATILE: Final = frozenset({"resourceVersion", "managedFields"})
"""Metadata the API server changes on every write (a status patch included) that no admission
policy judging a create reads."""


def created_form(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a create of stored `obj` would show an admission policy: the object without its
    status (a create of a custom resource with a status subresource drops it) and without the
    metadata every write changes (`VOLATILE`), so every version between two spec or metadata
    changes is judged on the same input."""
    meta = obj.get("metadata")
    created = {key: value for key, value in obj.items() if key != "status"}
    if isinstance(meta, Mapping):
        created["metadata"] = {key: value for key, value in meta.items() if key not in VOLATILE}
    return created


def fingerprint(created: Mapping[str, Any]) -> bytes:
    """A digest of a `created_form`: equal digests, equal inputs to the review."""
    return hashlib.blake2b(msgspec.json.encode(created), digest_size=16).digest()


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


def policy_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def bound_policy(obj: Mapping[str, Any]) -> str:
    """The policy a ValidatingAdmissionPolicyBinding binds."""
    spec = obj.get("spec")
    return str(spec.get("policyName", "")) if isinstance(spec, Mapping) else ""


def in_force(compiled: Sequence[Mapping[str, Any]], live_policies: Iterable[Mapping[str, Any]],
             live_bindings: Iterable[Mapping[str, Any]],
             unusable: Collection[str] = ()) -> list[Mapping[str, Any]]:
    """The policy and binding objects in force, for the policies the bundle compiled.

    For each: the cluster's ValidatingAdmissionPolicy of that name with the cluster's bindings of
    it (the API server enforces exactly those); the bundle's policy and bindings where the cluster
    has no policy of that name (deleted, or not applied yet) or its copy is `unusable` (does not
    compile here). Other policies in the cluster are not fivespot's, and not judged."""
    names = {policy_name(o) for o in compiled if o.get("kind") == POLICY_KIND}
    live = {policy_name(o): o for o in live_policies
            if policy_name(o) in names and policy_name(o) not in unusable}
    found: list[Mapping[str, Any]] = []
    for obj in compiled:
        if obj.get("kind") == POLICY_KIND:
            found.append(live.get(policy_name(obj), obj))
        elif obj.get("kind") == BINDING_KIND and bound_policy(obj) not in live:
            found.append(obj)
    found += sorted((o for o in live_bindings if bound_policy(o) in live), key=policy_name)
    return found


def compile_in_force(compiled: Sequence[Mapping[str, Any]],
                     live_policies: Sequence[Mapping[str, Any]],
                     live_bindings: Sequence[Mapping[str, Any]]) -> tuple[PolicySet, dict[str, str]]:
    """`in_force`, compiled, and the cluster's copies that do not compile here (name -> why),
    which the bundle's copies replace."""
    unusable: dict[str, str] = {}
    for policy in live_policies:
        try:
            PolicySet.compile([policy])
        except PolicyConfigError as error:
            unusable[policy_name(policy)] = str(error)
    return PolicySet.compile(in_force(compiled, live_policies, live_bindings, unusable)), unusable


def _versions(objects: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(sorted(f"{policy_name(o)}@{(o.get('metadata') or {}).get('resourceVersion')}"
                        for o in objects))


Revisions = tuple[object, ...]


def revisions(informers: Iterable[Informer]) -> Revisions | None:
    """Which informers, at which resourceVersions; None while one has none (listing). An
    informer moves its resourceVersion only after its cache holds what that version says, so an
    answer computed after reading these is never older than they are."""
    found: list[object] = []
    for informer in informers:
        version = informer.resource_version
        if not version:
            return None
        found += (id(informer), version)
    return tuple(found)


class PoliciesInForce:
    """The bundle's policies on `mgr` (the cluster's copies where it installs them, watched),
    with the params kinds watched; `on_change` hears of every change to a params object and to
    one of fivespot's policies or bindings."""

    def __init__(self, mgr: Manager, on_change: EventHandler):
        admission = mgr.settings.bundle.admission
        self.bundle_objects = tuple(admission.policies)
        self.bundle_params = tuple(admission.params)
        self.compiled = (PolicySet.compile(list(self.bundle_objects), list(self.bundle_params))
                         if admission.policies else None)
        self.params = mgr.kind_watches(on_change)
        if self.compiled is not None:
            for api_version, kind in sorted(self.compiled.param_kinds):
                self.params.want(api_group(api_version), kind)
        self.names = frozenset(policy_name(o) for o in self.bundle_objects
                               if o.get("kind") == POLICY_KIND)
        self.live: tuple[Informer, Informer] | None = None
        if self.compiled is not None and admission.vaps:
            self.live = (mgr.informer(VAP_GROUP, VAP_VERSION, POLICY_PLURAL),
                         mgr.informer(VAP_GROUP, VAP_VERSION, BINDING_PLURAL))
            ours = self._ours(on_change)
            for informer in self.live:
                informer.add_handler(ours)
        self._policies: tuple[tuple[str, ...], PolicySet] | None = None
        self._memo: tuple[tuple[tuple[str, ...], tuple[str, ...]], PolicySet] | None = None
        self._revisions: tuple[Revisions, tuple[tuple[str, ...], PolicySet]] | None = None
        self._params_revisions: tuple[Revisions, PolicySet] | None = None
        """The last answers by their informers' resourceVersions (`revisions`): asked on every
        reconcile, answered without listing and sorting the caches while nothing has changed."""
        self._verdicts: dict[str, tuple[PolicySet, bytes, WithinPolicy | OutOfPolicy]] = {}
        """uid -> the last verdict, with the policies and the `fingerprint` it was made on: a
        reconcile after a status write, or an event of the object's target or schedule, judges
        nothing again (the audit controller judges a whole namespace on every change of one)."""
        self._lock = threading.Lock()

    def _ours(self, on_change: EventHandler) -> EventHandler:
        """`on_change` for a change of one of fivespot's policies or of a binding of one."""
        def handler(event: str, obj: Obj, old: Obj | None) -> None:
            if event == RESYNC:
                return
            named = {policy_name(o) if o.get("kind") == POLICY_KIND else bound_policy(o)
                     for o in (obj, old) if o is not None}
            if named & self.names:
                on_change(event, obj, old)
        return handler

    def policies(self) -> tuple[tuple[str, ...], PolicySet] | LookupFailed:
        """The policies and bindings in force now (`in_force`), without params, and the
        versions of the cluster's copies they were compiled from."""
        assert self.compiled is not None
        if self.live is None:
            return (), self.compiled
        policies_informer, bindings_informer = self.live
        for informer in self.live:
            if not informer.has_synced():
                return LookupFailed(f"the {informer.name} cache has not synced yet")
        seen = revisions(self.live)
        with self._lock:
            if seen is not None and self._revisions is not None and self._revisions[0] == seen:
                return self._revisions[1]
        live_policies = [o for o in policies_informer.list() if policy_name(o) in self.names]
        live_bindings = [o for o in bindings_informer.list() if bound_policy(o) in self.names]
        key = _versions(live_policies) + ("|",) + _versions(live_bindings)
        with self._lock:
            if self._policies is not None and self._policies[0] == key:
                return self._policies
        found = (key, self._compile(live_policies, live_bindings))
        with self._lock:
            self._policies = found
            self._revisions = (seen, found) if seen is not None else None
        return found

    def _compile(self, live_policies: list[Obj], live_bindings: list[Obj]) -> PolicySet:
        policies, unusable = compile_in_force(self.bundle_objects, live_policies, live_bindings)
        for name, error in unusable.items():
            log.warning("a policy in the cluster does not compile here; judging by the bundle's "
                        "copy", extra={"policy": name, "error": error[:300]})
        return policies

    def policy_set(self) -> PolicySet | LookupFailed | None:
        """The policies with the params in force now; None when the bundle has no policies."""
        if self.compiled is None:
            return None
        found = self.policies()
        if isinstance(found, LookupFailed):
            return found
        version, policies = found
        informers: list[Informer] = []
        for api_version, kind in sorted(policies.param_kinds):
            group = api_group(api_version)
            self.params.want(group, kind)
            watched = self.params.get(group, kind)
            if watched is not None and watched.informer is None and watched.last_error == NOT_SERVED:
                continue
            if watched is None or watched.informer is None:
                error = (watched.last_error if watched else None) or "pending"
                return LookupFailed(f"resolving {kind}.{group}: {error}")
            if not watched.informer.has_synced():
                return LookupFailed(f"the {kind} cache has not synced yet")
            informers.append(watched.informer)
        seen = revisions(informers)
        fast = (version, seen) if seen is not None else None
        with self._lock:
            if fast is not None and self._params_revisions is not None \
                    and self._params_revisions[0] == fast:
                return self._params_revisions[1]
        objects = ([obj for informer in informers for obj in informer.list()] if informers
                   else list(self.bundle_params))
        key = (version, _versions(objects) if informers else ())
        with self._lock:
            if self._memo is None or self._memo[0] != key:
                self._memo = (key, policies.with_params(objects))
            self._params_revisions = (fast, self._memo[1]) if fast is not None else None
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
        found_uid = meta.get("uid") if isinstance(meta, Mapping) else None
        uid = found_uid if isinstance(found_uid, str) else ""
        created = created_form(obj)
        digest = fingerprint(created) if uid else None
        if digest is not None:
            with self._lock:
                found = self._verdicts.get(uid)
            if found is not None and found[0] is policies and found[1] == digest:
                return found[2]
        try:
            verdict = review(policies, as_created(created, namespace))
        except NamespaceRequired as needed:  # a selector on namespace labels: not compiled so
            return LookupFailed(str(needed))
        judged: WithinPolicy | OutOfPolicy = (WithinPolicy() if verdict.allowed
                                              else OutOfPolicy(tuple(verdict.violations)))
        if digest is not None:
            with self._lock:
                if len(self._verdicts) >= MAX_VERDICTS:
                    self._verdicts.clear()
                self._verdicts[uid] = (policies, digest, judged)
        return judged
