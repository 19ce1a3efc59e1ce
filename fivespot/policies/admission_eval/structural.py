"""A CRD's structural schema, compiled once: one `Node` per schema node, everything costly prepared.

The API server keeps a custom resource's schema as a structural schema
(`k8s.io/apiextensions-apiserver/pkg/apiserver/schema`) and runs separate passes over it; so does
this package: `pruning` (unknown fields, nulls, defaults), `validation` (types, required, enum,
bounds, patterns, formats, list uniqueness) and `celrules` (the `x-kubernetes-validations`
walk), tied together by `crd`. This module holds what they share: the compiled `Node` (its
keywords, its RE2 pattern, its CEL rules compiled with `self` typed as the server types it), the
field errors they report, and the value helpers (JSON types, Go-style rendering, strict equality,
list-item correlation).

Everything costly (RE2 patterns, CEL programs, the typed-`self` conversion of each rule) is
prepared in `compile_structure`; each pass then attaches a closure per node (`crd.compile_schema`),
so checking an object is a walk over plain data with no schema lookups.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from msgspec import Struct
import re2

from fivespot.policies.admission_eval import formats
from fivespot.policies.admission_eval.regex import Pattern
from fivespot.policies.cel import (
    ABSENT,
    CRD_VARIABLES,
    CelCompileError,
    CrdRule,
    Program,
    compile_crd_rule,
    compile_expression,
    references_old_self,
)
from fivespot.policies.cel import checked

# Field error types, as k8s.io/apimachinery/pkg/util/validation/field names them.
INVALID: Final = "FieldValueInvalid"
TYPE_INVALID: Final = "FieldValueTypeInvalid"
REQUIRED: Final = "FieldValueRequired"
NOT_SUPPORTED: Final = "FieldValueNotSupported"
TOO_LONG: Final = "FieldValueTooLong"
TOO_MANY: Final = "FieldValueTooMany"
DUPLICATE: Final = "FieldValueDuplicate"
FORBIDDEN: Final = "FieldValueForbidden"

BLOCKING: Final = frozenset({TYPE_INVALID, REQUIRED, NOT_SUPPORTED, TOO_LONG, TOO_MANY})
"""Schema errors after which the API server does not run the CEL rules at all."""

BLOCKED_MESSAGE: Final = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)

_RULE_REASONS: Final = frozenset({INVALID, FORBIDDEN, REQUIRED, DUPLICATE})


class SchemaError(ValueError):
    """The schema itself cannot be used (a rule that does not compile, a bad pattern)."""


class FieldError(Struct, frozen=True):
    """One validation error, shaped like a Kubernetes `field.Error`."""

    path: str
    type: str
    detail: str
    rule: str | None = None
    """The CEL rule that produced it (None for structural checks)."""

    @property
    def message(self) -> str:
        """The text after `path: ` in the API server's message."""
        return self.detail


class Rule(Struct, frozen=True, eq=False):
    """One `x-kubernetes-validations` entry, compiled (with `self` typed as the server types it)."""

    rule: str
    compiled: CrdRule
    message: str | None
    message_expression: Program | None
    reason: str
    field_path: str | None
    pattern: Pattern | None = None
    """Set when the rule is exactly `self.matches('<constant>')`: RE2 decides it directly
    (same engine, same partial-match semantics) without a CEL evaluation."""


class Node(Struct, eq=False):
    """One schema node with everything pre-compiled."""

    type: str | None = None
    nullable: bool = False
    properties: dict[str, Node] | None = None
    additional: Node | None = None
    items: Node | None = None
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] | None = None
    pattern: tuple[str, Pattern] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    min_properties: int | None = None
    max_properties: int | None = None
    format: str | None = None
    format_check: Any = None
    has_default: bool = False
    default: Any = None
    preserve_unknown: bool = False
    int_or_string: bool = False
    embedded: bool = False
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    rules_below: bool = False
    """Whether this node or any below it has CEL rules (else the rule walk skips the subtree)."""
    transition_below: bool = False
    proven_below: bool = True
    """Every rule at and below it is `self.matches()` of its own string node's schema pattern,
    so a walk whose structural check reported nothing has already decided them all."""
    defaults_below: bool = False
    conversion: str | None = None
    """CEL template (`{v}`) turning this node's JSON value into its typed CEL value, if needed."""
    checks: bool = True
    normalise: Normaliser | None = None
    """Prunes and defaults a value of this node; None when it hands every value back unchanged."""
    check: Validator | None = None
    """The structural check of a value of this node (set by `compile_schema`)."""
    check_rules: RuleWalker | None = None
    """Runs the CEL rules at and below this node; None when there are none."""



