"""The webhook's decisions, as pure functions of an AdmissionRequest and what they look up.

Everything here is I/O-free and deterministic, so each rule is tested directly and the Flask
views stay a thin shell (read the body, call `review`, write the response). Three checks, each
for something CEL cannot do (docs/design/decisions/0004-enforcement-layers.md):

- `review_host_governance`: a ScheduledCapacity naming a node that a ScheduledMachine in its
  namespace already governs is denied, or warned, per the Platform. Only a create, or an update
  that *changes* `spec.nodeName`, is judged: an update keeping a node that became conflicted later
  (a finalizer removal, `enabled: false`) must go through, since the controller already holds the
  value at 0 and blocking those edits would block the remedy.
- `review_field_governance`: one field, one governor (`fivespot.api.fieldgovernance`, the rule's one
  definition). A ScheduledCapacity whose target object (any version) and capacity path equal or
  overlap an existing one's is denied on create, and on an update that changes its target or path,
  naming the existing one. An update that keeps the claim passes (two governors admitted while
  the webhook was down must stay editable, so the loser can be disabled or deleted); the
  controller is the backstop for those.
- `review_target_guard`: the capacity controller may change only an allowlisted capacity field
  of a governed object, to an integer within the consumer's ceiling. Any other change, and any
  create, delete or subresource write (`/status`, `/scale`, ...), is denied, but for the `/scale`
  of a consumer written through it (`Consumer.through_scale`), where only the value is judged.
  Fields the API server sets itself (`resourceVersion`, `generation`, ...) are not changes the caller made;
  field ownership (`managedFields`) may change only as the API server changes it for a write of
  the allowlisted field (`fivespot.webhook.ownership`). The guard judges what a write changes, not how it
  was sent (an AdmissionRequest does not say which patch type carried it): a JSON merge patch, a
  JSON patch, an apply or a PUT of only that field are the same write.
- `review_polyfill`: the compiled ValidatingAdmissionPolicies, decided by the evaluator
  `fivespot check` uses (`fivespot.policies.admission_eval`), never a second implementation.

Host and field governance and the polyfill never decide a request in the webhook's own namespace or
kube-system (`review` allows them first): they must never stand between the cluster and its own
recovery. The target guard decides in every namespace: its match condition already keeps every
identity but the capacity controller's away from it, so nobody's recovery waits on it, and the
capacity controller's ClusterRole reaches every namespace, so its second lock must too. Every
denial starts with the check's name and says what to do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from fivespot.api import fieldgovernance
from fivespot.api.bundle import Consumer, HostGovernanceAction
from fivespot.api.kinds import scheduled_capacity as scap
from fivespot.api.kinds.scheduled_machine import governed_node
from fivespot.policies.admission_eval import NamespaceRequired, PolicySet
from fivespot.policies.admission_eval import review as evaluate_policies
from fivespot.policies.admission_eval.vap import reasons_to_code
from fivespot.webhook.bundle import WebhookBundle
from fivespot.webhook.ownership import identical, ownership_changes

log = logging.getLogger("fivespot.webhook")

HOST_GOVERNANCE: Final = "host-governance"
FIELD_GOVERNANCE: Final = fieldgovernance.CHECK
TARGET_GUARD: Final = "target-guard"
VAP_POLYFILL: Final = "vap-polyfill"
CHECKS: Final = (HOST_GOVERNANCE, FIELD_GOVERNANCE, TARGET_GUARD, VAP_POLYFILL)
REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
REVIEW_KIND: Final = "AdmissionReview"

API_SERVER_METADATA: Final = frozenset({
    "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink",
})
"""Metadata the API server sets on every write; a difference there is not the caller's change."""
MANAGED_FIELDS: Final = "managedFields"
"""Judged apart (`fivespot.webhook.ownership`): the API server rewrites it, but a caller can write it too."""
NAMESPACE_EXEMPT_CHECKS: Final = frozenset({HOST_GOVERNANCE, FIELD_GOVERNANCE, VAP_POLYFILL})
"""The checks that never decide in the bundle's excluded namespaces (see the module docstring)."""

