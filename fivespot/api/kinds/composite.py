"""CompositeSchedule (`spotschedules.5spot.finos.org/v1alpha1`, short name `csch`): other provider
objects in its namespace combined with `anyOf`, `allOf` and `not`.

"Office hours, OR a manual override, AND NOT during a change freeze":

    spec:
      allOf:
        - anyOf:
            - {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: TimeBasedSpotSchedule, name: office-hours}
            - {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule, name: override}
        - not: {apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule, name: freeze}

Each node of the expression is exactly one of: a reference `{apiVersion, kind, name}` to a
provider object (any kind of the provider group, resolved by group + kind in any served
version), `anyOf: [nodes]`, `allOf: [nodes]` or `not: node`. A CRD schema cannot be recursive,
so the model is unrolled to `MAX_DEPTH` levels of operators; at the last level only references
are left, and the rule there says so. What the CRD can see is refused at admission with the
same messages the controller uses: the form of each node, a reference outside the provider
group, and a direct self-reference (`OBJECT_RULES`, at the object's root, where CEL sees
`metadata.name`). What a rule on one object cannot see, a cycle through other
CompositeSchedules (A -> B -> A: each object is valid alone, and which one closes the loop
depends on the order they are written), the controller reports as `Ready=False/InvalidSpec`,
as it does a self-reference that reached the cluster before this rule did.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import ConfigDict, Field, create_model, model_validator

from fivespot.api.kinds.base import KindModel
from fivespot.api.kinds.providers import OVERRIDE_DESCRIPTION, Override
from fivespot.api.kinds.scheduled_capacity import (
    DNS_SUBDOMAIN_PATTERN,
    KIND_PATTERN,
    PROVIDER_GROUP,
    SCHEDULE_API_VERSION_PATTERN,
    cel_string,
)

KIND: Final = "CompositeSchedule"
MAX_DEPTH: Final = 2
"""Levels of anyOf/allOf/not; deeper expressions reference another CompositeSchedule."""
MAX_CHILDREN: Final = 8
"""Nodes in one anyOf or allOf."""

REFERENCE_API_VERSION_RULE: Final = f"self.matches({cel_string(SCHEDULE_API_VERSION_PATTERN)})"
REFERENCE_API_VERSION_MESSAGE: Final = (
    f"must be a version of the provider group {PROVIDER_GROUP}, for example "
    f"{PROVIDER_GROUP}/v1alpha1; a CompositeSchedule combines only spot-schedule providers"
)
NODE_FORM_RULE: Final = (
    "(has(self.kind) ? 1 : 0) + (has(self.anyOf) ? 1 : 0) + (has(self.allOf) ? 1 : 0) + "
    "(has(self.not) ? 1 : 0) == 1 && has(self.kind) == has(self.name) && "
    "has(self.kind) == has(self.apiVersion)"
)
NODE_FORM_MESSAGE: Final = (
    "each node is exactly one of: a reference {apiVersion, kind, name} to a provider object in "
    "this namespace, anyOf: [nodes], allOf: [nodes], or not: node"
)
LEAF_RULE: Final = "has(self.kind) && has(self.name) && has(self.apiVersion)"
LEAF_MESSAGE: Final = (
    f"nested too deeply: at most {MAX_DEPTH} levels of anyOf/allOf/not; put the inner part in "
    "another CompositeSchedule and reference it"
)



def _names_itself(node: str, levels: int) -> str:
    """CEL: `node` (with `levels` levels of operators below it) or a node under it is a
    reference to the object itself (kind and name; any version of the provider group)."""
    own = (f"(has({node}.kind) && {node}.kind == self.kind && has({node}.name) && "
           f"{node}.name == self.metadata.name && has({node}.apiVersion) && "
           f"{node}.apiVersion.startsWith({cel_string(PROVIDER_GROUP + '/')}))")
    if levels == 0:
        return own
    child = f"c{levels}"
    below = _names_itself(child, levels - 1)
    return (f"({own} || (has({node}.anyOf) && {node}.anyOf.exists({child}, {below})) || "
            f"(has({node}.allOf) && {node}.allOf.exists({child}, {below})) || "
            f"(has({node}.not) && {_names_itself(f'{node}.not', levels - 1)}))")


SELF_REFERENCE_RULE: Final = (
    f"!has(self.metadata.name) || !has(self.spec) || !{_names_itself('self.spec', MAX_DEPTH)}"
)
"""At the object's root: no node of the spec references this very object. References name
objects in the composite's own namespace (a reference has no namespace field), so kind, group
and name decide it; the version does not (children are resolved by group and kind)."""
SELF_REFERENCE_MESSAGE: Final = (
    "a CompositeSchedule cannot reference itself (a cycle): reference the schedules it would "
    "combine, not the CompositeSchedule of the same name"
)
SELF_REFERENCE_MESSAGE_EXPRESSION: Final = (
    "'CompositeSchedule ' + self.metadata.name + ' -> ' + self.metadata.name + "
    "' is a cycle; a composite cannot depend on itself: reference the schedules it would "
    "combine, not the CompositeSchedule of the same name'"
)
OBJECT_RULES: Final = (
    {"rule": SELF_REFERENCE_RULE, "message": SELF_REFERENCE_MESSAGE,
     "messageExpression": SELF_REFERENCE_MESSAGE_EXPRESSION, "fieldPath": ".spec"},
)
"""The rules of the object's root schema (they need `metadata.name`, which `spec` cannot see)."""

