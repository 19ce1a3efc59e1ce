"""Which field each of fivespot's own admission validations is about.

A ValidatingAdmissionPolicy denial carries no field; the API server says only which policy and
binding denied. fivespot's policies are defined in `fivespot.policies.admission` with a `field` each, so a
validation compiled from one of them is mapped back to its field by (policy, expression). A
validation written by anyone else has no known field (None).
"""

from __future__ import annotations

import functools

from fivespot.policies import admission


@functools.cache
def known_fields() -> dict[tuple[str, str], str]:
    """(policy name, validation expression) -> field, for every validation fivespot emits.

    The expressions do not depend on the factories' arguments (only the messages do), so
    calling them with an example argument yields the exact emitted expression.
    """
    table: dict[tuple[str, str], str] = {}
    tenancy = admission.TENANCY_VALIDATION
    table[(admission.TENANCY, tenancy.expression)] = tenancy.field
    kinds = admission.schedule_kind_validation(["Example"])
    table[(admission.SCHEDULE_KINDS, kinds.expression)] = kinds.field
    for validation in admission.TENANT_LIMIT_VALIDATIONS:
        table[(admission.TENANT_LIMITS, validation.expression)] = validation.field
    author = admission.SCAP_AUTHOR_VALIDATION
    table[(admission.SCAP_AUTHOR_RIGHTS, author.expression)] = author.field
    for validation in admission.MACHINE_AUTHOR_VALIDATIONS:
        table[(admission.MACHINE_AUTHOR_RIGHTS, validation.expression)] = validation.field
    return table


def field_of(policy: str, expression: str) -> str | None:
    """The field a validation of `policy` is about, or None when it is not one of fivespot's."""
    return known_fields().get((policy, expression))
