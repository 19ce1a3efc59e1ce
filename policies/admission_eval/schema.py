"""A CRD's structural schema, compiled once, applied the way the API server applies it.

For a custom resource the API server (1) prunes fields the schema does not declare, warning
`unknown field "spec.foo"`, (2) drops non-nullable nulls and fills in defaults, (3) validates
types, required, enum, pattern (RE2), bounds, lengths (in characters), item counts, formats and
list uniqueness, and (4) only when none of those errors is of a "blocking" kind (type, required,
enum, too long, too many) runs the `x-kubernetes-validations` CEL rules of every node that has a
value, transition rules only where an old value correlates. On UPDATE, errors at a node whose
value did not change are ratcheted (dropped), except for transition rules.

Everything costly (RE2 patterns, CEL programs, the typed-`self` conversion of each rule) is
prepared in `compile_schema`, which also turns each node into small closures (see "compiled
walks" below), so checking an object is a walk over plain data with no schema lookups.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import re2

from policies.admission_eval import formats
from policies.admission_eval.regex import Pattern
from policies.cel import checked
from policies.cel import (
    ABSENT,
    CRD_VARIABLES,
    CelCompileError,
    CelEvaluationError,
    CrdRule,
    Program,
    compile_crd_rule,
    compile_expression,
    references_old_self,
)

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

OBJECT_META_FIELDS: Final = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})




class SchemaError(ValueError):
    """The schema itself cannot be used (a rule that does not compile, a bad pattern)."""


@dataclass(frozen=True)
class FieldError:
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


@dataclass(frozen=True, eq=False)
class Rule:
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


@dataclass(eq=False)
class Node:
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


def compile_schema(schema: Mapping[str, Any], *, root: bool = True) -> Node:
    """Compile an `openAPIV3Schema`; raises SchemaError naming the rule or pattern at fault."""
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
            name: _compile(sub, _join(path, name), depth + 1)
            for name, sub in schema["properties"].items()
        }
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        node.additional = _compile(additional, _join(path, "*"), depth + 1)
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
    _attach_walks(node)
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


# --- compiled walks -----------------------------------------------------------------------------
#
# `_compile` gives every node three closures, built from its children's: `normalise` (prune and
# default), `check` (structural validation) and `check_rules` (the CEL rules). What a walk needs
# about a node (its keywords, its children by name, which subtrees have work) is captured once as
# closure variables, so checking an object is one call per value that has something to do, with
# no schema keyword lookups; values whose normalisation is the identity are stored without a call,
# and subtrees without rules are never walked for rules. The walks make exactly the calls, in the
# same order, that the API server's prune / default / validate / CEL passes make.

Normaliser = Callable[[Any, str, list[str], bool], Any]
"""(value, path, warnings, root) -> the pruned and defaulted value."""
Validator = Callable[[Any, Any, str, list[FieldError]], None]
"""(value, correlated old value or ABSENT, path, errors)."""
RuleWalker = Callable[[Any, Any, str, list[FieldError], bool, bool], None]
"""(value, correlated old value or ABSENT, path, errors, root, schema_ok); `schema_ok`: the
structural check of the same value reported no error at all."""


def _attach_walks(node: Node) -> None:
    """Build the node's closures; its children's must already be built."""
    node.normalise = _build_normaliser(node)
    node.check = _build_validator(node)
    node.check_rules = _build_rule_walker(node) if node.rules_below else None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _proven(rule: Rule, node: Node) -> bool:
    """Whether the rule is exactly its string node's schema pattern (see `Node.proven_below`)."""
    return (rule.pattern is not None and node.pattern is not None
            and rule.pattern.source == node.pattern[0] and node.type == "string"
            and not node.int_or_string and not rule.compiled.transition)


def _prefix(path: str) -> str:
    """What a child's name is appended to: `_join(path, name) == _prefix(path) + name`."""
    return f"{path}." if path else ""


# --- pruning and defaulting -------------------------------------------------------------------


def prune_and_default(value: Any, node: Node, warnings: list[str]) -> Any:
    """A new value: unknown fields pruned (each warned about), nulls dropped, defaults applied.

    `value` is the whole object; its `metadata` keeps only ObjectMeta's fields. Every object the
    schema describes is a new dict; values it leaves as they are (scalars, embedded resources,
    preserved unknown fields) are shared with `value`, not copied: nothing mutates them.
    """
    if not isinstance(value, dict) or node.normalise is None:
        return copy.deepcopy(value)
    return node.normalise(value, "", warnings, True)