_API_VERSION: Final = re.compile(SCHEDULE_API_VERSION_PATTERN)

CEL_RULES: Final = {
    "REFERENCE_API_VERSION_RULE": REFERENCE_API_VERSION_RULE,
    "NODE_FORM_RULE": NODE_FORM_RULE,
    "LEAF_RULE": LEAF_RULE,
    "SELF_REFERENCE_RULE": SELF_REFERENCE_RULE,
}


def _rules(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in pairs]}


class _Reference(KindModel):
    """The reference fields every node has (all absent on an operator node)."""

    api_version: str | None = Field(
        default=None,
        description=f"apiVersion of the provider kind, a version of {PROVIDER_GROUP}; any "
        "served version works (providers are resolved by group and kind).",
        max_length=253,
        json_schema_extra=_rules((REFERENCE_API_VERSION_RULE, REFERENCE_API_VERSION_MESSAGE)),
    )
    kind: str | None = Field(
        default=None, description="Kind of the provider, for example ManualSchedule.",
        max_length=63, pattern=KIND_PATTERN,
    )
    name: str | None = Field(
        default=None, description="Name of the provider object, in this namespace.",
        max_length=253, pattern=DNS_SUBDOMAIN_PATTERN,
    )

    @model_validator(mode="after")
    def _in_the_provider_group(self) -> _Reference:
        if self.api_version is not None and _API_VERSION.fullmatch(self.api_version) is None:
            raise ValueError(f"apiVersion {REFERENCE_API_VERSION_MESSAGE}; got {self.api_version!r}")
        return self

    def _form(self, operators: int) -> None:
        reference = (self.api_version, self.kind, self.name)
        has_reference = any(v is not None for v in reference)
        if has_reference and not all(v is not None for v in reference):
            raise ValueError(NODE_FORM_MESSAGE)
        if has_reference + operators != 1:
            raise ValueError(NODE_FORM_MESSAGE)


class Leaf(_Reference):
    """A node at the deepest level: a reference only."""

    model_config = ConfigDict(json_schema_extra=_rules((LEAF_RULE, LEAF_MESSAGE)))

    @model_validator(mode="after")
    def _is_reference(self) -> Leaf:
        if self.kind is None or self.name is None or self.api_version is None:
            raise ValueError(LEAF_MESSAGE)
        return self


class _Operator(_Reference):
    """A node above the deepest level: a reference or an operator."""

    model_config = ConfigDict(json_schema_extra=_rules((NODE_FORM_RULE, NODE_FORM_MESSAGE)))


def _node_model(levels: int) -> type[_Reference]:
    """A node model with `levels` levels of operators below it (0: a Leaf)."""
    if levels == 0:
        return Leaf
    child = _node_model(levels - 1)

    def form(self: Any) -> Any:
        operators = sum(getattr(self, f) is not None for f in ("any_of", "all_of", "not_"))
        self._form(operators)
        return self

    many: Any = tuple[child, ...] | None  # type: ignore[valid-type]
    single: Any = child | None
    fields: dict[str, Any] = {
        "any_of": (many, Field(
            default=None, min_length=1, max_length=MAX_CHILDREN,
            description="Active when any of these is active (unresolved ones count only when "
            "no other is active).")),
        "all_of": (many, Field(
            default=None, min_length=1, max_length=MAX_CHILDREN,
            description="Active when all of these are active (unresolved ones count only when "
            "no other is inactive).")),
        "not_": (single, Field(default=None, alias="not", description="Active when this is not.")),
    }
    validators: dict[str, Any] = {"_one_form": model_validator(mode="after")(form)}
    model: type[_Reference] = create_model(
        f"Node{levels}", __base__=_Operator, __validators__=validators, **fields)
    model.__doc__ = "One node: a reference {apiVersion, kind, name}, anyOf, allOf or not."
    return model


CompositeScheduleSpec: Final[type[_Reference]] = create_model(
    "CompositeScheduleSpec", __base__=_node_model(MAX_DEPTH),
    override=(Override | None, Field(default=None, description=OVERRIDE_DESCRIPTION)),
)
"""The spec is the expression's root node, which alone may also carry an `override` (every
built-in provider kind takes one). The CRD schema and the controller both use it."""
CompositeScheduleSpec.__doc__ = (
    "Active while an expression over other provider objects in its namespace holds: each node "
    "is a reference {apiVersion, kind, name}, anyOf, allOf or not (nestable). Only the "
    "children's status is read (status.active, a Ready condition that is True if present); an "
    "unresolved child makes the result unresolved only when the answer depends on it."
)
