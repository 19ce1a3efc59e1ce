"""The offline admission evaluator: what the API server decides for a custom resource.

It is pure (no I/O) and shared: `fivespot check` / `fivespot test` use `Checker` (CRD schema,
CRD rules and ValidatingAdmissionPolicies), and the webhook's VAP polyfill uses `review` with
the bundle's `admission.policies` and `admission.params` (policies only; the API server has
already applied the CRD schema by the time a webhook is called).

    from fivespot.policies.admission_eval import PolicySet, review
    policy_set = PolicySet.compile(bundle["admission"]["policies"], bundle["admission"]["params"])
    verdict = review(policy_set, admission_review["request"], namespace_object)
    verdict.allowed, verdict.violations, verdict.warnings
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fivespot.policies.admission_eval.chain import (
    FIELD_VALIDATIONS,
    Checker,
    FieldValidation,
    Request,
    UnknownKind,
    admission_request,
    group_of,
)
from fivespot.policies.admission_eval.result import CRD_RULE, SCHEMA, VAP, Verdict, Violation
from fivespot.policies.admission_eval.structural import SchemaError
from fivespot.policies.admission_eval.vap import NamespaceRequired, PolicyConfigError, PolicySet
from fivespot.policies.cel import authz


def review(policies: PolicySet, request: Mapping[str, Any],
           namespace_object: Mapping[str, Any] | None = None,
           authorizer: Mapping[str, Any] = authz.ASSUMED) -> Verdict:
    """Decide an AdmissionReview `request` against compiled policies (the VAP polyfill).

    `namespace_object` is the request namespace's Namespace object (needed only when a binding
    selects namespaces by labels other than `kubernetes.io/metadata.name`; otherwise None is
    fine). Raises NamespaceRequired when it is needed and missing. `authorizer`: see
    `fivespot.policies.cel.authz` (by default every authorizer check is assumed allowed, and the verdict
    names the policies that asked in `assumed`).
    """
    outcome = policies.evaluate(request, namespace_object, authorizer)
    return Verdict(not outcome.violations, outcome.violations, outcome.warnings, outcome.audit,
                   assumed=outcome.assumed)


__all__ = [
    "CRD_RULE",
    "FIELD_VALIDATIONS",
    "SCHEMA",
    "VAP",
    "Checker",
    "FieldValidation",
    "NamespaceRequired",
    "PolicyConfigError",
    "PolicySet",
    "Request",
    "SchemaError",
    "UnknownKind",
    "Verdict",
    "Violation",
    "admission_request",
    "group_of",
    "review",
]
