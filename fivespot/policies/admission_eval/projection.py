"""Which parts of its variables a CEL program can observe, and the variables cut down to them.

cel-expr-python converts a variable of an activation from Python into CEL the first time an
expression reads it, and converts all of it: for an admission request that is the whole object,
the whole request and the whole params object, about as costly as the evaluation itself. Most
policies read a handful of fields (`object.spec.schedule.kind`), so the request's activation for
the all-validations shortcut is built from projections holding only those fields.

Exactness: a program reaches into a variable only through chains of field selections from its
identifier (`object.spec.nodeName`, `has(object.spec.handback)`). Every such chain is recorded as a
path, and the value at the end of the chain is kept whole, as is any variable used in another way
(indexed, iterated, compared, passed to a function, optional-selected). Keys on a path that are
absent stay absent, and a value that is not a map is kept whole, so every selection the program
makes yields the same value, the same `has()` answer and the same error as on the full value.
A comprehension variable that shadows a declared name only makes the projection larger.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Union

from fivespot.policies.cel import checked

Paths = Union[dict[str, "Paths"], None]
"""The fields of a value a program can observe: None for all of it, else a field -> Paths map."""


def reads(root: checked.Expr, variables: Iterable[str]) -> dict[str, Paths]:
    """For each of `variables` the program mentions, the paths it can observe."""
    names = frozenset(variables)
    found: dict[str, Paths] = {}
    _collect(root, names, found)
    return found


def merge(into: dict[str, Paths], other: Mapping[str, Paths]) -> None:
    """Add `other`'s paths to `into` (the union of what two programs observe)."""
    for name, paths in other.items():
        if name not in into:
            into[name] = _copy(paths)
        else:
            into[name] = _union(into[name], paths)


def project(value: Any, paths: Paths) -> Any:
    """`value` reduced to `paths` (shared, not copied, below each path's end)."""
    if paths is None or not isinstance(value, dict):
        return value
    out = {}
    for key, below in paths.items():
        if key in value:
            item = value[key]
            out[key] = item if below is None else project(item, below)
    return out


def _collect(node: checked.Expr, names: frozenset[str], found: dict[str, Paths]) -> None:
    chain = _field_chain(node)
    if chain is not None and chain[0] in names:
        _add(found, chain[0], chain[1])
        return
    if isinstance(node, checked.Ident) and node.name in names:
        _add(found, node.name, ())
        return
    for child in checked.children(node):
        _collect(child, names, found)


def _field_chain(node: checked.Expr) -> tuple[str, tuple[str, ...]] | None:
    """(identifier, fields) when `node` is `ident.f1.f2...` (the last may be a `has()` test)."""
    fields: list[str] = []
    while isinstance(node, checked.Select):
        fields.append(node.field)
        node = node.operand
    if not fields or not isinstance(node, checked.Ident):
        return None
    return node.name, tuple(reversed(fields))


def _add(found: dict[str, Paths], name: str, path: tuple[str, ...]) -> None:
    found[name] = _union(found[name], _path(path)) if name in found else _path(path)


def _path(path: tuple[str, ...]) -> Paths:
    paths: Paths = None
    for field in reversed(path):
        paths = {field: paths}
    return paths


def _union(left: Paths, right: Paths) -> Paths:
    if left is None or right is None:
        return None
    out = dict(left)
    for key, below in right.items():
        out[key] = _union(out[key], below) if key in out else _copy(below)
    return out


def _copy(paths: Paths) -> Paths:
    return None if paths is None else {key: _copy(below) for key, below in paths.items()}