Verdict = Literal["allowed", "denied", "warned"]
MachinesByNamespace = Mapping[str, Iterable[Mapping[str, Any]]]
NamespaceLookup = Callable[[str], Mapping[str, Any] | None]
CapacitiesByTarget = Callable[[str], Iterable[Mapping[str, Any]]]
"""The ScheduledCapacities naming one target object, by `fivespot.api.fieldgovernance.target_key`."""
CapacityNow = Callable[[str, str], Mapping[str, Any] | None]
"""One ScheduledCapacity (namespace, name) read from the API server now, or None when it is gone;
raises when it cannot be read."""
AutoscalersIn = Callable[[str], Iterable[Mapping[str, Any]]]
"""The HorizontalPodAutoscalers and KEDA ScaledObjects of a namespace, now (`fivespot.webhook.caches`)."""


@dataclass(frozen=True)
class Response:
    """An AdmissionResponse."""

    uid: str
    allowed: bool
    message: str | None = None
    code: int | None = None
    reason: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        if not self.allowed:
            return "denied"
        return "warned" if self.warnings else "allowed"

    def review(self) -> dict[str, Any]:
        """The AdmissionReview (v1) carrying this response."""
        response: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if not self.allowed:
            status: dict[str, Any] = {"code": self.code or 403, "message": self.message or ""}
            if self.reason:
                status["reason"] = self.reason
            response["status"] = status
        if self.warnings:
            response["warnings"] = list(self.warnings)
        return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}


def allow(uid: str, warnings: tuple[str, ...] = ()) -> Response:
    return Response(uid, True, warnings=warnings)


def deny(uid: str, code: int, reason: str, message: str) -> Response:
    return Response(uid, False, message, code, reason)


# --- reading the review ------------------------------------------------------------------------