Normaliser = Callable[[Any, str, list[str], bool], Any]
"""(value, path, warnings, root) -> the pruned and defaulted value."""
Validator = Callable[[Any, Any, str, list[FieldError]], None]
"""(value, correlated old value or ABSENT, path, errors)."""
RuleWalker = Callable[[Any, Any, str, list[FieldError], bool, bool], None]
"""(value, correlated old value or ABSENT, path, errors, root, schema_ok); `schema_ok`: the
structural check of the same value reported no error at all."""


def compile_structure(schema: Mapping[str, Any], *, root: bool = True) -> Node:
    """Compile an `openAPIV3Schema` (no walks attached yet); raises SchemaError naming the rule or
    pattern at fault."""
    return _compile(schema, "", 0, root)


def _compile(schema: Mapping[str, Any], path: str, depth: int, root: bool = False) -> Node:
    node = Node()
    node.type = schema.get("type")
    node.nullable = bool(schema.get("nullable", False))
    node.format = schema.get("format")
    node.format_check = formats.checker(node.format) if node.type == "string" else None
    node.preserve_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields", False))
    node.int_or_string = bool(schema.get("x-kubernetes-int-or-string", False))
    node.embedded = bool(schema.get("x-kubernetes-embedded-resource", False))
    node.list_type = schema.get("x-kubernetes-list-type")
    node.list_map_keys = tuple(schema.get("x-kubernetes-list-map-keys", ()))
    if "default" in schema:
        node.has_default, node.default = True, schema["default"]
    if "properties" in schema:
        node.properties = {
            name: _compile(sub, join_path(path, name), depth + 1)
            for name, sub in schema["properties"].items()
        }
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        node.additional = _compile(additional, join_path(path, "*"), depth + 1)
    elif additional is True:
        node.preserve_unknown = True
    if "items" in schema and isinstance(schema["items"], Mapping):
        node.items = _compile(schema["items"], path + "[*]", depth + 1)
    node.required = tuple(schema.get("required", ()))
    if "enum" in schema:
        node.enum = tuple(schema["enum"])
    if "pattern" in schema:
        try:
            node.pattern = (schema["pattern"], Pattern(schema["pattern"]))
        except re2.error as error:
            raise SchemaError(f"{path or '<root>'}: pattern {schema['pattern']!r}: {error}") from None
    for key, attr in (("minimum", "minimum"), ("maximum", "maximum"), ("multipleOf", "multiple_of")):
        if key in schema:
            setattr(node, attr, schema[key])
    node.exclusive_minimum = bool(schema.get("exclusiveMinimum", False))
    node.exclusive_maximum = bool(schema.get("exclusiveMaximum", False))
    for key, attr in (
        ("minLength", "min_length"), ("maxLength", "max_length"), ("minItems", "min_items"),
        ("maxItems", "max_items"), ("minProperties", "min_properties"),
        ("maxProperties", "max_properties"),
    ):
        if key in schema:
            setattr(node, attr, int(schema[key]))
    children = [c for c in (*(node.properties or {}).values(), node.additional, node.items) if c]
    node.conversion = _conversion(node, depth)
    node.rules = tuple(
        _compile_rule(entry, node.conversion, path) for entry in schema.get("x-kubernetes-validations", ())
    )
    node.rules_below = bool(node.rules) or any(c.rules_below for c in children)
    node.transition_below = any(r.compiled.transition for r in node.rules) or any(
        c.transition_below for c in children)
    node.proven_below = all(_proven(rule, node) for rule in node.rules) and all(
        c.proven_below for c in children)
    node.defaults_below = any(c.has_default or c.defaults_below for c in children)
    if root:
        node.properties = dict(node.properties or {})
    return node


# --- typed self -------------------------------------------------------------------------------


def _conversion(node: Node, depth: int) -> str | None:
    """How to turn the JSON value into the value the API server's typed CEL environment binds.

    cel-expr-python cannot receive timestamps or durations inside a `dyn` value, so the
    conversion is done in CEL itself: the rule is compiled as `cel.bind(self, T(self), rule)`.
    Objects are rebuilt with optional entries (`?'k': self.?k`) so `has()` still sees absence.
    Maps (`additionalProperties`) and objects that preserve unknown fields are left as they are:
    their typed values stay strings (a known gap; no fivespot schema has one). The result is a
    template in which `HOLE` stands for the value.
    """
    if node.type == "string":
        text = formats.cel_conversion(node.format)
        return text.replace("{v}", HOLE) if text else None
    if node.type == "number":
        return f"double({HOLE})"
    var = f"fv{depth}"
    if node.type == "array" and node.items is not None and node.items.conversion:
        return f"{HOLE}.map({var}, {fill(node.items.conversion, var)})"
    if node.type == "object" and node.properties and not node.preserve_unknown:
        if not any(c.conversion for c in node.properties.values()):
            return None
        entries = []
        for key, child in node.properties.items():
            access = HOLE + (f".?{key}" if key.isidentifier() else f"[?{json.dumps(key)}]")
            if child.conversion:
                access += f".optMap({var}, dyn({fill(child.conversion, var)}))"
            entries.append(f"?{json.dumps(key)}: {access}")
        return "{" + ", ".join(entries) + "}"
    return None


