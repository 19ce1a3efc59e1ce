"""Structural validation: what the API server checks of a custom resource before its CEL rules.

apiextensions-apiserver's `pkg/apiserver/validation`, with the API server's messages: types
(int-or-string included), required, enum, string lengths (in characters), patterns (RE2), number
bounds and multiples, property and item counts, formats, embedded resources' apiVersion and kind,
and list uniqueness (`set` and `map` lists). On UPDATE a node whose value did not change is
ratcheted: its errors are not reported. Each node's check is a closure built once
(`build_validator`, attached by `crd.compile_schema`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

from fivespot.policies.admission_eval.structural import (
    DUPLICATE,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    TYPE_INVALID,
    FieldError,
    Node,
    Validator,
    correlate_items,
    join_path,
    json_type,
    path_prefix,
    strictly_equal,
    type_ok,
)
from fivespot.policies.admission_eval.gotext import bad_value, json_marshal, number_v, quote
from fivespot.policies.cel import ABSENT
from fivespot.policies.kubeversions import KubernetesVersion

def validate(value: Any, old: Any, node: Node, path: str, errors: list[FieldError]) -> None:
    """Structural checks of `value` (and everything below it) against `node`.

    `old` is the correlated old value (ABSENT on CREATE or where nothing correlates); a node
    whose value did not change is ratcheted: its errors are not reported.
    """
    assert node.check is not None
    node.check(value, old, path, errors)


_SIMPLE_TYPES: Final[Mapping[str, type]] = {"object": dict, "array": list, "string": str, "boolean": bool}


def build_validator(node: Node, server: KubernetesVersion) -> Validator:
    """The node's structural check: ratcheting, null, type, enum, then the checks of its kind,
    as the API server of version `server` makes them."""
    null_ok = node.nullable or (node.type is None and not node.int_or_string)
    simple_type = None if node.int_or_string else _SIMPLE_TYPES.get(str(node.type))
    trivially_typed = node.type is None and not node.int_or_string
    type_name = _type_name(node)
    # kube-openapi's type validator for a string with a format (validate/type.go), as 1.35's API
    # server runs it; a number's format reaches it only from 1.36 on, unproven here, so not yet.
    format_name = node.format if node.type == "string" else None
    enum = node.enum
    body, by_value = _value_checks(node, server)

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
                else trivially_typed or type_ok(value, node)):
            if format_name and isinstance(value, list):
                # the type validator lets a list through a string with a format, and the format
                # check itself only reads strings
                if enum is not None:
                    _check_enum(value, enum, path, errors)
                return
            if format_name and not isinstance(value, (str, list)):
                shown = _go_format(value)  # the field's format, and the Go format of the value
                errors.append(FieldError(path, TYPE_INVALID,
                                         f"Invalid value: {quote(shown)}: {path} in body must be "
                                         f'of type {format_name}: "{shown}"'))
            else:
                errors.append(FieldError(path, TYPE_INVALID,
                                         f"Invalid value: {quote(json_type(value))}: {path} in body "
                                         f'must be of type {type_name}: "{json_type(value)}"'))
            # kube-openapi runs every validator that applies to the value's own kind too (a
            # float in an integer field still meets `maximum`).
            if enum is not None:
                _check_enum(value, enum, path, errors)
            if by_value is not None:
                by_value(value, old, path, errors)
            return
        if enum is not None:
            _check_enum(value, enum, path, errors)
        if body is not None:
            body(value, old, path, errors)

    return _with_fast_path(node, check, server) or check


def _with_fast_path(node: Node, check: Validator, server: KubernetesVersion) -> Validator | None:
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
        if server.numeric_format_ranges and node.format == "int32":  # int64 holds every int here
            low, high = _INT32
            maximum = high if maximum is None else min(maximum, high)
            minimum = low if minimum is None else max(minimum, low)
        exclusive_maximum, exclusive_minimum = node.exclusive_maximum, node.exclusive_minimum

        def check_integer_leaf(value: Any, old: Any, path: str, errors: list[FieldError]) -> None:
            if value.__class__ is not int or old is not ABSENT or not (
                    (maximum is None or value < maximum or (value == maximum and not exclusive_maximum))
                    and (minimum is None or value > minimum or (value == minimum and not exclusive_minimum))):
                check(value, old, path, errors)

        return check_integer_leaf
    return None


def _check_enum(value: Any, enum: tuple[Any, ...], path: str, errors: list[FieldError]) -> None:
    if not _in_enum(value, enum):
        supported = ", ".join(quote(e if isinstance(e, str) else json_marshal(e)) for e in enum)
        errors.append(FieldError(path, NOT_SUPPORTED,
                                 f"Unsupported value: {bad_value(value)}: supported values: {supported}"))


def _in_enum(value: Any, enum: tuple[Any, ...]) -> bool:
    return any(strictly_equal(value, e) or (_is_number(value) and _is_number(e) and value == e)
               for e in enum)


def _value_checks(node: Node, server: KubernetesVersion
                  ) -> tuple[Validator | None, Validator | None]:
    """The checks after the type check: (those of the node's type, chosen once — for an untyped
    or int-or-string node, by the value's type at check time —; those of the value's own type,
    for a value of the wrong type). None where there are none."""
    strings = _string_checks(node)
    numbers = _number_checks(node, server)
    objects = _object_checks(node)
    arrays = _array_checks(node)

    def dispatch(value: Any, old: Any, path: str, errors: list[FieldError]) -> None:
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

    by_value = None if (strings is None and numbers is None and node.type not in ("object", "array")) \
        else dispatch
    if node.int_or_string or node.type is None:
        return dispatch, by_value
    typed = {"string": strings, "integer": numbers, "number": numbers, "object": objects,
             "array": arrays}.get(str(node.type))
    return (typed if node.type != "boolean" else None), by_value


def _go_format(value: Any) -> str:
    """The format kube-openapi infers for a decoded JSON value that is not a string or a list:
    int64 for an integer, float64 for a fraction, none for a boolean or an object."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    return "int64" if isinstance(value, int) else "float64"


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
        # maxLength, minLength, pattern: the first that fails is the only one reported
        if max_length is not None and len(value) > max_length:
            errors.append(FieldError(path, TOO_LONG, f"Too long: may not be more than {max_length} "
                                                     f"{'byte' if max_length == 1 else 'bytes'}"))
        elif min_length is not None and len(value) < min_length:
            errors.append(FieldError(path, INVALID,
                                     f"Invalid value: {bad_value(value)}: {path} in body should be at "
                                     f"least {min_length} chars long"))
        elif pattern is not None and not pattern[1].search(value):
            errors.append(FieldError(path, INVALID,
                                     f"Invalid value: {bad_value(value)}: {path} in body should match "
                                     f"'{pattern[0]}'"))
        if format_check is not None and not format_check(value):
            errors.append(FieldError(path, TYPE_INVALID,
                                     f"Invalid value: {bad_value(value)}: {path} in body must be of type "
                                     f"{format_name}: {quote(value)}"))

    return check_string


