"""The admission policies of fivespot, each CEL snippet a named constant.

These are the ValidatingAdmissionPolicies the compiler emits (and the webhook's polyfill and the
offline checker evaluate): what a tenant namespace may do with ScheduledCapacity, and what the
author of a ScheduledCapacity or a ScheduledMachine must be allowed to do themselves. Every
message starts with the policy name and says what to change. Per-object rules (shape, the
field-path rule, the provider group) live in the CRD schema instead: see `fivespot.api.kinds`.
"""

from __future__ import annotations

from typing import Final

from msgspec import Struct

from fivespot.api.kinds.names import CAPI_GROUP, MACHINES, cel_string


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
SCAP_AUTHOR_RIGHTS: Final = "fivespot-scap-author-rights"
MACHINE_AUTHOR_RIGHTS: Final = "fivespot-machine-author-rights"

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


TENANCY_VALIDATION: Final = Validation(
    name="namespace-has-tenant-policy",
    expression=ratcheted(f"request.namespace in variables.{TENANT_NAMESPACES_VARIABLE}",
                         SAME_SCHEDULE, SAME_TARGET, SAME_PATH, NO_HIGHER, SAME_NODE),
    message_expression=(
        f"'{TENANCY}: namespace ' + request.namespace + ' has no TenantPolicy, so it may not "
        "use ScheduledCapacity; ask the platform team for one'"
    ),
    field="metadata.namespace",
)
"""The message names the requesting namespace alone: which other namespaces are tenants is not
every denied user's business (they are listed in the compiled policy, for those who may read it)."""


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

def api_group_of(api_version: str) -> str:
    """The CEL of the API group of an apiVersion expression ('' for the core group)."""
    return f"{api_version}.contains('/') ? {api_version}.split('/')[0] : ''"


TARGET_GROUP: Final = Variable("targetGroup", api_group_of("object.spec.targetRef.apiVersion"))

