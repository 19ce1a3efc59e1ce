"""The expression tree cel-expr-python built, read back into Python.

cel-expr-python exposes no AST objects, only `Expression.serialize()`: a `google.protobuf.Any`
holding a `cel.expr.CheckedExpr` (or a `ParsedExpr` when type checking was disabled). The
compile-time literal validators and the cost estimator need that tree, and protobuf's Python
runtime is not installed, so this module decodes the few messages involved straight from the
wire format. Field numbers are those of `cel/expr/syntax.proto` and `cel/expr/checked.proto`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from msgspec import Struct, field

_VARINT: Final = 0
_FIXED64: Final = 1
_BYTES: Final = 2
_FIXED32: Final = 5

_PRIMITIVES: Final = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN: Final = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}

DYN: Final = "dyn"
"""A checked type is kept as cel-go formats it in messages: `int`, `list(string)`, `dyn`..."""


class Expr(Struct, frozen=True):
    id: int


class Const(Expr, frozen=True):
    kind: str  # null, bool, int, uint, double, string, bytes
    value: object


class Ident(Expr, frozen=True):
    name: str


class Select(Expr, frozen=True):
    operand: Expr
    field: str
    test_only: bool


class Call(Expr, frozen=True):
    function: str
    target: Expr | None
    args: tuple[Expr, ...]


class ListExpr(Expr, frozen=True):
    elements: tuple[Expr, ...]
    optional_indices: frozenset[int]


class MapEntry(Struct, frozen=True):
    key: Expr
    value: Expr
    optional: bool


class MapExpr(Expr, frozen=True):
    entries: tuple[MapEntry, ...]


class StructExpr(Expr, frozen=True):
    message_name: str
    fields: tuple[tuple[str, Expr], ...]


class Comprehension(Expr, frozen=True):
    iter_var: str
    iter_var2: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr


class Unspecified(Expr, frozen=True):
    """An expression node the decoder left empty (never produced by a successful compile)."""


class CheckedAst(Struct, frozen=True):
    root: Expr
    types: dict[int, str] = field(default_factory=dict)
    overloads: dict[int, tuple[str, ...]] = field(default_factory=dict)
    references: dict[int, str] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)
    checked: bool = True

    def type_of(self, node: Expr) -> str:
        return self.types.get(node.id, DYN)


def decode(serialized: bytes) -> CheckedAst:
    """The tree held by `Expression.serialize()` (an Any of CheckedExpr or ParsedExpr)."""
    type_url = ""
    payload = b""
    for number, _, value in _fields(serialized):
        if number == 1:
            type_url = _text(value)
        elif number == 2:
            payload = _raw(value)
    if type_url.endswith("cel.expr.CheckedExpr"):
        return _checked_expr(payload)
    if type_url.endswith("cel.expr.ParsedExpr"):
        return _parsed_expr(payload)
    raise ValueError(f"unexpected serialized expression type {type_url!r}")


def walk(node: Expr) -> Iterator[Expr]:
    """Every node of the tree, parents before children."""
    yield node
    for child in children(node):
        yield from walk(child)


def children(node: Expr) -> tuple[Expr, ...]:
    if isinstance(node, Select):
        return (node.operand,)
    if isinstance(node, Call):
        return ((node.target,) if node.target is not None else ()) + node.args
    if isinstance(node, ListExpr):
        return node.elements
    if isinstance(node, MapExpr):
        return tuple(part for entry in node.entries for part in (entry.key, entry.value))
    if isinstance(node, StructExpr):
        return tuple(value for _, value in node.fields)
    if isinstance(node, Comprehension):
        return (
            node.iter_range,
            node.accu_init,
            node.loop_condition,
            node.loop_step,
            node.result,
        )
    return ()


# --- messages -------------------------------------------------------------------------------


def _checked_expr(data: bytes) -> CheckedAst:
    root: Expr = Unspecified(0)
    types: dict[int, str] = {}
    overloads: dict[int, tuple[str, ...]] = {}
    references: dict[int, str] = {}
    positions: dict[int, int] = {}
    for number, _, value in _fields(data):
        if number == 2:
            key, ref = _map_entry(_raw(value))
            name, ids = _reference(ref)
            if name:
                references[key] = name
            if ids:
                overloads[key] = ids
        elif number == 3:
            key, type_bytes = _map_entry(_raw(value))
            types[key] = _type(type_bytes)
        elif number == 4:
            root = _expr(_raw(value))
        elif number == 5:
            positions = _source_positions(_raw(value))
    return CheckedAst(root, types, overloads, references, positions, checked=True)


def _parsed_expr(data: bytes) -> CheckedAst:
    root: Expr = Unspecified(0)
    positions: dict[int, int] = {}
    for number, _, value in _fields(data):
        if number == 2:
            root = _expr(_raw(value))
        elif number == 3:
            positions = _source_positions(_raw(value))
    return CheckedAst(root, positions=positions, checked=False)


def _map_entry(data: bytes) -> tuple[int, bytes]:
    key = 0
    value = b""
    for number, _, item in _fields(data):
        if number == 1:
            key = _signed(_int(item))
        elif number == 2:
            value = _raw(item)
    return key, value


def _reference(data: bytes) -> tuple[str, tuple[str, ...]]:
    name = ""
    ids: list[str] = []
    for number, _, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 3:
            ids.append(_text(value))
    return name, tuple(ids)


def _source_positions(data: bytes) -> dict[int, int]:
    positions: dict[int, int] = {}
    for number, _, value in _fields(data):
        if number == 4:
            key, offset = _int_map_entry(_raw(value))
            positions[key] = offset
    return positions


def _int_map_entry(data: bytes) -> tuple[int, int]:
    key = value = 0
    for number, _, item in _fields(data):
        if number == 1:
            key = _signed(_int(item))
        elif number == 2:
            value = _signed(_int(item))
    return key, value


def _type(data: bytes) -> str:
    for number, _, value in _fields(data):
        if number == 1:
            return DYN
        if number == 2:
            return "null_type"
        if number == 3:
            return _PRIMITIVES.get(_int(value), DYN)
        if number == 4:
            return f"wrapper({_PRIMITIVES.get(_int(value), DYN)})"
        if number == 5:
            return _WELL_KNOWN.get(_int(value), DYN)
        if number == 6:
            return f"list({_first_type(_raw(value), 1)})"
        if number == 7:
            return _map_type(_raw(value))
        if number == 9:
            return _text(value)
        if number == 10:
            return _text(value)
        if number == 11:
            return f"type({_type(_raw(value))})"
        if number == 12:
            return "*error*"
        if number == 14:
            return _abstract_type(_raw(value))
    return DYN


def _first_type(data: bytes, wanted: int) -> str:
    for number, _, value in _fields(data):
        if number == wanted:
            return _type(_raw(value))
    return DYN


def _map_type(data: bytes) -> str:
    return f"map({_first_type(data, 1)}, {_first_type(data, 2)})"


def _abstract_type(data: bytes) -> str:
    name = ""
    params: list[str] = []
    for number, _, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2:
            params.append(_type(_raw(value)))
    return f"{name}({', '.join(params)})" if params else name


def _expr(data: bytes) -> Expr:
    expr_id = 0
    body: tuple[int, bytes] | None = None
    for number, _, value in _fields(data):
        if number == 2:
            expr_id = _signed(_int(value))
        elif 3 <= number <= 9:
            body = (number, _raw(value))
    if body is None:
        return Unspecified(expr_id)
    return _BUILDERS[body[0]](expr_id, body[1])


def _const(expr_id: int, data: bytes) -> Const:
    for number, wire, value in _fields(data):
        if number == 1:
            return Const(expr_id, "null", None)
        if number == 2:
            return Const(expr_id, "bool", bool(_int(value)))
        if number == 3:
            return Const(expr_id, "int", _signed(_int(value)))
        if number == 4:
            return Const(expr_id, "uint", _int(value))
        if number == 5 and wire == _FIXED64:
            return Const(expr_id, "double", struct.unpack("<d", _raw(value))[0])
        if number == 6:
            return Const(expr_id, "string", _text(value))
        if number == 7:
            return Const(expr_id, "bytes", _raw(value))
    return Const(expr_id, "null", None)


def _ident(expr_id: int, data: bytes) -> Ident:
    name = ""
    for number, _, value in _fields(data):
        if number == 1:
            name = _text(value)
    return Ident(expr_id, name)


def _select(expr_id: int, data: bytes) -> Select:
    operand: Expr = Unspecified(0)
    name = ""
    test_only = False
    for number, _, value in _fields(data):
        if number == 1:
            operand = _expr(_raw(value))
        elif number == 2:
            name = _text(value)
        elif number == 3:
            test_only = bool(_int(value))
    return Select(expr_id, operand, name, test_only)


def _call(expr_id: int, data: bytes) -> Call:
    target: Expr | None = None
    function = ""
    args: list[Expr] = []
    for number, _, value in _fields(data):
        if number == 1:
            target = _expr(_raw(value))
        elif number == 2:
            function = _text(value)
        elif number == 3:
            args.append(_expr(_raw(value)))
    return Call(expr_id, function, target, tuple(args))


def _list(expr_id: int, data: bytes) -> ListExpr:
    elements: list[Expr] = []
    optional: set[int] = set()
    for number, wire, value in _fields(data):
        if number == 1:
            elements.append(_expr(_raw(value)))
        elif number == 2:
            optional.update(_packed(value) if wire == _BYTES else [_int(value)])
    return ListExpr(expr_id, tuple(elements), frozenset(optional))


def _struct(expr_id: int, data: bytes) -> Expr:
    message = ""
    map_entries: list[MapEntry] = []
    fields: list[tuple[str, Expr]] = []
    for number, _, value in _fields(data):
        if number == 1:
            message = _text(value)
        elif number == 2:
            field_key, map_entry = _struct_entry(_raw(value))
            if map_entry is not None:
                map_entries.append(map_entry)
            elif field_key is not None:
                fields.append(field_key)
    if message:
        return StructExpr(expr_id, message, tuple(fields))
    return MapExpr(expr_id, tuple(map_entries))


def _struct_entry(data: bytes) -> tuple[tuple[str, Expr] | None, MapEntry | None]:
    field_name: str | None = None
    key: Expr | None = None
    value_expr: Expr = Unspecified(0)
    optional = False
    for number, _, value in _fields(data):
        if number == 2:
            field_name = _text(value)
        elif number == 3:
            key = _expr(_raw(value))
        elif number == 4:
            value_expr = _expr(_raw(value))
        elif number == 5:
            optional = bool(_int(value))
    if key is not None:
        return None, MapEntry(key, value_expr, optional)
    return (field_name or "", value_expr), None


def _comprehension(expr_id: int, data: bytes) -> Comprehension:
    texts = {1: "", 3: "", 8: ""}
    exprs: dict[int, Expr] = {}
    for number, _, value in _fields(data):
        if number in texts:
            texts[number] = _text(value)
        elif 2 <= number <= 7:
            exprs[number] = _expr(_raw(value))

    def part(number: int) -> Expr:
        return exprs.get(number, Unspecified(0))

    return Comprehension(
        expr_id,
        iter_var=texts[1],
        iter_var2=texts[8],
        iter_range=part(2),
        accu_var=texts[3],
        accu_init=part(4),
        loop_condition=part(5),
        loop_step=part(6),
        result=part(7),
    )


_BUILDERS: Final = {
    3: _const,
    4: _ident,
    5: _select,
    6: _call,
    7: _list,
    8: _struct,
    9: _comprehension,
}


# --- wire format ------------------------------------------------------------------------------

_Value = int | bytes


def _fields(data: bytes) -> Iterator[tuple[int, int, _Value]]:
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            number_value, pos = _varint(data, pos)
            yield number, wire, number_value
        elif wire == _FIXED64:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == _BYTES:
            length, pos = _varint(data, pos)
            yield number, wire, data[pos : pos + length]
            pos += length
        elif wire == _FIXED32:
            yield number, wire, data[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _packed(value: _Value) -> list[int]:
    data = _raw(value)
    out: list[int] = []
    pos = 0
    while pos < len(data):
        number, pos = _varint(data, pos)
        out.append(number)
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _int(value: _Value) -> int:
    if not isinstance(value, int):
        raise ValueError("expected a varint field")
    return value


def _raw(value: _Value) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("expected a length-delimited field")
    return value


def _text(value: _Value) -> str:
    return _raw(value).decode("utf-8")