def _number_checks(node: Node, server: KubernetesVersion) -> Validator | None:
    maximum, minimum, multiple_of = node.maximum, node.minimum, node.multiple_of
    exclusive_maximum, exclusive_minimum = node.exclusive_maximum, node.exclusive_minimum
    in_range = _format_range(node, server)
    if maximum is None and minimum is None and not multiple_of and in_range is None:
        return None

    def check_number(value: float, old: Any, path: str, errors: list[FieldError]) -> None:
        if in_range is not None:
            problem = in_range(value)
            if problem is not None:  # a plain error, so no field: `<nil>: Invalid value: ""`
                errors.append(FieldError("", INVALID, f'Invalid value: "": {problem} in {path}'))
        if maximum is not None:
            if value > maximum or (exclusive_maximum and value == maximum):
                relation = "less than" if exclusive_maximum else "less than or equal to"
                errors.append(FieldError(path, INVALID,
                                         f"Invalid value: {bad_value(value)}: {path} in body should be "
                                         f"{relation} {_bound(value, maximum)}"))
        if minimum is not None:
            if value < minimum or (exclusive_minimum and value == minimum):
                relation = "greater than" if exclusive_minimum else "greater than or equal to"
                errors.append(FieldError(path, INVALID,
                                         f"Invalid value: {bad_value(value)}: {path} in body should be "
                                         f"{relation} {_bound(value, minimum)}"))
        if multiple_of:
            quotient = value / multiple_of
            if not math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9):
                errors.append(FieldError(path, INVALID,
                                         f"Invalid value: {bad_value(value)}: {path} in body should be "
                                         f"a multiple of {_bound(value, multiple_of)}"))

    return check_number


_INT32: Final = (-(2**31), 2**31 - 1)
_INT64: Final = (-(2**63), 2**63 - 1)
_FLOAT32_OVERFLOW: Final = Decimal(2**128 - 2**103)
"""The smallest magnitude Go's ParseFloat(s, 32) rounds to infinity (and so refuses)."""


