"""The whole admission path for custom resources, offline: CRD schema and rules, then policies.

`Checker.compile(objects)` takes what `fivespot compile` wrote (CRDs, ValidatingAdmissionPolicies,
bindings, params objects) and decides requests as the API server would: first decoding and the
CRD's own validation (an error there is final, as a 422 is), then every bound policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from msgspec import Struct, field

from fivespot.policies.admission_eval import crd, status
from fivespot.policies.admission_eval.crd import CustomResourceKind
from fivespot.policies.admission_eval.result import SCHEMA, Verdict, Violation
from fivespot.policies.admission_eval.vap import PolicySet
from fivespot.policies.cel import authz
from fivespot.policies.kubeversions import KubernetesVersion

DEFAULT_NAMESPACE: Final = "default"
DEFAULT_USER: Final[Mapping[str, Any]] = {"username": "fivespot-check",
                                          "groups": ["system:authenticated"]}
FieldValidation = Literal["Strict", "Warn", "Ignore"]
FIELD_VALIDATIONS: Final[tuple[FieldValidation, ...]] = ("Strict", "Warn", "Ignore")
"""The API server's `fieldValidation` modes; kubectl sends Strict unless told `--validate=warn`
(Warn) or `--validate=false` (Ignore)."""


class UnknownKind(LookupError):
    """The object's apiVersion/kind is not a custom resource the policies define.

    `governed`: whether its API group is still the policies' business (a CRD they define is in
    it, or a ValidatingAdmissionPolicy may match it), so the object cannot be decided, rather
    than being one no policy here applies to (a Deployment beside its ScheduledCapacity).
    """

    def __init__(self, api_version: str, kind: str, known: list[str], *,
                 group_defined: bool = True, group_matched: bool = True) -> None:
        super().__init__(f"{kind} ({api_version}) is not a kind the policies define")
        self.api_version = api_version
        self.kind = kind
        self.known = known
        self.group_defined = group_defined
        """A CRD the policies define is in the object's group."""
        self.governed = group_defined or group_matched


class Request(Struct, frozen=True):
    """One admission request: CREATE of `object`, or UPDATE from `old_object` to `object`."""

    operation: Literal["CREATE", "UPDATE"]
    object: Mapping[str, Any]
    old_object: Mapping[str, Any] | None = None
    namespace_object: Mapping[str, Any] | None = None
    user_info: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_USER))
    field_validation: FieldValidation = "Strict"
    duplicate_fields: tuple[str, ...] = ()
    """Fields the input gave more than once (`spec.enabled`), as the strict decoder names them;
    the reader finds them (a decoded mapping has lost them)."""
    authorizer: Mapping[str, Any] = field(default_factory=authz.assumed)
    """The requesting user's `authorizer` (`fivespot.policies.cel.authz`): every check assumed allowed,
    unless the user's rights are stated (`authz.stated`)."""


def group_of(api_version: str) -> str:
    """The API group of an apiVersion: `apps` of `apps/v1`, '' (core) of `v1`."""
    return api_version.rpartition("/")[0]


def admission_request(kind: CustomResourceKind, operation: str, obj: Mapping[str, Any],
                      old: Mapping[str, Any] | None, user_info: Mapping[str, Any],
                      namespace: str) -> dict[str, Any]:
    """The AdmissionRequest the API server would build (the shape webhooks and CEL see)."""
    meta = obj.get("metadata") or {}
    gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    gvr = {"group": kind.group, "version": kind.version, "resource": kind.plural}
    return {
        "uid": "", "kind": gvk, "resource": gvr, "subResource": "",
        "requestKind": gvk, "requestResource": gvr, "requestSubResource": "",
        "name": str(meta.get("name") or ""), "namespace": namespace,
        "operation": operation, "userInfo": dict(user_info), "object": obj, "oldObject": old,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1",
                    "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions"},
    }


