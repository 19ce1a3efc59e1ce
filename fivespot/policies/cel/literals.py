"""Compile-time checks Kubernetes runs on CEL literals and cel-expr-python does not.

Since Kubernetes 1.29 the API server compiles rules with cel-go's AST validators: mixed-type list
and map literals, invalid `duration('...')` / `timestamp('...')` literals and invalid constant
regex patterns are compile errors, so a CRD carrying them is refused at write time. (Constant
patterns of the Kubernetes `find`/`findAll` functions fail there too, when the program is
instantiated with regex precompilation.) cel-expr-python accepts all of these and fails only
when the expression runs, which would let `fivespot compile` emit a CRD the cluster rejects.

The checks walk the tree from `checked.decode`; whether a literal is valid is decided by the
caller with the engine itself, so "valid" means exactly what the runtime will accept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from msgspec import Struct

from fivespot.policies.cel import checked
from fivespot.policies.cel.checked import CheckedAst, Expr

_EXEMPT_FUNCTIONS: Final = frozenset({"format"})
"""`'%s %d'.format([name, 1])` takes a mixed list by design; cel-go exempts literals under it."""

_FUNCTION_ARGUMENT_CHECKS: Final = {
    "duration": "duration",
    "timestamp": "timestamp",
    "matches": "regex",
    "find": "regex",
    "findAll": "regex",
}


class Issue(Struct, frozen=True):
    expr_id: int
    message: str


LiteralCheck = Callable[[str, str], bool]
"""(kind, literal) -> whether the runtime accepts it; kind is duration, timestamp or regex."""


def literal_issues(tree: CheckedAst, is_valid: LiteralCheck) -> list[Issue]:
    """Everything the Kubernetes (cel-go) AST validators would report for this tree."""
    parents = _parents(tree.root)
    issues = list(_invalid_function_literals(tree.root, is_valid))
    issues.extend(_mixed_aggregates(tree, parents))
    return sorted(issues, key=lambda issue: issue.expr_id)


def _invalid_function_literals(root: Expr, is_valid: LiteralCheck) -> Iterator[Issue]:
    for node in checked.walk(root):
        if not isinstance(node, checked.Call) or node.function not in _FUNCTION_ARGUMENT_CHECKS:
            continue
        kind = _FUNCTION_ARGUMENT_CHECKS[node.function]
        # cel-go checks argument 0 of the call: the pattern of `s.matches(p)` and `s.find(p)`,
        # the string of `duration(s)`; it skips anything that is not a string constant.
        if not node.args:
            continue
        literal = node.args[0]
        if isinstance(literal, checked.Const) and literal.kind == "string":
            if not is_valid(kind, str(literal.value)):
                yield Issue(literal.id, f"invalid {node.function} argument")


def _mixed_aggregates(tree: CheckedAst, parents: dict[int, Expr]) -> Iterator[Issue]:
    for node in checked.walk(tree.root):
        if _under_exempt_function(node, parents):
            continue
        if isinstance(node, checked.ListExpr):
            yield from _mixed_list(tree, node)
        elif isinstance(node, checked.MapExpr):
            yield from _mixed_map(tree, node)


def _mixed_list(tree: CheckedAst, node: checked.ListExpr) -> Iterator[Issue]:
    expected: str | None = None
    for index, element in enumerate(node.elements):
        actual = _literal_type(tree, element)
        if index in node.optional_indices:
            actual = _optional_parameter(actual)
        if expected is None:
            expected = actual
        elif not _equivalent(expected, actual):
            yield _mismatch(element, expected, actual)
            return


def _mixed_map(tree: CheckedAst, node: checked.MapExpr) -> Iterator[Issue]:
    key_type: str | None = None
    value_type: str | None = None
    for entry in node.entries:
        actual_key = _literal_type(tree, entry.key)
        actual_value = _literal_type(tree, entry.value)
        if entry.optional:
            actual_value = _optional_parameter(actual_value)
        if key_type is None or value_type is None:
            key_type, value_type = actual_key, actual_value
            continue
        if not _equivalent(key_type, actual_key):
            yield _mismatch(entry.key, key_type, actual_key)
        if not _equivalent(value_type, actual_value):
            yield _mismatch(entry.value, value_type, actual_value)


def _mismatch(node: Expr, expected: str, actual: str) -> Issue:
    return Issue(node.id, f"expected type '{expected}' but found '{actual}'")


def _literal_type(tree: CheckedAst, node: Expr) -> str:
    if tree.checked:
        return tree.type_of(node)
    # Unchecked trees (cross-type numeric recompiles) only know the types of constants.
    if isinstance(node, checked.Const):
        return "null_type" if node.kind == "null" else node.kind
    return checked.DYN


def _optional_parameter(type_name: str) -> str:
    prefix = "optional_type("
    if type_name.startswith(prefix) and type_name.endswith(")"):
        return type_name[len(prefix) : -1]
    return type_name


def _equivalent(left: str, right: str) -> bool:
    """cel-go's strict type equivalence, except that `dyn` matches anything.

    Kubernetes declares every schema field with its concrete type, so `[self.a, 1]` is fine there
    when `a` is an integer; here the variables are `dyn` and their element types are unknown.
    """
    if left == right or checked.DYN in (left, right):
        return True
    left_name, left_params = _split_type(left)
    right_name, right_params = _split_type(right)
    return (
        left_name == right_name
        and len(left_params) == len(right_params)
        and all(_equivalent(a, b) for a, b in zip(left_params, right_params, strict=True))
    )


def _split_type(type_name: str) -> tuple[str, list[str]]:
    if not type_name.endswith(")") or "(" not in type_name:
        return type_name, []
    name, _, inner = type_name[:-1].partition("(")
    params: list[str] = []
    depth = 0
    current = ""
    for char in inner:
        if char == "," and depth == 0:
            params.append(current.strip())
            current = ""
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current += char
    params.append(current.strip())
    return name, params


def _under_exempt_function(node: Expr, parents: dict[int, Expr]) -> bool:
    parent = parents.get(node.id)
    while parent is not None:
        if isinstance(parent, checked.Call):
            return parent.function in _EXEMPT_FUNCTIONS
        if not isinstance(parent, (checked.ListExpr, checked.MapExpr)):
            return False
        parent = parents.get(parent.id)
    return False


def _parents(root: Expr) -> dict[int, Expr]:
    parents: dict[int, Expr] = {}
    for node in checked.walk(root):
        for child in checked.children(node):
            parents[child.id] = node
    return parents