def _format_range(node: Node, server: KubernetesVersion) -> Callable[[Any], str | None] | None:
    """kube-openapi's `IsValueValidAgainstRange`, which the API server applies from 1.36 on
    (`server.numeric_format_ranges`) with the schema's type and format: an integer field's value
    must parse as an int32 (format int32) or int64 (any other), a number field's of format float
    as a float32. The value is first printed as Go prints it (an integer as such, a float in
    `%f` form without trailing zeros), so a float with a fraction is no integer."""
    if not server.numeric_format_ranges or node.int_or_string:
        return None
    if node.type == "integer":
        fmt = node.format if node.format in ("int32", "int64") else None
        low, high = _INT32 if fmt == "int32" else _INT64
        problem = ("Checked value must be of type integer "
                   + (f"with format {fmt}" if fmt else "(default format)"))

        def integer(value: Any) -> str | None:
            if isinstance(value, int):
                return None if low <= value <= high else problem
            try:
                return None if low <= int(_go_f(value)) <= high else problem
            except ValueError:
                return problem
        return integer
    if node.type == "number" and node.format == "float":
        def float32(value: Any) -> str | None:
            text = str(value) if isinstance(value, int) else _go_f(value)
            fits = abs(Decimal(text)) < _FLOAT32_OVERFLOW
            return None if fits else "Checked value must be of type number with format float"
        return float32
    return None


def _go_f(value: float) -> str:
    """strconv.FormatFloat(value, 'f', -1, 64): the shortest digits that read back as the same
    float64, in positional notation."""
    text = format(Decimal(repr(value)), "f")
    return text[:-2] if text.endswith(".0") else text


def _bound(value: Any, bound: float) -> str:
    """A schema bound as kube-openapi prints it: as an int64 when both the value and the bound are
    integers (its `...Int` checks), else as a float64 (`%v`)."""
    if isinstance(value, int) and float(bound).is_integer():
        return str(int(bound))
    return number_v(float(bound))


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
                    errors.append(FieldError(join_path(path, key), REQUIRED, "Required value: must not be empty"))
        for key in required:
            if key not in value:
                errors.append(FieldError(join_path(path, key), REQUIRED, "Required value"))
        if max_properties is not None and len(value) > max_properties:
            errors.append(FieldError(path, TOO_MANY,
                                     f"Too many: {len(value)}: must have at most {max_properties} "
                                     f"{'item' if max_properties == 1 else 'items'}"))
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
                    additional(item, ABSENT, f"{path}.{key}", errors)
            return
        _check_children(value, old, path, errors)

    def _check_children(value: dict[str, Any], old: Any, path: str, errors: list[FieldError]) -> None:
        old_map = old if isinstance(old, dict) else None
        prefix = path_prefix(path)
        for key, item in value.items():
            check = declared.get(key)
            if check is not None:
                child_path = prefix + key
            elif additional is not None:
                check, child_path = additional, join_path(path, key)
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
                                     f"Too many: {len(value)}: must have at most {max_items} "
                                     f"{'item' if max_items == 1 else 'items'}"))
        if min_items is not None and len(value) < min_items:
            errors.append(FieldError(path, INVALID,
                                     f"Invalid value: {len(value)}: {path} in body should have at least "
                                     f"{min_items} items"))
        if items is not None:
            olds = correlate_items(value, old, node)
            for index, item in enumerate(value):
                items(item, olds[index], f"{path}[{index}]", errors)
        if list_type == "set":
            # Each duplicated value is reported once, at its first repeat, as the API server does.
            seen: list[Any] = []
            reported: list[Any] = []
            for index, item in enumerate(value):
                if any(strictly_equal(item, s) for s in seen):
                    if not any(strictly_equal(item, r) for r in reported):
                        errors.append(FieldError(f"{path}[{index}]", DUPLICATE,
                                                 f"Duplicate value: {bad_value(item)}"))
                        reported.append(item)
                seen.append(item)
        elif list_type == "map" and map_keys:
            keys_seen: set[str] = set()
            for index, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                key = json.dumps([item.get(k) for k in map_keys], sort_keys=True)
                if key in keys_seen:
                    shown = {k: item.get(k) for k in map_keys if k in item}
                    errors.append(FieldError(f"{path}[{index}]", DUPLICATE,
                                             f"Duplicate value: {json_marshal(shown)}"))
                keys_seen.add(key)

    return check_array