def _build_normaliser(node: Node) -> Normaliser | None:
    """None when the node hands every value back unchanged (scalars, embedded resources, lists of
    such), so that its parent stores the value without a call."""
    objects = node.type in (None, "object") and not node.embedded
    items = node.items.normalise if node.items is not None else None
    lists = node.type in (None, "array") and items is not None
    if not objects and not lists:
        return None
    object_part = _object_normaliser(node) if objects else None

    def normalise(value: Any, path: str, warnings: list[str], root: bool) -> Any:
        if isinstance(value, dict):
            return object_part(value, path, warnings, root) if object_part is not None else value
        if isinstance(value, list) and lists:
            assert items is not None
            return [items(item, f"{path}[{index}]", warnings, False) for index, item in enumerate(value)]
        return value

    return normalise


def _object_normaliser(node: Node) -> Callable[[dict[str, Any], str, list[str], bool], dict[str, Any]]:
    declared = {key: (child, child.normalise) for key, child in (node.properties or {}).items()}
    additional = node.additional
    additional_normalise = additional.normalise if additional is not None else None
    preserve_unknown = node.preserve_unknown
    defaults = tuple((key, _normalised_default(child)) for key, child in (node.properties or {}).items()
                     if child.has_default)

    def normalise_object(value: dict[str, Any], path: str, warnings: list[str],
                         root: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if root and key == "metadata" and isinstance(item, dict):
                out[key] = _metadata(item, warnings)
                continue
            entry = declared.get(key)
            if entry is not None:
                child, child_normalise = entry
                if item is None and not child.nullable:
                    continue  # dropped (and replaced by its default below, if it has one)
                out[key] = item if child_normalise is None else child_normalise(
                    item, _join(path, key), warnings, False)
            elif additional is not None:
                if item is None and not additional.nullable and additional.has_default:
                    continue
                out[key] = item if additional_normalise is None else additional_normalise(
                    item, f"{path}[{key}]", warnings, False)
            elif preserve_unknown:
                out[key] = item
            else:
                warnings.append(f'unknown field "{_join(path, key)}"')
        for key, default in defaults:
            if key not in out:
                out[key] = copy.deepcopy(default) if isinstance(default, (dict, list)) else default
        return out

    return normalise_object


def _normalised_default(node: Node) -> Any:
    """A property's default as it is applied: itself pruned and defaulted (computed once)."""
    default = copy.deepcopy(node.default)
    return node.normalise(default, "", [], False) if node.normalise is not None else default


def _metadata(meta: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """ObjectMeta's own fields only; `meta` itself when it has no others."""
    unknown = [key for key in meta if key not in OBJECT_META_FIELDS]
    if not unknown:
        return meta
    warnings.extend(f'unknown field "metadata.{key}"' for key in unknown)
    return {key: item for key, item in meta.items() if key in OBJECT_META_FIELDS}


# --- structural validation --------------------------------------------------------------------


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


def go_value(value: Any) -> str:
    """A value as Go's %#v-ish rendering in field errors: strings quoted, numbers bare."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) and not value.is_integer() else str(
            int(value) if isinstance(value, float) else value)
    if value is None:
        return "null"
    return f'"{json_type(value)}"'


def _type_ok(value: Any, node: Node) -> bool:
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
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
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


def validate(value: Any, old: Any, node: Node, path: str, errors: list[FieldError]) -> None:
    """Structural checks of `value` (and everything below it) against `node`.

    `old` is the correlated old value (ABSENT on CREATE or where nothing correlates); a node
    whose value did not change is ratcheted: its errors are not reported.
    """
    assert node.check is not None
    node.check(value, old, path, errors)


_SIMPLE_TYPES: Final[Mapping[str, type]] = {"object": dict, "array": list, "string": str, "boolean": bool}


def _build_validator(node: Node) -> Validator:
    """The node's structural check: ratcheting, null, type, enum, then the checks of its kind."""
    null_ok = node.nullable or (node.type is None and not node.int_or_string)
    simple_type = None if node.int_or_string else _SIMPLE_TYPES.get(str(node.type))
    trivially_typed = node.type is None and not node.int_or_string
    type_name = _type_name(node)
    enum = node.enum
    body = _value_checks(node)

    def check(value: Any, old: Any, path: str, errors: list[FieldError]) -> None:
        if old is not ABSENT and strictly_equal(value, old):
            return
        if value is None:
            if not null_ok:
                errors.append(FieldError(path, TYPE_INVALID,
                                         f'Invalid value: "null": {path} in body must be of type '
                                         f'{type_name}: "null"'))
            return
        if not (isinstance(value, simple_type) if simple_type is not None
                else trivially_typed or _type_ok(value, node)):
            errors.append(FieldError(path, TYPE_INVALID,
                                     f"Invalid value: {go_value(json_type(value))}: {path} in body "
                                     f'must be of type {type_name}: "{json_type(value)}"'))
            return
        if enum is not None and not _in_enum(value, enum):
            supported = ", ".join(go_value(e) for e in enum)
            errors.append(FieldError(path, NOT_SUPPORTED,
                                     f"Unsupported value: {go_value(value)}: supported values: {supported}"))
        if body is not None:
            body(value, old, path, errors)

    return _with_fast_path(node, check) or check


def _with_fast_path(node: Node, check: Validator) -> Validator | None:
    """For a plain string or integer leaf: a check that decides a valid value of exactly that type
    with one call and no allocation, and hands anything else (a failing value, another type,
    null, an UPDATE) to `check`, which reports exactly as without it."""
    if node.int_or_string or node.enum is not None:
        return None
    if node.type == "string":
        max_length, min_length, format_check = node.max_length, node.min_length, node.format_check
        search = node.pattern[1].search if node.pattern is not None else None

        def check_string_leaf(value: Any, old: Any, path: str, errors: list[FieldError]) -> None:
            if value.__class__ is not str or old is not ABSENT or not (
                    (max_length is None or len(value) <= max_length)
                    and (min_length is None or len(value) >= min_length)
                    and (search is None or search(value))
                    and (format_check is None or format_check(value))):
                check(value, old, path, errors)

        return check_string_leaf
    if node.type == "integer" and not node.multiple_of:
        maximum, minimum = node.maximum, node.minimum
        exclusive_maximum, exclusive_minimum = node.exclusive_maximum, node.exclusive_minimum

        def check_integer_leaf(value: Any, old: Any, path: str, errors: list[FieldError]) -> None:
            if value.__class__ is not int or old is not ABSENT or not (
                    (maximum is None or value < maximum or (value == maximum and not exclusive_maximum))
                    and (minimum is None or value > minimum or (value == minimum and not exclusive_minimum))):
                check(value, old, path, errors)

        return check_integer_leaf
    return None


def _in_enum(value: Any, enum: tuple[Any, ...]) -> bool:
    return any(strictly_equal(value, e) or (_is_number(value) and _is_number(e) and value == e)
               for e in enum)


def _value_checks(node: Node) -> Validator | None:
    """The checks after the type check, chosen once by the node's type; for an untyped (or
    int-or-string) node, by the value's type at check time. None when there are none."""
    strings = _string_checks(node)
    numbers = _number_checks(node)
    objects = _object_checks(node)
    arrays = _array_checks(node)
    if not node.int_or_string:
        if node.type == "string":
            return strings
        if node.type in ("integer", "number"):
            return numbers
        if node.type == "object":
            return objects
        if node.type == "array":
            return arrays
        if node.type == "boolean":
            return None

    def by_value(value: Any, old: Any, path: str, errors: list[FieldError]) -> None:
        if isinstance(value, str):
            if strings is not None:
                strings(value, old, path, errors)
        elif _is_number(value):
            if numbers is not None:
                numbers(value, old, path, errors)
        elif isinstance(value, dict):
            objects(value, old, path, errors)
        elif isinstance(value, list):
            arrays(value, old, path, errors)

    return by_value


def _type_name(node: Node) -> str:
    return "integer,string" if node.int_or_string else str(node.type)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _string_checks(node: Node) -> Validator | None:
    max_length, min_length, pattern = node.max_length, node.min_length, node.pattern
    format_check, format_name = node.format_check, node.format
    if max_length is None and min_length is None and pattern is None and format_check is None:
        return None

    def check_string(value: str, old: Any, path: str, errors: list[FieldError]) -> None:
        if max_length is not None and len(value) > max_length:
            errors.append(FieldError(path, TOO_LONG, f"Too long: may not be more than {max_length} bytes"))
        if min_length is not None and len(value) < min_length:
            errors.append(FieldError(path, INVALID,
                                     f"Invalid value: {go_value(value)}: {path} in body should be at "
                                     f"least {min_length} chars long"))
        if pattern is not None and not pattern[1].search(value):
            errors.append(FieldError(path, INVALID,
                                     f"Invalid value: {go_value(value)}: {path} in body should match "
                                     f"'{pattern[0]}'"))
        if format_check is not None and not format_check(value):
            errors.append(FieldError(path, TYPE_INVALID,
                                     f"Invalid value: {go_value(value)}: {path} in body must be of type "
                                     f"{format_name}: {go_value(value)}"))

    return check_string


def _number_checks(node: Node) -> Validator | None:
    maximum, minimum, multiple_of = node.maximum, node.minimum, node.multiple_of
    exclusive_maximum, exclusive_minimum = node.exclusive_maximum, node.exclusive_minimum
    if maximum is None and minimum is None and not multiple_of:
        return None

    def check_number(value: float, old: Any, path: str, errors: list[FieldError]) -> None:
        if maximum is not None:
            if value > maximum or (exclusive_maximum and value == maximum):
                relation = "less than" if exclusive_maximum else "less than or equal to"
                errors.append(FieldError(path, INVALID,
                                         f"Invalid value: {go_value(value)}: {path} in body should be "
                                         f"{relation} {go_value(maximum)}"))
        if minimum is not None:
            if value < minimum or (exclusive_minimum and value == minimum):
                relation = "greater than" if exclusive_minimum else "greater than or equal to"
                errors.append(FieldError(path, INVALID,
                                         f"Invalid value: {go_value(value)}: {path} in body should be "
                                         f"{relation} {go_value(minimum)}"))
        if multiple_of:
            quotient = value / multiple_of
            if not math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9):
                errors.append(FieldError(path, INVALID,
                                         f"Invalid value: {go_value(value)}: {path} in body should be "
                                         f"a multiple of {go_value(multiple_of)}"))

    return check_number


def _child_check(node: Node) -> Validator:
    assert node.check is not None
    return node.check


def _object_checks(node: Node) -> Validator:
    embedded, required = node.embedded, node.required
    max_properties, min_properties = node.max_properties, node.min_properties
    declared = {key: _child_check(child) for key, child in (node.properties or {}).items()}
    additional = _child_check(node.additional) if node.additional is not None else None

    def check_object(value: dict[str, Any], old: Any, path: str, errors: list[FieldError]) -> None:
        if embedded:
            for key in ("apiVersion", "kind"):
                if not isinstance(value.get(key), str) or not value.get(key):
                    errors.append(FieldError(_join(path, key), REQUIRED, "Required value: must not be empty"))
        for key in required:
            if key not in value:
                errors.append(FieldError(_join(path, key), REQUIRED, "Required value"))
        if max_properties is not None and len(value) > max_properties:
            errors.append(FieldError(path, TOO_MANY,
                                     f"Too many: {len(value)}: must have at most {max_properties} items"))
        if min_properties is not None and len(value) < min_properties:
            errors.append(FieldError(path, INVALID,
                                     f"Invalid value: {len(value)}: {path} in body should have at least "
                                     f"{min_properties} properties"))
        # The common case (below the root, nothing old to correlate): the same calls as
        # `_check_children`, without its per-key branches.
        if old is ABSENT and path:
            prefix = path + "."
            for key, item in value.items():
                check = declared.get(key)
                if check is not None:
                    check(item, ABSENT, prefix + key, errors)
                elif additional is not None:
                    additional(item, ABSENT, f"{path}[{key}]", errors)
            return
        _check_children(value, old, path, errors)

    def _check_children(value: dict[str, Any], old: Any, path: str, errors: list[FieldError]) -> None:
        old_map = old if isinstance(old, dict) else None
        prefix = _prefix(path)
        for key, item in value.items():
            check = declared.get(key)
            if check is not None:
                child_path = prefix + key
            elif additional is not None:
                check, child_path = additional, f"{path}[{key}]"
            else:
                continue
            if not path and key == "metadata":
                _validate_metadata(item, errors)
                continue
            check(item, old_map.get(key, ABSENT) if old_map is not None else ABSENT, child_path, errors)

    return check_object


def _validate_metadata(meta: Any, errors: list[FieldError]) -> None:
    if not isinstance(meta, dict):
        errors.append(FieldError("metadata", TYPE_INVALID,
                                 f'Invalid value: "{json_type(meta)}": metadata in body must be of '
                                 f'type object: "{json_type(meta)}"'))


def _array_checks(node: Node) -> Validator:
    max_items, min_items = node.max_items, node.min_items
    items = _child_check(node.items) if node.items is not None else None
    list_type, map_keys = node.list_type, node.list_map_keys

    def check_array(value: list[Any], old: Any, path: str, errors: list[FieldError]) -> None:
        if max_items is not None and len(value) > max_items:
            errors.append(FieldError(path, TOO_MANY,
                                     f"Too many: {len(value)}: must have at most {max_items} items"))
        if min_items is not None and len(value) < min_items:
            errors.append(FieldError(path, INVALID,
                                     f"Invalid value: {len(value)}: {path} in body should have at least "
                                     f"{min_items} items"))
        if items is not None:
            olds = correlate_items(value, old, node)
            for index, item in enumerate(value):
                items(item, olds[index], f"{path}[{index}]", errors)
        if list_type == "set":
            seen: list[Any] = []
            for index, item in enumerate(value):
                if any(strictly_equal(item, s) for s in seen):
                    errors.append(FieldError(f"{path}[{index}]", DUPLICATE,
                                             f"Duplicate value: {go_value(item)}"))
                seen.append(item)
        elif list_type == "map" and map_keys:
            keys_seen: set[str] = set()
            for index, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                key = json.dumps([item.get(k) for k in map_keys], sort_keys=True)
                if key in keys_seen:
                    shown = ", ".join(f"{go_value(k)}:{go_value(item.get(k))}" for k in map_keys)
                    errors.append(FieldError(f"{path}[{index}]", DUPLICATE,
                                             f"Duplicate value: map[string]interface {{}}{{{shown}}}"))
                keys_seen.add(key)

    return check_array


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


# --- CEL rules --------------------------------------------------------------------------------


def validate_rules(value: Any, old: Any, node: Node, path: str, errors: list[FieldError],
                   *, root: bool = False, schema_ok: bool = False) -> None:
    """Run every `x-kubernetes-validations` rule on `value` and below (values that exist).

    Where `old` equals `value` (UPDATE of an unchanged node) only transition rules run: the
    API server ratchets the others. `schema_ok`: `validate` of the same value and old value
    reported no error, so every schema `pattern` it checked matched; a rule that is exactly
    `self.matches()` of its node's own pattern is then known to hold without running it again.
    """
    if node.check_rules is not None:
        node.check_rules(value, old, path, errors, root, schema_ok)


def _build_rule_walker(node: Node) -> RuleWalker:
    """The rule walk of a node with rules at or below it: its own rules, then only the children
    that have rules below them."""
    rules, transition_below, proven_below = node.rules, node.transition_below, node.proven_below
    objects = node.type in (None, "object")
    declared = frozenset(node.properties or ())
    walkers = {key: child.check_rules for key, child in (node.properties or {}).items()
               if child.check_rules is not None}
    additional = node.additional.check_rules if node.additional is not None else None
    items = node.items.check_rules if node.items is not None else None
    # With one child to walk (and no map values), it is looked up rather than searched for.
    only_child = next(iter(walkers.items())) if len(walkers) == 1 and additional is None else None

    def check_rules(value: Any, old: Any, path: str, errors: list[FieldError], root: bool,
                    schema_ok: bool) -> None:
        if value is None or (schema_ok and proven_below):
            return
        unchanged = old is not ABSENT and strictly_equal(value, old)
        if unchanged and not transition_below:
            return
        if rules and _type_ok(value, node):
            self_value = _root_view(value) if root else value
            old_value = _root_view(old) if root and isinstance(old, dict) else old
            for rule in rules:
                if unchanged and not rule.compiled.transition:
                    continue
                error = _run_rule(rule, self_value, old_value, node, path)
                if error is not None:
                    errors.append(error)
        if isinstance(value, dict):
            if not objects:
                return
            old_map = old if isinstance(old, dict) else None
            if only_child is not None:
                only_key, only_walk = only_child
                if only_key in value:
                    only_walk(value[only_key], old_map.get(only_key, ABSENT) if old_map is not None
                              else ABSENT, _join(path, only_key), errors, False, schema_ok)
                return
            prefix = _prefix(path)
            for key, item in value.items():
                walk = walkers.get(key)
                if walk is not None:
                    child_path = prefix + key
                elif additional is not None and key not in declared:
                    walk, child_path = additional, f"{path}[{key}]"
                else:
                    continue
                walk(item, old_map.get(key, ABSENT) if old_map is not None else ABSENT, child_path,
                     errors, False, schema_ok)
        elif isinstance(value, list) and items is not None:
            olds = correlate_items(value, old, node)
            for index, item in enumerate(value):
                items(item, olds[index], f"{path}[{index}]", errors, False, schema_ok)

    return _with_pattern_fast_path(node, check_rules) or check_rules


def _with_pattern_fast_path(node: Node, check_rules: RuleWalker) -> RuleWalker | None:
    """For a string leaf whose rules are all `self.matches('<constant>')`: a walk that decides a
    new string value matching every pattern with RE2 alone (skipping the patterns the structural
    check already matched, when it reported nothing), and hands anything else (a mismatch,
    another type, null, an UPDATE) to `check_rules`, which reports exactly as without it."""
    patterns = [rule.pattern for rule in node.rules if rule.pattern is not None]
    if (node.type != "string" or node.int_or_string or not node.rules
            or len(patterns) != len(node.rules)):
        return None
    searches = tuple(pattern.search for pattern in patterns)
    schema_pattern = node.pattern[0] if node.pattern is not None else None
    unproven = tuple(pattern.search for pattern in patterns if pattern.source != schema_pattern)

    def check_pattern_leaf(value: Any, old: Any, path: str, errors: list[FieldError], root: bool,
                           schema_ok: bool) -> None:
        if value.__class__ is not str or old is not ABSENT or root or not all(
                search(value) for search in (unproven if schema_ok else searches)):
            check_rules(value, old, path, errors, root, schema_ok)

    return check_pattern_leaf


def _root_view(obj: dict[str, Any]) -> dict[str, Any]:
    """At the root, CEL sees only `metadata.name` and `metadata.generateName`."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    view = dict(obj)
    view["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return view


def _run_rule(rule: Rule, value: Any, old: Any, node: Node, path: str) -> FieldError | None:
    try:
        if rule.pattern is not None and isinstance(value, str):
            verdict: bool | None = rule.pattern.search(value)
        else:
            verdict = rule.compiled.evaluate(value, old)
    except CelEvaluationError as error:
        return FieldError(path, INVALID, f'Invalid value: "{_cel_type(node)}": '
                                         f"{error.message} evaluating rule: {rule.rule}", rule.rule)
    if verdict is None or verdict:
        return None
    message = _rule_message(rule, value, old)
    target = path
    if rule.field_path:
        target = path + rule.field_path if rule.field_path.startswith("[") else path + (
            rule.field_path if rule.field_path.startswith(".") else "." + rule.field_path)
        target = target.lstrip(".")
    if rule.reason == FORBIDDEN:
        return FieldError(target, FORBIDDEN, f"Forbidden: {message}", rule.rule)
    if rule.reason == REQUIRED:
        return FieldError(target, REQUIRED, f"Required value: {message}", rule.rule)
    if rule.reason == DUPLICATE:
        return FieldError(target, DUPLICATE, f'Duplicate value: "{_cel_type(node)}": {message}',
                          rule.rule)
    return FieldError(target, INVALID, f'Invalid value: "{_cel_type(node)}": {message}', rule.rule)


def _cel_type(node: Node) -> str:
    return str(node.type or "object")


def _rule_message(rule: Rule, value: Any, old: Any) -> str:
    if rule.message_expression is not None:
        activation: dict[str, Any] = {"self": value}
        if old is not ABSENT:
            activation["oldSelf"] = old
        try:
            text = rule.message_expression.evaluate(activation)
        except CelEvaluationError:
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return text.strip()
    if rule.message:
        return rule.message
    return f"failed rule: {rule.rule}"
