"""The admission policies of fivespot, each CEL snippet a named constant.

These are the ValidatingAdmissionPolicies the compiler emits (and the webhook's polyfill and the
offline checker evaluate): what a tenant namespace may do with ScheduledCapacity. Every message
starts with the policy name and says what to change. Per-object rules (shape, the field-path
rule, the provider group) live in the CRD schema instead: see `api.kinds`.
"""

from __future__ import annotations

from typing import Final

from msgspec import Struct


class Validation(Struct, frozen=True):
    """One VAP validation: the rule, the field it is about, and a message expression."""

    name: str
    expression: str
    message_expression: str
    field: str
    reason: str = "Forbidden"


class Variable(Struct, frozen=True):
    name: str
    expression: str


TENANCY: Final = "fivespot-scap-tenancy"
SCHEDULE_KINDS: Final = "fivespot-scap-schedule-kinds"
TENANT_LIMITS: Final = "fivespot-tenant-limits"

TENANT_LIMITS_FAILURE_POLICY: Final = "Ignore"
"""The tenant limits fail open when the policy cannot be evaluated, the other two fail closed.
Its params kind is a CRD, and after about half of all API server restarts the server refuses
every request the policy matches for ~30 s with `failed to configure policy: failed to find
resource referenced by paramKind` (kubernetes/kubernetes#124237, #122658) — a ScheduledCapacity's
kill switch included, and a policy's matchConditions cannot help, since that error is raised
before they are evaluated. The limits still hold: the capacity controller never writes a value
the tenant's limits forbid, whatever admission let through, and the audit reports such objects;
with `enforcement: both` the webhook's polyfill enforces them meanwhile."""

# --- ratchets: moving toward compliance is never refused ---------------------------------------
# Admission judges a write, not what is stored: once a policy is tightened, a stored object may
# break it. Each rule below therefore also admits an UPDATE that leaves the fields it judges as
# they were (or, for a value, no higher): disabling the object, flipping its kill switch, lowering
# its value or editing its labels is admitted; raising a violated value, changing the target or
# adding a new violation is denied with the rule's own message. CREATE is judged as before.

UPDATE: Final = "request.operation == 'UPDATE'"
SAME_TARGET: Final = "object.spec.targetRef == oldObject.spec.targetRef"
SAME_PATH: Final = "object.spec.capacity.path == oldObject.spec.capacity.path"
NO_HIGHER: Final = "object.spec.capacity.activeValue <= oldObject.spec.capacity.activeValue"
SAME_NODE: Final = "object.spec.?nodeName == oldObject.spec.?nodeName"
SAME_HANDBACK: Final = "object.spec.?handback == oldObject.spec.?handback"
SAME_SCHEDULE: Final = "object.spec.schedule == oldObject.spec.schedule"


def ratcheted(rule: str, *unchanged: str) -> str:
    """`rule`, or an UPDATE that keeps every `unchanged` condition (no worse than before)."""
    return f"({rule}) || ({' && '.join((UPDATE, *unchanged))})"


# --- the emergency controls: never behind fivespot's own webhook ---------------------------------

EMERGENCY_STOP_CONDITION: Final = "not-an-emergency-stop"
EMERGENCY_STOP: Final = (
    f"!({UPDATE} && (object.spec.?killSwitch.orValue(false) == true || "
    "object.spec.?enabled.orValue(true) == false) && "
    f"{SAME_SCHEDULE} && {SAME_TARGET} && "
    "object.spec.capacity == oldObject.spec.capacity && "
    f"{SAME_HANDBACK} && {SAME_NODE})"
)
"""The webhook's match condition on ScheduledCapacity: true — send the request to the webhook —
unless it is an UPDATE that stops the object (kill switch on, or disabled) and changes nothing
it governs (schedule, target, capacity, handback, node). Such an update never needs the
webhook's cross-object checks (a stopped object writes nothing but 0 to what it already
governs), so it is admitted whether the webhook is up, down or denying: the emergency controls
do not depend on fivespot being well. Delete is never sent to the webhook at all."""

# --- fivespot-scap-tenancy: only namespaces with a TenantPolicy may use ScheduledCapacity -------

TENANT_NAMESPACES_VARIABLE: Final = "tenantNamespaces"


def tenancy_validation(namespaces: list[str]) -> Validation:
    allowed = ", ".join(namespaces) or "none"
    return Validation(
        name="namespace-has-tenant-policy",
        expression=ratcheted(f"request.namespace in variables.{TENANT_NAMESPACES_VARIABLE}",
                             SAME_SCHEDULE, SAME_TARGET, SAME_PATH, NO_HIGHER, SAME_NODE),
        message_expression=(
            f"'{TENANCY}: namespace ' + request.namespace + ' has no TenantPolicy, so it may not "
            f"use ScheduledCapacity; ask the platform team for one (namespaces with one: {allowed})'"
        ),
        field="metadata.namespace",
    )