class Checker(Struct, frozen=True, eq=False):
    """Compiled CRDs and policies."""

    kinds: dict[tuple[str, str], CustomResourceKind]
    policies: PolicySet
    server: KubernetesVersion
    """The API server version whose decisions and messages this checker gives."""

    @classmethod
    def compile(cls, objects: Iterable[Mapping[str, Any]], *, lazy_schemas: bool = False,
                server: KubernetesVersion) -> Checker:
        """From every object of a compiled output; CRDs, VAPs, bindings and the policies'
        params objects are used, the rest ignored; requests are decided as the API server of
        version `server` decides them. Raises SchemaError / PolicyConfigError (`lazy_schemas`:
        see `crd.compile_crds`)."""
        objects = list(objects)
        kinds = crd.compile_crds((o for o in objects if o.get("kind") == "CustomResourceDefinition"
                                  and str(o.get("apiVersion", "")).startswith("apiextensions.k8s.io/")),
                                 lazy=lazy_schemas, server=server)
        policies = PolicySet.compile(objects)
        param_kinds = policies.param_kinds
        params = [o for o in objects
                  if (str(o.get("apiVersion", "")), str(o.get("kind", ""))) in param_kinds]
        return cls(kinds, policies.with_params(params), server)

    def kind_of(self, obj: Mapping[str, Any]) -> CustomResourceKind:
        """The compiled kind of `obj`; raises UnknownKind."""
        key = (str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        found = self.kinds.get(key)
        if found is None:
            known = sorted(f"{k.kind} ({k.api_version})" for k in self.kinds.values())
            group = group_of(key[0])
            raise UnknownKind(key[0], key[1], known,
                              group_defined=any(k.group == group for k in self.kinds.values()),
                              group_matched=self.policies.may_match_group(group))
        return found

    def namespace_of(self, obj: Mapping[str, Any]) -> str:
        """The namespace the request is for ('' for cluster-scoped kinds; `default` if unset)."""
        if not self.kind_of(obj).namespaced:
            return ""
        return str((obj.get("metadata") or {}).get("namespace") or DEFAULT_NAMESPACE)

    def check(self, request: Request) -> Verdict:
        """The API server's decision. Raises UnknownKind, or vap.NamespaceRequired when a
        binding's namespace selector needs labels of a namespace object not given."""
        kind = self.kind_of(request.object)
        namespace = (str((request.object.get("metadata") or {}).get("namespace") or DEFAULT_NAMESPACE)
                     if kind.namespaced else "")
        admitted = crd.admit(kind, request.operation, request.object, request.old_object)
        target = status.Target(kind.kind, kind.group, kind.version, kind.plural,
                               str((request.object.get("metadata") or {}).get("name") or ""))
        undecodable = _field_problems(request, admitted.warnings)
        if undecodable and request.field_validation == "Strict":
            violations = tuple(Violation(SCHEMA, kind.crd_name, field_path, problem,
                                         reason=status.STRICT_DECODING)
                               for field_path, problem in undecodable)
            return Verdict(False, violations, (), status=status.of(target, violations))
        warnings = tuple(p for _, p in undecodable) if request.field_validation == "Warn" else ()
        warnings += admitted.notices
        if admitted.violations:
            return Verdict(False, admitted.violations, warnings,
                           status=status.of(target, admitted.violations))
        review = admission_request(kind, request.operation, admitted.object, admitted.old_object,
                                   request.user_info, namespace)
        outcome = self.policies.evaluate(review, request.namespace_object, request.authorizer)
        return Verdict(not outcome.violations, outcome.violations, warnings + outcome.warnings,
                       outcome.audit, status=status.of(target, outcome.violations),
                       assumed=outcome.assumed)


def _field_problems(request: Request, unknown: tuple[str, ...]) -> list[tuple[str, str]]:
    """(field, `duplicate field "f"` / `unknown field "f"`) in the strict decoder's order:
    duplicates as found, then unknown fields sorted by path."""
    found = [(path, f'duplicate field "{path}"') for path in request.duplicate_fields]
    paths = sorted(text[len('unknown field "'):-1] for text in unknown)
    return found + [(path, f'unknown field "{path}"') for path in paths]
