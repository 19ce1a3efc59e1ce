"""The `Status` (`result.Status`) the API server answers a denied create or update of a custom
resource with.

`kubectl` prints its `message` (`Error from server (Invalid): error when creating "x.yaml": ...`,
or for a 422 `The Kind "name" is invalid:` and one line per cause), so this is what a user
compares with. Three shapes, in the order the server's handlers meet them:

- 400 BadRequest from the strict decoder (`fieldValidation=Strict`, kubectl's default): duplicate
  fields as the JSON decoder found them, then unknown fields sorted, in one message, no causes;
- 422 Invalid from the CRD's schema and rules: one cause per field error, the message their
  `utilerrors` aggregate (`[a, b]` for several, a field-less cause shown as `<nil>`);
- the first denying ValidatingAdmissionPolicy: `Forbidden`-worded whatever its reason, with the
  code of that reason and the denial as its one cause.

The wording is that of `gotext.SERVER_VERSION`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from msgspec import Struct

from fivespot.policies.admission_eval.gotext import aggregate
from fivespot.policies.admission_eval.result import VAP, Cause, Status, Violation

_VAP_CODES: Final = {"Forbidden": 403, "Invalid": 422, "Unauthorized": 401,
                     "RequestEntityTooLarge": 413}
NO_FIELD: Final = "<nil>"
"""How a field error without a path (`field.Invalid(nil, ...)`) shows its field."""


class Target(Struct, frozen=True):
    """What the server names in its messages: the kind, its group, version and resource, the
    object's name."""

    kind: str
    group: str
    version: str
    plural: str
    name: str


def strict_decoding(target: Target, problems: Sequence[str]) -> Status:
    """`strict decoding error: duplicate field "a", unknown field "b"` (400)."""
    return Status(400, "BadRequest",
                  f'{target.kind} in version "{target.version}" cannot be handled as a '
                  f"{target.kind}: strict decoding error: {', '.join(problems)}")


def invalid(target: Target, violations: Sequence[Violation]) -> Status:
    """The 422 of field errors (schema, CRD rules)."""
    causes = tuple(Cause(v.field or NO_FIELD, v.message, v.reason) for v in violations)
    text = aggregate([f"{c.field}: {c.message}" for c in causes])
    return Status(422, "Invalid", f'{target.kind}.{target.group} "{target.name}" is invalid: {text}',
                  causes)


def denied_by_policy(target: Target, violation: Violation) -> Status:
    """The first ValidatingAdmissionPolicy denial."""
    reason = violation.reason or "Forbidden"
    return Status(_VAP_CODES.get(reason, 403), reason,
                  f'{target.plural}.{target.group} "{target.name}" is forbidden: {violation.message}',
                  (Cause(None, violation.message),))


def of(target: Target, violations: Sequence[Violation]) -> Status | None:
    """The Status for a denial with these violations (None when allowed)."""
    if not violations:
        return None
    if violations[0].reason == STRICT_DECODING:
        return strict_decoding(target, [v.message for v in violations])
    if violations[0].source == VAP:
        return denied_by_policy(target, violations[0])
    return invalid(target, violations)


STRICT_DECODING: Final = "StrictDecoding"
"""The `reason` of a Violation for a duplicate or unknown field under `Strict`."""