# --- fivespot-scap-schedule-kinds: the schedule must be an installed provider kind -------------

SCHEDULE_KINDS_VARIABLE: Final = "providerKinds"


def schedule_kind_validation(kinds: list[str]) -> Validation:
    return Validation(
        name="schedule-kind-installed",
        expression=ratcheted(f"object.spec.schedule.kind in variables.{SCHEDULE_KINDS_VARIABLE}",
                             SAME_SCHEDULE),
        message_expression=(
            f"'{SCHEDULE_KINDS}: spec.schedule.kind ' + object.spec.schedule.kind + ' is not an "
            f"installed spot-schedule provider; use one of: {', '.join(kinds)}'"
        ),
        field="spec.schedule.kind",
        reason="Invalid",
    )


# --- fivespot-tenant-limits: per-tenant limits from a TenantCapacityLimit params object --------

TENANT_LIMIT_VARIABLES: Final = (
    Variable(
        "targetGroup",
        "object.spec.targetRef.apiVersion.contains('/') ? "
        "object.spec.targetRef.apiVersion.split('/')[0] : ''",
    ),
    Variable(
        "consumers",
        "params.spec.consumers.filter(c, c.group == variables.targetGroup && "
        "c.kind == object.spec.targetRef.kind)",
    ),
)

_ALLOWED_KINDS: Final = "params.spec.consumers.map(c, c.kind + '.' + c.group).join(', ')"

TENANT_LIMIT_VALIDATIONS: Final = (
    Validation(
        name="consumer-allowed",
        expression=ratcheted("variables.consumers.size() > 0", SAME_TARGET),
        message_expression=(
            f"'{TENANT_LIMITS}: ' + object.spec.targetRef.kind + '.' + variables.targetGroup + "
            "' is not a consumer TenantPolicy ' + params.spec.tenantPolicy + ' allows in namespace ' "
            f"+ request.namespace + '; spec.targetRef may name: ' + {_ALLOWED_KINDS}"
        ),
        field="spec.targetRef",
    ),
    Validation(
        name="capacity-path-allowed",
        expression=ratcheted(
            "variables.consumers.size() == 0 || "
            "object.spec.capacity.path in variables.consumers[0].capacityPaths",
            SAME_TARGET, SAME_PATH),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.capacity.path ' + object.spec.capacity.path + ' is not an "
            "allowlisted capacity field of ' + object.spec.targetRef.kind + '; use one of: ' + "
            "variables.consumers[0].capacityPaths.join(', ')"
        ),
        field="spec.capacity.path",
    ),
    Validation(
        name="active-value-within-tenant-limit",
        expression=ratcheted("object.spec.capacity.activeValue <= params.spec.maxActiveValue",
                             SAME_TARGET, NO_HIGHER),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.capacity.activeValue ' + string(object.spec.capacity.activeValue) "
            "+ ' exceeds the limit ' + string(params.spec.maxActiveValue) + ' of TenantPolicy ' + "
            "params.spec.tenantPolicy + '; set it to at most ' + string(params.spec.maxActiveValue)"
        ),
        field="spec.capacity.activeValue",
    ),
    Validation(
        name="active-value-within-consumer-limit",
        expression=ratcheted(
            "variables.consumers.size() == 0 || "
            "object.spec.capacity.activeValue <= variables.consumers[0].maxActiveValue",
            SAME_TARGET, NO_HIGHER),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.capacity.activeValue ' + string(object.spec.capacity.activeValue) "
            "+ ' exceeds the largest value ' + object.spec.targetRef.kind + ' accepts, ' + "
            "string(variables.consumers[0].maxActiveValue)"
        ),
        field="spec.capacity.activeValue",
    ),
    Validation(
        name="drained-path-matches-consumer",
        expression=ratcheted(
            "!has(object.spec.handback) || variables.consumers.size() == 0 || "
            "(has(variables.consumers[0].drainedPath) && "
            "object.spec.handback.drainedPath == variables.consumers[0].drainedPath)",
            SAME_TARGET, SAME_HANDBACK),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.handback.drainedPath ' + object.spec.handback.drainedPath + "
            "' is not the in-use counter of ' + object.spec.targetRef.kind + '; ' + "
            "(has(variables.consumers[0].drainedPath) ? 'use ' + variables.consumers[0].drainedPath "
            ": 'it has none, so omit spec.handback')"
        ),
        field="spec.handback.drainedPath",
    ),
    Validation(
        name="node-allowed",
        expression=ratcheted(
            "!has(object.spec.nodeName) || params.spec.allowedNodes.size() == 0 || "
            "object.spec.nodeName in params.spec.allowedNodes",
            SAME_NODE),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.nodeName ' + object.spec.nodeName + ' is not a node TenantPolicy ' "
            "+ params.spec.tenantPolicy + ' allows; use one of: ' + params.spec.allowedNodes.join(', ')"
        ),
        field="spec.nodeName",
    ),
)