class Rejected(ValueError):
    """The body is not an AdmissionReview v1 with a request uid: answered with an HTTP 4xx,
    since without a uid there is no response the API server could match."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Malformed(ValueError):
    """An AdmissionRequest field the check needs is missing or has the wrong type."""


def parse_review(body: bytes) -> Mapping[str, Any]:
    """The AdmissionRequest inside an AdmissionReview v1 body; raises Rejected."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise Rejected(400, "the body is not JSON; send an AdmissionReview "
                            f"({REVIEW_API_VERSION})") from None
    if not isinstance(data, dict):
        raise Rejected(400, f"the body is JSON but not an object; send an AdmissionReview "
                            f"({REVIEW_API_VERSION})")
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if api_version != REVIEW_API_VERSION or kind != REVIEW_KIND:
        raise Rejected(400, f"expected apiVersion {REVIEW_API_VERSION} kind {REVIEW_KIND}, got "
                            f"{_short(api_version)} {_short(kind)}; list admissionReviewVersions: "
                            "[v1] in the webhook configuration")
    request = data.get("request")
    if not isinstance(request, dict):
        raise Rejected(400, "the AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise Rejected(400, "the AdmissionReview request has no uid")
    return request


def _short(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_JSON_TYPES: Final[dict[type, str]] = {Mapping: "an object", str: "a string", list: "an array"}


def _get(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise Malformed(f"{what} is missing or not {_JSON_TYPES.get(kind, kind.__name__)}")
    return value


def _optional(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise Malformed(f"{what} has the wrong type")
    return value


def malformed(uid: str, check: str, error: Exception) -> Response:
    return deny(uid, 400, "BadRequest",
                f"{check}: malformed AdmissionRequest: {error}; the API server always sends it "
                "well-formed, so check what is calling the webhook")


def _namespace(request: Mapping[str, Any]) -> str:
    return str(_optional(request, "namespace", str, "request.namespace") or "")


def _resource(request: Mapping[str, Any]) -> tuple[str, str]:
    resource = _get(request, "resource", Mapping, "request.resource")
    group = _optional(resource, "group", str, "request.resource.group") or ""
    return group, _get(resource, "resource", str, "request.resource.resource")


def _operation(request: Mapping[str, Any]) -> str:
    return str(_get(request, "operation", str, "request.operation"))


# --- host governance ---------------------------------------------------------------------------


def _node_name(obj: Mapping[str, Any] | None) -> str | None:
    if not isinstance(obj, Mapping):
        return None
    spec = obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) and node else None


def _name_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return str(name) if name else "?"


def review_host_governance(request: Mapping[str, Any], machines_by_namespace: MachinesByNamespace,
                           action: HostGovernanceAction) -> Response:
    """One host, one governor, at admission (the controller remains the backstop)."""
    uid = str(request["uid"])
    try:
        operation = _operation(request)
        group, resource = _resource(request)
        if operation not in ("CREATE", "UPDATE") or (group, resource) != (scap.GROUP, scap.PLURAL):
            return allow(uid)
        obj = _get(request, "object", Mapping, "request.object")
        node = _node_name(obj)
        if node is None:
            return allow(uid)
        if operation == "UPDATE" and _node_name(request.get("oldObject")) == node:
            return allow(uid)
        namespace = _namespace(request)
        governors = sorted(_name_of(m) for m in machines_by_namespace.get(namespace, ())
                           if governed_node(m.get("status")) == node)
    except Malformed as error:
        return malformed(uid, HOST_GOVERNANCE, error)
    if not governors:
        return allow(uid)
    which = ", ".join(governors)
    if action == "Warn":
        return allow(uid, (f"{HOST_GOVERNANCE}: node {node} is governed by ScheduledMachine "
                           f"{which}; name another node or unset spec.nodeName",))
    return deny(uid, 403, "Forbidden", (
        f"{HOST_GOVERNANCE}: spec.nodeName {node} is already governed by ScheduledMachine "
        f"{which} in namespace {namespace} (its status.nodeRef.name), and a host is governed by a "
        "ScheduledMachine or a ScheduledCapacity, never both; name another node, or leave "
        "spec.nodeName unset if you cannot name the node confidently"))


# --- field governance --------------------------------------------------------------------------


def _still_rivals(claim: fieldgovernance.Claim, rivals: list[fieldgovernance.Claim],
                  now: CapacityNow | None) -> list[fieldgovernance.Claim]:
    """The cached rivals that are still rivals in the API server. The cache lags a deletion (or a
    move to another field) by a watch event, and `kubectl delete` then `kubectl apply` of a
    replacement must not be refused for it; a rival that cannot be read stays a rival."""
    if now is None:
        return rivals
    confirmed = []
    for rival in rivals:
        try:
            current = now(rival.namespace, rival.name)
        except Exception:  # unreadable: keep the cached view (deny)
            confirmed.append(rival)
            continue
        fresh = fieldgovernance.claim_of(current) if current is not None else None
        if fresh is not None and fieldgovernance.overlaps(claim, fresh):
            confirmed.append(fresh)
    return confirmed


def _autoscaled(claim: fieldgovernance.Claim, autoscalers: AutoscalersIn | None) -> str | None:
    """The denial when an autoscaler in the namespace scales the claimed field's object. A list
    that fails admits (logged): the controller reports the pair when it sees it."""
    if autoscalers is None:
        return None
    try:
        found = list(autoscalers(claim.namespace))
    except Exception as error:  # the backstop is the controller's AutoscalerConflict
        log.warning("listing autoscalers failed; admitting", extra={"error": str(error)[:300]})
        return None
    writers = sorted((w for w in (fieldgovernance.writer_of(o, claim.namespace) for o in found)
                      if w is not None and w.autoscaler and fieldgovernance.written_by(claim, w)),
                     key=lambda w: (w.kind, w.name))
    return fieldgovernance.autoscaled_message(claim, writers[0]) if writers else None


def review_field_governance(request: Mapping[str, Any], capacities: CapacitiesByTarget,
                            now: CapacityNow | None = None,
                            autoscalers: AutoscalersIn | None = None) -> Response:
    """One field, one governor, at admission (the controller remains the backstop). A denial
    rests on the cache, confirmed by reading the rivals it names (`now`): only the deny path
    costs an API call."""
    uid = str(request["uid"])
    try:
        operation = _operation(request)
        group, resource = _resource(request)
        if operation not in ("CREATE", "UPDATE") or (group, resource) != (scap.GROUP, scap.PLURAL):
            return allow(uid)
        namespace = _namespace(request)
        claim = fieldgovernance.claim_of(_get(request, "object", Mapping, "request.object"), namespace)
        if claim is None:
            return allow(uid)  # no writable field named: the schema and the policies refuse it
        if operation == "UPDATE":
            old = request.get("oldObject")
            before = fieldgovernance.claim_of(old, namespace) if isinstance(old, Mapping) else None
            if before is not None and (before.key, before.path) == (claim.key, claim.path):
                return allow(uid)
        existing = [c for c in (fieldgovernance.claim_of(o) for o in capacities(claim.key))
                    if c is not None]
    except Malformed as error:
        return malformed(uid, FIELD_GOVERNANCE, error)
    rivals = fieldgovernance.conflicts(claim, existing)
    if rivals:
        rivals = _still_rivals(claim, rivals, now)
    if rivals:
        return deny(uid, 403, "Forbidden", fieldgovernance.denial(claim, rivals))
    scaled = _autoscaled(claim, autoscalers)
    if scaled is not None:
        return deny(uid, 403, "Forbidden", scaled)
    return allow(uid)


# --- the governed-target diff guard ------------------------------------------------------------

_MISSING: Final = object()
Path = tuple[str, ...]


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def changed_paths(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Path]:
    """Every leaf path whose value differs between `old` and `new`, API-server metadata and
    field ownership aside (`ownership_changes` judges that).

    Iterative (an object nested thousands deep cannot exhaust the stack), and strict about
    types (`1`, `1.0` and `true` are different values). A subtree left as it was (all of a
    Deployment's but its replicas, when the capacity controller writes those) is passed over
    whole (`identical`), not walked."""
    found: list[Path] = []
    stack: list[tuple[Path, object, object]] = [((), old, new)]
    while stack:
        path, a, b = stack.pop()
        if path and isinstance(a, Mapping | list) and identical(a, b):
            continue
        if a is _MISSING and isinstance(b, Mapping) and b:
            a = {}
        if b is _MISSING and isinstance(a, Mapping) and a:
            b = {}
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for key in set(a) | set(b):
                if path == ("metadata",) and (key in API_SERVER_METADATA or key == MANAGED_FIELDS):
                    continue
                stack.append((path + (str(key),), a.get(key, _MISSING), b.get(key, _MISSING)))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for index, (x, y) in enumerate(zip(a, b)):
                stack.append((path + (f"[{index}]",), x, y))
        elif not _same(a, b):
            found.append(path)
    return sorted(found)


def _value_at(obj: Mapping[str, Any], path: Path) -> object:
    value: object = obj
    for segment in path:
        if not isinstance(value, Mapping) or segment not in value:
            return _MISSING
        value = value[segment]
    return value


def _show(paths: list[Path], limit: int = 5) -> str:
    shown = ", ".join(".".join(p) or "(the whole object)" for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _other_changes(request: Mapping[str, Any], consumer: Consumer) -> tuple[list[Path], list[str]]:
    """The changed paths outside the allowlist, and how field ownership changes outside it."""
    old = _get(request, "oldObject", Mapping, "request.oldObject")
    new = _get(request, "object", Mapping, "request.object")
    allowed_paths = consumer.path_segments
    other = [p for p in changed_paths(old, new) if not any(p[:len(a)] == a for a in allowed_paths)]
    ownership = ownership_changes(_managed_fields(old), _managed_fields(new), allowed_paths)
    if ownership:
        other.append(("metadata", MANAGED_FIELDS))
    return sorted(other), ownership


def _managed_fields(obj: Mapping[str, Any]) -> object:
    meta = obj.get("metadata")
    return meta.get(MANAGED_FIELDS) if isinstance(meta, Mapping) else None


def _value_refusal(uid: str, request: Mapping[str, Any], consumer: Consumer,
                   target: str) -> Response | None:
    """A changed allowlisted field must hold an integer from 0 to the consumer's ceiling."""
    old = _get(request, "oldObject", Mapping, "request.oldObject")
    new = _get(request, "object", Mapping, "request.object")
    for path in consumer.path_segments:
        before, value = _value_at(old, path), _value_at(new, path)
        if _same(before, value):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or \
                not 0 <= value <= consumer.max_active_value:
            shown = "nothing (removed)" if value is _MISSING else _short(value)
            return deny(uid, 403, "Forbidden", (
                f"{TARGET_GUARD}: {'.'.join(path)} of {target} must be an integer from 0 to "
                f"{consumer.max_active_value} (the consumer's maxActiveValue), not {shown}; "
                "fix spec.capacity.activeValue of the ScheduledCapacity that targets it"))
    return None


def _guard_update(uid: str, request: Mapping[str, Any], consumer: Consumer, target: str) -> Response:
    fields = " or ".join(consumer.capacity_paths)
    other, ownership = _other_changes(request, consumer)
    if other:
        why = f" ({'; '.join(ownership)}: field ownership is not the controller's to change)" \
            if ownership else ""
        return deny(uid, 403, "Forbidden", (
            f"{TARGET_GUARD}: the capacity controller may change only {fields} of {target}, but "
            f"this request also changes {_show(other)}{why}; a write by the controller changes "
            "that one field and nothing else, whatever patch type carries it (check the "
            "controller's version and the ScheduledCapacity's spec.capacity.path)"))
    return _value_refusal(uid, request, consumer, target) or allow(uid)


def _operation_refusal(uid: str, request: Mapping[str, Any], consumer: Consumer,
                       target: str) -> Response | None:
    """Anything but an UPDATE of the object itself (or of its `/scale`, for a consumer written
    through it: decision 0050) is refused, saying why."""
    fields = " or ".join(consumer.capacity_paths)
    sub = _optional(request, "subResource", str, "request.subResource")
    operation = _operation(request)
    if sub == "scale" and consumer.through_scale and operation == "UPDATE":
        return None  # judged as any update: `spec.replicas` alone, within the ceiling
    if sub:
        return deny(uid, 403, "Forbidden", (
            f"{TARGET_GUARD}: the capacity controller may not write the {sub} subresource of "
            f"{target}; it may only change {fields} on the object itself"))
    if operation == "CREATE":
        return deny(uid, 403, "Forbidden", (
            f"{TARGET_GUARD}: the capacity controller may not create {consumer.kind} objects; "
            f"it only changes {fields} of existing ones. Create {target} yourself: its "
            "ScheduledCapacity reports TargetResolved=False until it exists"))
    if operation == "DELETE":
        return deny(uid, 403, "Forbidden", (
            f"{TARGET_GUARD}: the capacity controller may not delete {target}; draining and "
            "deleting belong to the consumer. Remove any RBAC grant that lets it delete"))
    if operation != "UPDATE":
        return deny(uid, 403, "Forbidden", (
            f"{TARGET_GUARD}: the capacity controller may not {operation} {target}; it may "
            f"only change {fields}"))
    return None


def _with_scale_defaults(request: Mapping[str, Any]) -> Mapping[str, Any]:
    """The request with each Scale's `spec.replicas` filled in: a Scale leaves it out when it is
    0 (`omitempty`), which the guard would otherwise read as the field removed."""
    def filled(scale: object) -> object:
        if not isinstance(scale, Mapping):
            return scale
        spec = scale.get("spec")
        spec = dict(spec) if isinstance(spec, Mapping) else {}
        spec.setdefault("replicas", 0)
        return {**scale, "spec": spec}
    return {**request, "object": filled(request.get("object")),
            "oldObject": filled(request.get("oldObject"))}


def review_target_guard(request: Mapping[str, Any], bundle: WebhookBundle) -> Response:
    """The capacity controller's identity may change one allowlisted field, nothing else."""
    uid = str(request["uid"])
    try:
        user = _get(request, "userInfo", Mapping, "request.userInfo").get("username")
        if user != bundle.capacity_identity:
            return allow(uid)  # not the governed identity (the match condition's job, again)
        group, resource = _resource(request)
        consumer = bundle.consumer_for(group, resource)
        if consumer is None:
            return allow(uid)
        namespace = _namespace(request)
        name = str(_optional(request, "name", str, "request.name") or "")
        target = f"{consumer.kind} {namespace + '/' if namespace else ''}{name}".rstrip()
        if request.get("subResource") == "scale" and consumer.through_scale:
            request = _with_scale_defaults(request)
        return _operation_refusal(uid, request, consumer, target) or \
            _guard_update(uid, request, consumer, target)
    except Malformed as error:
        return malformed(uid, TARGET_GUARD, error)
    except RecursionError:
        return malformed(uid, TARGET_GUARD, Malformed("the object is nested too deeply"))


# --- the VAP polyfill --------------------------------------------------------------------------


def review_polyfill(request: Mapping[str, Any], policies: PolicySet,
                    namespaces: NamespaceLookup) -> Response:
    """The compiled policies' verdict, worded as the API server words a VAP denial."""
    uid = str(request["uid"])
    try:
        _operation(request)
        _resource(request)
        _optional(request, "object", Mapping, "request.object")
        _optional(request, "oldObject", Mapping, "request.oldObject")
        _optional(request, "userInfo", Mapping, "request.userInfo")
        namespace = _namespace(request)
    except Malformed as error:
        return malformed(uid, VAP_POLYFILL, error)
    try:
        verdict = evaluate_policies(policies, request)
    except NamespaceRequired as needed:
        namespace_object = namespaces(needed.namespace)
        if namespace_object is None:
            return deny(uid, 503, "ServiceUnavailable", (
                f"{VAP_POLYFILL}: namespace {namespace} is not in the webhook's cache yet "
                f"({needed.needed_by} needs its labels); retry in a moment"))
        verdict = evaluate_policies(policies, request, namespace_object)
    if verdict.allowed:
        return allow(uid, tuple(verdict.warnings))
    first = verdict.violations[0]
    message = "; ".join(v.message for v in verdict.violations)
    return Response(uid, False, f"{VAP_POLYFILL}: {message}", reasons_to_code(first.reason or "Invalid"),
                    first.reason or "Invalid", tuple(verdict.warnings))


# --- dispatch ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lookups:
    """What the checks read besides the request (watch-fed caches in the server)."""

    machines_by_namespace: MachinesByNamespace
    namespaces: NamespaceLookup
    capacities_by_target: CapacitiesByTarget
    capacity_now: CapacityNow | None = None
    """Confirms a field-governance denial against the API server (None: the cache alone)."""
    autoscalers: AutoscalersIn | None = None
    """Lists a namespace's autoscalers for field governance (None: not counted)."""


def review(check: str, request: Mapping[str, Any], bundle: WebhookBundle, lookups: Lookups) -> Response:
    """Decide `request` with `check`; host and field governance and the polyfill always allow
    requests in the excluded namespaces."""
    uid = str(request["uid"])
    namespace = request.get("namespace")
    if check in NAMESPACE_EXEMPT_CHECKS and isinstance(namespace, str) and \
            namespace in bundle.excluded_namespaces:
        return allow(uid)
    if check == HOST_GOVERNANCE:
        return review_host_governance(request, lookups.machines_by_namespace,
                                      bundle.host_governance)
    if check == FIELD_GOVERNANCE:
        return review_field_governance(request, lookups.capacities_by_target, lookups.capacity_now,
                                       lookups.autoscalers)
    if check == TARGET_GUARD:
        return review_target_guard(request, bundle)
    if check == VAP_POLYFILL:
        if bundle.policies is None:
            return allow(uid)  # enforcement is `vap`: the API server's own policies decide
        return review_polyfill(request, bundle.policies, lookups.namespaces)
    raise ValueError(f"unknown check {check!r}")