TENANT_LIMIT_VARIABLES: Final = (
    TARGET_GROUP,
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


# --- the author must be allowed the write: ScheduledCapacity and ScheduledMachine ---------------
# A controller writes with its own identity what its object asks for: the capacity controller
# patches the target, the machine controller creates a Machine and the bootstrap and
# infrastructure objects embedded in a ScheduledMachine. Each is admitted only when the
# requesting user could make that write themselves (the API server's `authorizer`, the user's own
# RBAC), so creating one is never a way around RBAC. Offline the authorizer is a stated
# assumption (`fivespot.policies.cel.authz`). An UPDATE that asks nothing new of the controller (the same
# target, path, schedule and node, no higher value, not resumed; for a machine, the same objects)
# is admitted without asking, first: the kill switch, disabling and lowering never depend on the
# author's rights, nor on an authorizer webhook being up.

NOT_RESUMED: Final = (
    "(object.spec.?killSwitch.orValue(false) || !oldObject.spec.?killSwitch.orValue(false)) && "
    "(!object.spec.?enabled.orValue(true) || oldObject.spec.?enabled.orValue(true))"
)
"""The update neither lifts the kill switch nor re-enables the object."""
SAME_CLUSTER: Final = "object.spec.clusterName == oldObject.spec.clusterName"
SAME_BOOTSTRAP: Final = "object.spec.bootstrapSpec == oldObject.spec.bootstrapSpec"
SAME_INFRASTRUCTURE: Final = "object.spec.infrastructureSpec == oldObject.spec.infrastructureSpec"
SAME_TAINTS: Final = "object.spec.?nodeTaints == oldObject.spec.?nodeTaints"

SCAP_ASKS_NOTHING_NEW: Final = (SAME_TARGET, SAME_PATH, NO_HIGHER, SAME_SCHEDULE, SAME_NODE,
                                NOT_RESUMED)
MACHINE_ASKS_NOTHING_NEW: Final = (SAME_SCHEDULE, SAME_CLUSTER, SAME_BOOTSTRAP,
                                   SAME_INFRASTRUCTURE, SAME_TAINTS, NOT_RESUMED)


def unless_unchanged(rule: str, *unchanged: str) -> str:
    """An UPDATE keeping every `unchanged` condition, else `rule`: `ratcheted` with the ratchet
    evaluated first, so such an update never reaches the authorizer."""
    return f"({' && '.join((UPDATE, *unchanged))}) || ({rule})"


def may(verb: str, group: str, resource: str, name: str | None = None) -> str:
    """`authorizer` asked whether the requesting user may `verb` that resource in the request's
    namespace (CEL expressions for the group, resource and name)."""
    check = f"authorizer.group({group}).resource({resource}).namespace(request.namespace)"
    if name is not None:
        check += f".name({name})"
    return f"{check}.check('{verb}').allowed()"


def cel_map(entries: dict[str, str]) -> str:
    """A CEL map literal of strings, in key order (deterministic output)."""
    return "{" + ", ".join(f"{cel_string(k)}: {cel_string(v)}" for k, v in sorted(entries.items())) + "}"


def resource_variable(name: str, resources: dict[tuple[str, str], str], kind: str,
                      group: str) -> Variable:
    """`name`: the plural of the (group, kind) an object names, from the compiled `resources`
    (keyed `Kind.group`); '' for a kind the platform does not allow."""
    table = cel_map({f"{k}.{g}": plural for (g, k), plural in resources.items()})
    return Variable(name, f"{table}[?({kind} + '.' + {group})].orValue('')")


class Cel(str):
    """A CEL expression among the literal text of a message (`concat`)."""


def concat(*parts: str) -> str:
    """A CEL string concatenation of literal text and `Cel` expressions, adjacent literals
    joined into one."""
    pieces: list[str] = []
    text = ""
    for part in parts:
        if isinstance(part, Cel):
            if text:
                pieces.append(cel_string(text))
                text = ""
            pieces.append(str(part))
        else:
            text += part
    if text:
        pieces.append(cel_string(text))
    return " + ".join(pieces)


_NAMESPACE: Final = Cel("request.namespace")


def _denied(policy: str, verb: str, resource: str | Cel, group: str | Cel, what: tuple[str, ...],
            kind: str, controller: str) -> str:
    """The message: the RBAC the user lacks, which controller would have used its own, and the
    Role to ask for."""
    return concat(f"{policy}: you may not {verb} ", resource, ".", group, *what,
                  " in namespace ", _NAMESPACE,
                  f", and this {kind} would have the {controller} do it for you; ask for a Role "
                  f"granting verbs [{verb}] on resources [", resource, "] in apiGroups [", group,
                  "], bound to you in namespace ", _NAMESPACE)


TARGET_RESOURCE: Final = "targetResource"


def scap_author_variables(resources: dict[tuple[str, str], str]) -> tuple[Variable, ...]:
    """The target's group, and its plural from the consumers' `resources` ((group, kind) ->
    plural)."""
    return (TARGET_GROUP, resource_variable(TARGET_RESOURCE, resources,
                                            "object.spec.targetRef.kind",
                                            f"variables.{TARGET_GROUP.name}"))


_TARGET_PLURAL: Final = Cel(f"variables.{TARGET_RESOURCE}")
_TARGET_GROUP: Final = Cel(f"variables.{TARGET_GROUP.name}")

SCAP_AUTHOR_VALIDATION: Final = Validation(
    name="author-may-patch-target",
    expression=unless_unchanged(
        f"{_TARGET_PLURAL} == '' || "
        + may("patch", _TARGET_GROUP, _TARGET_PLURAL, "object.spec.targetRef.name"),
        *SCAP_ASKS_NOTHING_NEW),
    message_expression=_denied(
        SCAP_AUTHOR_RIGHTS, "patch", _TARGET_PLURAL, _TARGET_GROUP,
        (' "', Cel("object.spec.targetRef.name"), '"'), "ScheduledCapacity", "capacity controller"),
    field="spec.targetRef",
)
"""A kind no consumer allows is not asked about: the tenant limits deny it, and the capacity
controller never writes it."""

BOOTSTRAP_GROUP: Final = Variable("bootstrapGroup",
                                  api_group_of("object.spec.bootstrapSpec.apiVersion"))
INFRASTRUCTURE_GROUP: Final = Variable("infrastructureGroup",
                                       api_group_of("object.spec.infrastructureSpec.apiVersion"))
BOOTSTRAP_RESOURCE: Final = "bootstrapResource"
INFRASTRUCTURE_RESOURCE: Final = "infrastructureResource"


def machine_author_variables(bootstrap: dict[tuple[str, str], str],
                             infrastructure: dict[tuple[str, str], str]) -> tuple[Variable, ...]:
    """The embedded objects' groups, and their plurals from the kinds MachineProvisioning
    allows ((group, kind) -> plural)."""
    return (
        BOOTSTRAP_GROUP,
        resource_variable(BOOTSTRAP_RESOURCE, bootstrap, "object.spec.bootstrapSpec.kind",
                          f"variables.{BOOTSTRAP_GROUP.name}"),
        INFRASTRUCTURE_GROUP,
        resource_variable(INFRASTRUCTURE_RESOURCE, infrastructure,
                          "object.spec.infrastructureSpec.kind",
                          f"variables.{INFRASTRUCTURE_GROUP.name}"),
    )


def _embedded_validation(name: str, field: str, group: Variable, resource: str) -> Validation:
    plural = Cel(f"variables.{resource}")
    group_name = Cel(f"variables.{group.name}")
    return Validation(
        name=name,
        expression=unless_unchanged(f"{plural} == '' || "
                                    + may("create", group_name, plural),
                                    *MACHINE_ASKS_NOTHING_NEW),
        message_expression=_denied(
            MACHINE_AUTHOR_RIGHTS, "create", plural, group_name,
            (f" ({field}, a ", Cel(f"object.{field}.kind"), ")"), "ScheduledMachine",
            "machine controller"),
        field=field,
    )


MACHINE_AUTHOR_VALIDATIONS: Final = (
    Validation(
        name="author-may-create-machine",
        expression=unless_unchanged(may("create", cel_string(CAPI_GROUP), cel_string(MACHINES)),
                                    *MACHINE_ASKS_NOTHING_NEW),
        message_expression=_denied(MACHINE_AUTHOR_RIGHTS, "create", MACHINES, CAPI_GROUP, (),
                                   "ScheduledMachine", "machine controller"),
        field="spec",
    ),
    _embedded_validation("author-may-create-bootstrap", "spec.bootstrapSpec",
                         BOOTSTRAP_GROUP, BOOTSTRAP_RESOURCE),
    _embedded_validation("author-may-create-infrastructure", "spec.infrastructureSpec",
                         INFRASTRUCTURE_GROUP, INFRASTRUCTURE_RESOURCE),
)
"""Create on Machines, then on the bootstrap and the infrastructure kinds the ScheduledMachine
embeds, all in its namespace (create is never limited by name, so none is asked about)."""


# --- the target guard's half in the API server (decision 0050) ---------------------------------

TARGET_GUARD_SCALE: Final = "fivespot-target-guard-scale"
"""The capacity identity's writes through a consumer's `/scale` subresource, one policy per such
consumer (named `<TARGET_GUARD_SCALE>-<consumer>`): the API server lets such a write change
`spec.replicas` and nothing else, so what the webhook's target guard would still check is the
value."""
MAX_ACTIVE_VALUE_VARIABLE: Final = "maxActiveValue"
CAPACITY_IDENTITY_CONDITION: Final = "only-the-capacity-controller"


def capacity_identity_condition(user: str) -> dict[str, str]:
    """The match condition that narrows the target guard, its webhook and its policies alike, to
    the capacity identity `user`'s requests."""
    return {"name": CAPACITY_IDENTITY_CONDITION,
            "expression": f"request.userInfo.username == {cel_string(user)}"}


SCALE_VALUE_VALIDATION: Final = Validation(
    name="scale-within-ceiling",
    expression=("!has(object.spec.replicas) || object.spec.replicas >= 0 && "
                f"object.spec.replicas <= variables.{MAX_ACTIVE_VALUE_VARIABLE}"),
    message_expression=concat(
        "target-guard: spec.replicas of ", Cel("request.resource.resource"), " ", _NAMESPACE, "/",
        Cel("request.name"), " must be an integer from 0 to ",
        Cel(f"string(variables.{MAX_ACTIVE_VALUE_VARIABLE})"),
        " (the consumer's maxActiveValue), not ", Cel("string(object.spec.replicas)"),
        "; fix spec.capacity.activeValue of the ScheduledCapacity that targets it"),
    field="spec.replicas",
)
"""The capacity identity's scale write stays within the consumer's ceiling; worded as the
webhook's target guard words the same refusal (`fivespot.webhook.review._value_refusal`). A Scale
leaves `spec.replicas` out when it is 0 (`omitempty`): absent is 0."""


def max_active_value_variable(value: int) -> Variable:
    return Variable(MAX_ACTIVE_VALUE_VARIABLE, str(value))
