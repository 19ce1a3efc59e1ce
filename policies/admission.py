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

# --- fivespot-scap-tenancy: only namespaces with a TenantPolicy may use ScheduledCapacity -------

TENANT_NAMESPACES_VARIABLE: Final = "tenantNamespaces"


def tenancy_validation(namespaces: list[str]) -> Validation:
    allowed = ", ".join(namespaces) or "none"
    return Validation(
        name="namespace-has-tenant-policy",
        expression=f"request.namespace in variables.{TENANT_NAMESPACES_VARIABLE}",
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
        expression=f"object.spec.schedule.kind in variables.{SCHEDULE_KINDS_VARIABLE}",
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
        expression="variables.consumers.size() > 0",
        message_expression=(
            f"'{TENANT_LIMITS}: ' + object.spec.targetRef.kind + '.' + variables.targetGroup + "
            "' is not a consumer TenantPolicy ' + params.spec.tenantPolicy + ' allows in namespace ' "
            f"+ request.namespace + '; spec.targetRef may name: ' + {_ALLOWED_KINDS}"
        ),
        field="spec.targetRef",
    ),
    Validation(
        name="capacity-path-allowed",
        expression=(
            "variables.consumers.size() == 0 || "
            "object.spec.capacity.path in variables.consumers[0].capacityPaths"
        ),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.capacity.path ' + object.spec.capacity.path + ' is not an "
            "allowlisted capacity field of ' + object.spec.targetRef.kind + '; use one of: ' + "
            "variables.consumers[0].capacityPaths.join(', ')"
        ),
        field="spec.capacity.path",
    ),
    Validation(
        name="active-value-within-tenant-limit",
        expression="object.spec.capacity.activeValue <= params.spec.maxActiveValue",
        message_expression=(
            f"'{TENANT_LIMITS}: spec.capacity.activeValue ' + string(object.spec.capacity.activeValue) "
            "+ ' exceeds the limit ' + string(params.spec.maxActiveValue) + ' of TenantPolicy ' + "
            "params.spec.tenantPolicy + '; set it to at most ' + string(params.spec.maxActiveValue)"
        ),
        field="spec.capacity.activeValue",
    ),
    Validation(
        name="active-value-within-consumer-limit",
        expression=(
            "variables.consumers.size() == 0 || "
            "object.spec.capacity.activeValue <= variables.consumers[0].maxActiveValue"
        ),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.capacity.activeValue ' + string(object.spec.capacity.activeValue) "
            "+ ' exceeds the largest value ' + object.spec.targetRef.kind + ' accepts, ' + "
            "string(variables.consumers[0].maxActiveValue)"
        ),
        field="spec.capacity.activeValue",
    ),
    Validation(
        name="drained-path-matches-consumer",
        expression=(
            "!has(object.spec.handback) || variables.consumers.size() == 0 || "
            "(has(variables.consumers[0].drainedPath) && "
            "object.spec.handback.drainedPath == variables.consumers[0].drainedPath)"
        ),
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
        expression=(
            "!has(object.spec.nodeName) || params.spec.allowedNodes.size() == 0 || "
            "object.spec.nodeName in params.spec.allowedNodes"
        ),
        message_expression=(
            f"'{TENANT_LIMITS}: spec.nodeName ' + object.spec.nodeName + ' is not a node TenantPolicy ' "
            "+ params.spec.tenantPolicy + ' allows; use one of: ' + params.spec.allowedNodes.join(', ')"
        ),
        field="spec.nodeName",
    ),
)
