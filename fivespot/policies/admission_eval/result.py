"""What an admission decision looks like: allowed or not, every violation, every warning, and
the `Status` the API server answers a denial with (`status` words it).

`source` says which layer of the API server decided: `schema` (the CRD's structural schema),
`crd-rule` (its `x-kubernetes-validations`), `vap` (a ValidatingAdmissionPolicy) or `webhook`
(a rule fivespot's admission webhook enforces, applied among the objects given:
`fivespot.compiler.check.governance`).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from msgspec import Struct

Source = Literal["schema", "crd-rule", "vap", "webhook"]
SCHEMA: Final = "schema"
CRD_RULE: Final = "crd-rule"
VAP: Final = "vap"


class Cause(Struct, frozen=True):
    """One field error of a `Status` (apimachinery `metav1.StatusCause`)."""

    field: str | None
    message: str
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        if self.reason:
            shown["reason"] = self.reason
        shown["message"] = self.message
        if self.field is not None:
            shown["field"] = self.field
        return shown


class Status(Struct, frozen=True):
    """A failure `Status` (apimachinery `metav1.Status`): what the API server returns."""

    code: int
    reason: str
    message: str
    causes: tuple[Cause, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "message": self.message,
                "causes": [c.as_json() for c in self.causes]}


class Violation(Struct, frozen=True):
    """One reason the request is denied."""

    source: Source
    policy: str
    """The CRD name (schema, crd-rule) or the ValidatingAdmissionPolicy name (vap)."""
    field: str | None
    """The field at fault, `spec.capacity.path` style; None when no field is known."""
    message: str
    """The text the API server would return for it."""
    binding: str | None = None
    reason: str | None = None
    """Status reason (VAP: Forbidden, Invalid...; schema: the field error type)."""

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "policy": self.policy, "field": self.field,
                "message": self.message}


class Verdict(Struct, frozen=True):
    """The decision for one request."""

    allowed: bool
    violations: tuple[Violation, ...] = ()
    warnings: tuple[str, ...] = ()
    audit: tuple[str, ...] = ()
    """Messages of failed validations bound with the Audit action (not shown to the client)."""
    status: Status | None = None
    """What the API server answers a denial with (its message is what kubectl prints)."""
    assumed: tuple[str, ...] = ()
    """The policies whose `authorizer` checks were assumed to allow (the user's rights were not
    stated): an offline verdict reached so is not RBAC's approval (`fivespot.policies.cel.authz`)."""

    def __eq__(self, other: object) -> bool:  # the decision, not how it is worded or audited
        return isinstance(other, Verdict) and (
            (self.allowed, self.violations, self.warnings)
            == (other.allowed, other.violations, other.warnings))

    def __hash__(self) -> int:
        return hash((self.allowed, self.violations, self.warnings))

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"allowed": self.allowed,
                                 "violations": [v.as_json() for v in self.violations],
                                 "warnings": list(self.warnings)}
        if self.status is not None:
            shown["status"] = self.status.as_json()
        if self.assumed:
            shown["authorizerAssumed"] = list(self.assumed)
        return shown