HOLE: Final = "\x00"


def fill(template: str, value: str) -> str:
    """A conversion template applied to the CEL expression `value`."""
    return template.replace(HOLE, value)


def _typed(expression: str, conversion: str | None, old_self: bool, optional_old_self: bool) -> str:
    if conversion is None:
        return expression
    wrapped = f"cel.bind(self, {fill(conversion, 'self')}, {expression})"
    if old_self:
        old = (f"oldSelf.optMap(fvo, {fill(conversion, 'fvo')})" if optional_old_self
               else fill(conversion, "oldSelf"))
        wrapped = f"cel.bind(oldSelf, {old}, {wrapped})"
    return wrapped


def _compile_rule(entry: Mapping[str, Any], conversion: str | None, path: str) -> Rule:
    rule = str(entry.get("rule", ""))
    optional = bool(entry.get("optionalOldSelf", False))
    try:
        old_self = references_old_self(rule)
        compiled = compile_crd_rule(
            _typed(rule, conversion, old_self, optional), optional_old_self=optional)
        message_expression = None
        if entry.get("messageExpression"):
            text = str(entry["messageExpression"])
            message_expression = compile_expression(
                _typed(text, conversion, references_old_self(text), optional), CRD_VARIABLES,
                optional_old_self=optional)
    except CelCompileError as error:
        raise SchemaError(f"{path or '<root>'}: x-kubernetes-validations rule {rule!r}: "
                          f"{error.message}") from None
    reason = str(entry.get("reason") or INVALID)
    pattern = None
    root = compiled.program.tree.root
    if (conversion is None and isinstance(root, checked.Call) and root.function == "matches"
            and isinstance(root.target, checked.Ident) and root.target.name == "self"
            and len(root.args) == 1 and isinstance(root.args[0], checked.Const)
            and root.args[0].kind == "string" and isinstance(root.args[0].value, str)):
        try:
            pattern = Pattern(root.args[0].value)
        except re2.error:
            pattern = None
    return Rule(
        rule=rule,
        compiled=CrdRule(rule, compiled.program, compiled.transition, compiled.optional_old_self),
        message=entry.get("message") or None,
        message_expression=message_expression,
        reason=reason if reason in _RULE_REASONS else INVALID,
        field_path=entry.get("fieldPath") or None,
        pattern=pattern,
    )


# --- shared by the passes ----------------------------------------------------------------------


def join_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _proven(rule: Rule, node: Node) -> bool:
    """Whether the rule is exactly its string node's schema pattern (see `Node.proven_below`)."""
    return (rule.pattern is not None and node.pattern is not None
            and rule.pattern.source == node.pattern[0] and node.type == "string"
            and not node.int_or_string and not rule.compiled.transition)


def path_prefix(path: str) -> str:
    """What a child's name is appended to: `join_path(path, name) == path_prefix(path) + name`."""
    return f"{path}." if path else ""


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


_MAX_JSON_INTEGER: Final = float(2**53 - 1)


def _json_integer(value: float) -> bool:
    """go-openapi's `IsFloat64AJSONInteger`: a whole float within ±(2^53 - 1)."""
    return value.is_integer() and -_MAX_JSON_INTEGER <= value <= _MAX_JSON_INTEGER


def type_ok(value: Any, node: Node) -> bool:
    expected = node.type
    if node.int_or_string:
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str) or (
            isinstance(value, float) and value.is_integer())
    if expected is None:
        return True
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and _json_integer(value))
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def strictly_equal(left: Any, right: Any) -> bool:
    """Deep equality of decoded JSON as Go's reflect.DeepEqual sees it (no 1 == True).

    Python's `!=` first: strict equality implies Python equality, so an unequal pair (the usual
    case for a changed field) is decided in C without the typed walk.
    """
    if left != right:
        return False
    return _strictly_equal(left, right)


def _strictly_equal(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_strictly_equal(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_strictly_equal(a, b) for a, b in zip(left, right))
    return bool(left == right)


def correlate_items(value: list[Any], old: Any, node: Node) -> list[Any]:
    """The old item each new item correlates with: by key for `x-kubernetes-list-type: map`
    lists, nothing for other lists (the API server correlates no other list items)."""
    if node.list_type != "map" or not node.list_map_keys or not isinstance(old, list):
        return [ABSENT] * len(value)
    by_key: dict[str, Any] = {}
    for item in old:
        if isinstance(item, dict):
            by_key.setdefault(json.dumps([item.get(k) for k in node.list_map_keys]), item)
    return [by_key.get(json.dumps([item.get(k) for k in node.list_map_keys]), ABSENT)
            if isinstance(item, dict) else ABSENT for item in value]
