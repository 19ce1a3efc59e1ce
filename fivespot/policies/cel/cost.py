"""The API server's static cost estimate for a CRD validation rule, computed without a cluster.

When a CRD is written, the API server estimates each `x-kubernetes-validations` rule's worst-case
cost from the OpenAPI schema and refuses the CRD when a rule exceeds 10,000,000 units (or all of
them together 100,000,000). Sizes come from `maxLength`/`maxItems`/`maxProperties`, and where
those are missing from how many values could fit in a 3 MiB request: that is why a rule that
loops over an unbounded list of unbounded strings is refused. `fivespot compile` must refuse the
same rules, with the same message, before a CRD ever reaches a cluster.

This is a port of cel-go's `checker/cost.go` estimator, of the size estimates of
`apiextensions-apiserver` (`SchemaDeclType`, the `maxElements` of each schema node) and of the
Kubernetes library costs (`apiserver/pkg/cel/library/cost.go`), run on the tree cel-expr-python
built for the rule. Types come from the schema, as in the API server's typed environment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from fivespot.policies.cel import checked
from fivespot.policies.cel.checked import CheckedAst, Expr
from fivespot.policies.cel.engine import CRD_VARIABLES, compile_expression
from fivespot.policies.kubeversions import KubernetesVersion

PER_RULE_LIMIT: Final = 10_000_000
PER_CRD_LIMIT: Final = 100_000_000
MAX_REQUEST_SIZE_BYTES: Final = 3 * 1024 * 1024

_U64: Final = 2**64 - 1
_STRING_TRAVERSAL_FACTOR: Final = 0.1
_REGEX_LENGTH_FACTOR: Final = 0.25
_LIST_CREATE: Final = 10
_MAP_CREATE: Final = 30
_STRUCT_CREATE: Final = 40
_ACCUMULATORS: Final = frozenset({"__result__", "@result"})

# JSON sizes from apiserver/pkg/cel/types.go.
_MIN_STRING: Final = 2
_MIN_BOOL: Final = 4
_MIN_NUMBER: Final = 1
_MIN_DURATION: Final = 3
_MAX_DURATION: Final = 32
_DATE: Final = 12
_MIN_DATETIME: Final = 21
_MAX_DATETIME: Final = 32


# --- ranges -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Range:
    """A [lo, hi] size or cost with cel-go's saturating uint64 arithmetic."""

    lo: int
    hi: int

    def add(self, other: _Range) -> _Range:
        return _Range(min(self.lo + other.lo, _U64), min(self.hi + other.hi, _U64))

    def times(self, other: _Range) -> _Range:
        return _Range(min(self.lo * other.lo, _U64), min(self.hi * other.hi, _U64))

    def factor(self, per_unit: float) -> _Range:
        return _Range(_by_factor(self.lo, per_unit), _by_factor(self.hi, per_unit))

    def union(self, other: _Range) -> _Range:
        return _Range(min(self.lo, other.lo), max(self.hi, other.hi))


def _by_factor(value: int, per_unit: float) -> int:
    product = math.ceil(float(value) * per_unit)
    return _U64 if product >= 2**64 else int(product)


def _fixed(value: int) -> _Range:
    return _Range(value, value)


_ZERO: Final = _fixed(0)
_ONE: Final = _fixed(1)
_UNKNOWN: Final = _Range(0, _U64)


# --- schema → declared types --------------------------------------------------------------------


@dataclass
class _Decl:
    """What apiextensions declares for a schema node: its CEL kind and size bound."""

    kind: str  # struct, map, list, string, bytes, int, double, bool, duration, timestamp, dyn
    max_elements: int = 0
    min_serialized: int = 0
    fields: dict[str, _Decl] = field(default_factory=dict)
    elem: _Decl | None = None
    bound: str | None = None  # the schema keyword that would bound this node, when it is missing


def _decl(schema: Mapping[str, Any], resource_root: bool, name_cap: bool) -> _Decl | None:
    if schema.get("x-kubernetes-int-or-string"):
        return _int_or_string(schema)
    if resource_root:
        schema = _with_type_and_object_meta(schema, name_cap)
    kind = schema.get("type")
    if kind == "array":
        return _array(schema, name_cap)
    if kind == "object":
        return _object(schema, name_cap)
    if kind == "string":
        return _string(schema)
    scalars = {"boolean": ("bool", _MIN_BOOL), "number": ("double", _MIN_NUMBER),
               "integer": ("int", _MIN_NUMBER)}
    if kind in scalars:
        name, size = scalars[kind]
        return _Decl(name, min_serialized=size)
    return None


def _int_or_string(schema: Mapping[str, Any]) -> _Decl:
    if "maxLength" in schema:
        return _Decl("dyn", _bounded_length(schema), 1)
    return _Decl("dyn", MAX_REQUEST_SIZE_BYTES - 2, 1, bound="maxLength")


def _array(schema: Mapping[str, Any], name_cap: bool) -> _Decl | None:
    items = schema.get("items")
    if not isinstance(items, Mapping):
        return None
    elem = _decl(items, bool(items.get("x-kubernetes-embedded-resource")), name_cap)
    if elem is None:
        return None
    if "maxItems" in schema:
        return _Decl("list", max(int(schema["maxItems"]), 0), 2, elem=elem)
    estimate = (MAX_REQUEST_SIZE_BYTES - 2) // (elem.min_serialized + 1)
    return _Decl("list", estimate, 2, elem=elem, bound="maxItems")


def _object(schema: Mapping[str, Any], name_cap: bool) -> _Decl | None:
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        values = _decl(additional, bool(additional.get("x-kubernetes-embedded-resource")), name_cap)
        if values is None:
            return None
        if "maxProperties" in schema:
            return _Decl("map", max(int(schema["maxProperties"]), 0), 2, elem=values)
        estimate = (MAX_REQUEST_SIZE_BYTES - 2) // (values.min_serialized + 6)
        return _Decl("map", estimate, 2, elem=values, bound="maxProperties")
    required = set(schema.get("required", ()))
    fields: dict[str, _Decl] = {}
    min_size = 2
    for name, prop in (schema.get("properties") or {}).items():
        prop_decl = _decl(prop, bool(prop.get("x-kubernetes-embedded-resource")), name_cap)
        if prop_decl is None:
            continue
        fields[name] = prop_decl
        if name in required and "default" not in prop:
            min_size += len(name) + prop_decl.min_serialized + 4
    return _Decl("struct", 0, min_size, fields=fields)


def _string(schema: Mapping[str, Any]) -> _Decl:
    fmt = schema.get("format")
    if fmt == "byte":
        if "maxLength" in schema:
            return _Decl("bytes", max(int(schema["maxLength"]), 0), _MIN_STRING)
        return _Decl("bytes", MAX_REQUEST_SIZE_BYTES - 2, _MIN_STRING, bound="maxLength")
    if fmt == "duration":
        return _Decl("duration", _MAX_DURATION, _MIN_DURATION)
    if fmt == "date":
        return _Decl("timestamp", _DATE, _DATE)
    if fmt == "date-time":
        return _Decl("timestamp", _MAX_DATETIME, _MIN_DATETIME)
    if "maxLength" in schema:
        return _Decl("string", _bounded_length(schema), _MIN_STRING)
    if schema.get("enum"):
        longest = max((len(v) for v in schema["enum"] if isinstance(v, str)), default=0)
        return _Decl("string", longest, _MIN_STRING)
    return _Decl("string", MAX_REQUEST_SIZE_BYTES - 2, _MIN_STRING, bound="maxLength")


def _bounded_length(schema: Mapping[str, Any]) -> int:
    # maxLength counts code points, the estimate bytes: a code point takes up to 4 bytes.
    return max(int(schema["maxLength"]), 0) * 4


def _with_type_and_object_meta(schema: Mapping[str, Any], name_cap: bool) -> Mapping[str, Any]:
    """`WithTypeAndObjectMeta`: a resource's root always declares kind, apiVersion and
    metadata.name and generateName (strings; with `name_cap`, as 1.37 on, of at most 253 and 252
    bytes, or the schema's own maxLength where shorter)."""
    props = schema.get("properties") or {}
    metadata = props.get("metadata") or {}
    meta_props = metadata.get("properties") or {}
    if (
        props.get("kind", {}).get("type") == "string"
        and props.get("apiVersion", {}).get("type") == "string"
        and metadata.get("type") == "object"
        and meta_props.get("name", {}).get("type") == "string"
        and meta_props.get("generateName", {}).get("type") == "string"
    ):
        return schema
    string = {"type": "string"}
    meta: dict[str, Any] = {"type": "object", "properties": {"name": string, "generateName": string}}
    if name_cap:
        meta["properties"] = {key: _capped(meta_props.get(key) or {}, limit)
                              for key, limit in (("name", 253), ("generateName", 252))}
    return {**schema, "properties": {**props, "kind": string, "apiVersion": string,
                                     "metadata": meta}}


def _capped(schema: Mapping[str, Any], limit: int) -> dict[str, Any]:
    declared = schema.get("maxLength")
    bound = min(int(declared), limit) if declared is not None else limit
    return {"type": "string", "maxLength": bound}


# --- the estimate ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unbounded:
    """A node the rule traverses whose size came from the request limit, not the schema."""

    path: str
    keyword: str
    size: int


@dataclass(frozen=True)
class CostEstimate:
    min: int
    max: int
    unbounded: tuple[Unbounded, ...] = ()

    def times(self, cardinality: int) -> CostEstimate:
        """The estimate of a rule that runs `cardinality` times (under lists and maps)."""
        return replace(self, min=min(self.min * cardinality, _U64),
                       max=min(self.max * cardinality, _U64))


def estimate_cost(
    expr: str, self_schema: Mapping[str, Any], root_is_object: bool = False, *,
    server: KubernetesVersion,
) -> CostEstimate:
    """The worst-case estimate the API server of version `server` makes for rule `expr` on the
    schema node `self_schema`.

    `root_is_object` is true for a rule at the root of a custom resource (or of an embedded
    resource), where `apiVersion`, `kind` and `metadata.name` are always declared.
    Raises CelCompileError when the rule does not compile.
    """
    root = _decl(self_schema, root_is_object, server.metadata_name_cost_cap)
    tree = compile_expression(expr, CRD_VARIABLES).tree
    coster = _Coster(tree, root)
    cost = coster.cost(tree.root)
    return CostEstimate(cost.lo, cost.hi, coster.unbounded())


def budget_violation(estimate: CostEstimate, limit: int = PER_RULE_LIMIT) -> str | None:
    """The API server's refusal for an estimate over `limit`, naming the bounds to add."""
    if estimate.max <= limit:
        return None
    exceed = estimate.max / limit
    if exceed > 100.0:
        factor = "more than 100x"
    elif exceed < 1.5:
        factor = f"{exceed:f}x"
    else:
        factor = f"{exceed:.1f}x"
    cost_name = "estimated rule cost" if limit == PER_RULE_LIMIT else "estimated rule cost total"
    message = (
        f"{cost_name} exceeds budget by factor of {factor} (try simplifying the rule, or adding "
        "maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
    if estimate.unbounded:
        hints = ", ".join(f"{u.keyword} to {u.path}" for u in estimate.unbounded)
        message += f"; unbounded here: add {hints}"
    return message


@dataclass
class _Local:
    path: tuple[str, ...]
    size: _Range | None
    entry: _Entry | None


@dataclass(frozen=True)
class _Entry:
    container: str  # list or map
    key: _Range
    value: _Range

    def union(self, other: _Entry | None) -> _Entry | None:
        if other is None:
            return None
        return _Entry(self.container, self.key.union(other.key), self.value.union(other.value))


class _Coster:
    """cel-go's coster: one pass over the tree, tracking field paths and sizes per node."""

    def __init__(self, tree: CheckedAst, root: _Decl | None) -> None:
        self.tree = tree
        self.root = root
        self.paths: dict[int, tuple[str, ...]] = {}
        self.locals: dict[str, list[_Local]] = {}
        self.sizes: dict[int, _Range] = {}
        self.entries: dict[int, _Entry] = {}
        self.traversed: dict[str, Unbounded] = {}

    def unbounded(self) -> tuple[Unbounded, ...]:
        return tuple(sorted(self.traversed.values(), key=lambda u: (-u.size, u.path)))

    # -- dispatch --

    def cost(self, node: Expr) -> _Range:
        if isinstance(node, checked.Const):
            return _ZERO
        if isinstance(node, checked.Ident):
            local = self._peek(node.name)
            self.paths[node.id] = local.path if local is not None else (node.name,)
            return _ONE
        if isinstance(node, checked.Select):
            return self._select(node)
        if isinstance(node, checked.Call):
            return self._call(node)
        if isinstance(node, checked.ListExpr):
            return self._list(node)
        if isinstance(node, checked.MapExpr):
            return self._map(node)
        if isinstance(node, checked.StructExpr):
            return sum_costs([self.cost(v) for _, v in node.fields]).add(_fixed(_STRUCT_CREATE))
        if isinstance(node, checked.Comprehension):
            return self._bind(node) if _is_bind(node) else self._comprehension(node)
        return _ZERO

    def _select(self, node: checked.Select) -> _Range:
        operand_cost = self.cost(node.operand)
        if node.test_only:
            return operand_cost  # Kubernetes prices presence tests at zero
        total = operand_cost
        if self._kind(node.operand) in {"map", "struct"}:
            total = total.add(_ONE)
        self.paths[node.id] = self._path(node.operand) + (node.field,)
        return total

    def _list(self, node: checked.ListExpr) -> _Range:
        total = _ZERO
        item = _Range(0 if not node.elements else _U64, 0)
        for element in node.elements:
            total = total.add(self.cost(element))
            item = item.union(self._size_or_unknown(element))
        self.entries[node.id] = _Entry("list", _ONE, item)
        return total.add(_fixed(_LIST_CREATE))

    def _map(self, node: checked.MapExpr) -> _Range:
        total = _ZERO
        empty = not node.entries
        key = value = _Range(0 if empty else _U64, 0)
        for entry in node.entries:
            total = total.add(self.cost(entry.key)).add(self.cost(entry.value))
            key = key.union(self._size_or_unknown(entry.key))
            value = value.union(self._size_or_unknown(entry.value))
        self.entries[node.id] = _Entry("map", key, value)
        return total.add(_fixed(_MAP_CREATE))

    def _comprehension(self, node: checked.Comprehension) -> _Range:
        total = self.cost(node.iter_range).add(self.cost(node.accu_init))
        self._push_local(node.accu_var, node.accu_init)
        if node.iter_var2:
            self._push_iter(node.iter_var, node.iter_range, "key")
            self._push_iter(node.iter_var2, node.iter_range, "value")
        else:
            self._push_iter(node.iter_var, node.iter_range, "single")
        loop = self.cost(node.loop_condition)
        step = self.cost(node.loop_step)
        self._pop(node.iter_var)
        if node.iter_var2:
            self._pop(node.iter_var2)
        total = total.add(self.cost(node.result))
        self._pop(node.accu_var)
        count = self._size_or_unknown(node.iter_range)
        total = total.add(count.times(step.add(loop)))
        if isinstance(node.accu_init, checked.Const):
            self._set_size(node, self._size(node.accu_init))
        elif isinstance(node.accu_init, (checked.ListExpr, checked.MapExpr)):
            self._set_size(node, count)
            step_entry = self._entry(node.loop_step)
            if step_entry is not None:
                self.entries[node.id] = step_entry
        return total

    def _bind(self, node: checked.Comprehension) -> _Range:
        total = self.cost(node.iter_range).add(self.cost(node.accu_init))
        self._push_local(node.accu_var, node.accu_init)
        total = total.add(self.cost(node.result))
        self._pop(node.accu_var)
        self._copy_sizes(node, node.result)
        return total

    # -- calls --

    def _call(self, node: checked.Call) -> _Range:
        if node.function == "dyn" and len(node.args) == 1:
            inner = self.cost(node.args[0])
            self._copy_sizes(node, node.args[0])
            return _ONE.add(inner)
        arg_costs = [self.cost(arg) for arg in node.args]
        total = _ZERO
        if node.target is not None:
            total = self.cost(node.target)
        function_cost: _Range | None = None
        result_size: _Range | None = None
        for overload in self._overloads(node):
            cost, size = self._function_cost(node, overload, arg_costs)
            function_cost = cost if function_cost is None else function_cost.union(cost)
            if size is not None:
                result_size = size if result_size is None else result_size.union(size)
            result_size = self._index_result(node, overload, result_size)
            if result_size is None:
                result_size = self._size(node)
        self._set_size(node, result_size)
        return total.add(function_cost or _ZERO)

    def _index_result(self, node: checked.Call, overload: str, size: _Range | None) -> _Range | None:
        if overload not in {"index_list", "index_map"} or not node.args:
            return size
        container = node.args[0]
        sub = "@items" if overload == "index_list" else "@values"
        self.paths[node.id] = self._path(container) + (sub,)
        entry = self._entry(container)
        return entry.value if entry is not None else None

    def _function_cost(
        self, node: checked.Call, overload: str, arg_costs: list[_Range]
    ) -> tuple[_Range, _Range | None]:
        args_total = sum_costs(arg_costs)
        library = self._library_cost(node, overload)
        if library is not None:
            return library[0].add(args_total), library[1]
        builtin = self._builtin_cost(node, overload, arg_costs)
        if builtin is not None:
            return builtin
        return _ONE.add(args_total), None

    def _builtin_cost(
        self, node: checked.Call, overload: str, arg_costs: list[_Range]
    ) -> tuple[_Range, _Range | None] | None:
        args_total = sum_costs(arg_costs)
        args = node.args
        target = node.target
        if overload == "ext_format_string" and target is not None and args:
            target_size = self._size_or_unknown(target)
            result = target_size.add(self._size_or_unknown(args[0]))
            return target_size.factor(_STRING_TRAVERSAL_FACTOR).add(args_total), result
        if overload in {"string_to_bytes", "bytes_to_string", "ext_quote_string"} and len(args) == 1:
            size = self._size_or_unknown(args[0])
            results = {
                "string_to_bytes": _Range(size.lo, min(size.hi * 4, _U64)),
                "bytes_to_string": _Range(size.lo // 4, size.hi),
                "ext_quote_string": _Range(size.lo + 2, min(size.hi * 2 + 2, _U64)),
            }
            return size.factor(_STRING_TRAVERSAL_FACTOR).add(args_total), results[overload]
        if overload in {"starts_with_string", "ends_with_string"} and len(args) == 1:
            return self._size_or_unknown(args[0]).factor(_STRING_TRAVERSAL_FACTOR).add(args_total), None
        if overload == "in_list" and len(args) == 2:
            return self._size_or_unknown(args[1]).factor(1).add(args_total), None
        if overload == "matches_string" and target is not None and len(args) == 1:
            text = self._size_or_unknown(target).add(_ONE).factor(_STRING_TRAVERSAL_FACTOR)
            regex = self._size_or_unknown(args[0]).factor(_REGEX_LENGTH_FACTOR)
            return text.times(regex).add(args_total), None
        if overload == "contains_string" and target is not None and len(args) == 1:
            text = self._size_or_unknown(target).factor(_STRING_TRAVERSAL_FACTOR)
            sub = self._size_or_unknown(args[0]).factor(_STRING_TRAVERSAL_FACTOR)
            return text.times(sub).add(args_total), None
        if overload in {"logical_and", "logical_or"}:
            lhs, rhs = arg_costs[0], arg_costs[1]
            return _Range(lhs.lo, lhs.add(rhs).hi), None
        if overload == "conditional":
            return self._conditional(node, arg_costs)
        if overload in {"add_string", "add_bytes", "add_list"} and len(args) == 2:
            return self._concatenation(node, overload, args_total)
        if overload in _SIZE_COMPARISONS and len(args) == 2:
            smallest = min(self._size_or_unknown(args[0]).hi, self._size_or_unknown(args[1]).hi)
            compare = _Range(1 if smallest > 0 else 0, smallest)
            return compare.factor(_STRING_TRAVERSAL_FACTOR).add(args_total), None
        return None

    def _conditional(
        self, node: checked.Call, arg_costs: list[_Range]
    ) -> tuple[_Range, _Range]:
        _, when_true, when_false = node.args
        size = self._size_or_unknown(when_true).union(self._size_or_unknown(when_false))
        entry = self._entry(when_true)
        merged = entry.union(self._entry(when_false)) if entry is not None else None
        if merged is not None:
            self.entries[node.id] = merged
        return arg_costs[0].add(arg_costs[1].union(arg_costs[2])), size

    def _concatenation(
        self, node: checked.Call, overload: str, args_total: _Range
    ) -> tuple[_Range, _Range]:
        left, right = node.args
        size = self._size_or_unknown(left).add(self._size_or_unknown(right))
        entry = self._entry(left)
        merged = entry.union(self._entry(right)) if entry is not None else None
        if merged is not None:
            self.entries[node.id] = merged
        if overload == "add_list":
            return _ONE.add(args_total), size
        return size.factor(_STRING_TRAVERSAL_FACTOR).add(args_total), size

    def _library_cost(
        self, node: checked.Call, overload: str
    ) -> tuple[_Range, _Range | None] | None:
        """Kubernetes' EstimateCallCost: chosen by function name, not by overload."""
        name, target, args = node.function, node.target, node.args
        if name == "check":
            return _fixed(350000), None
        if name in _NOMINAL_FUNCTIONS:
            return _ONE, None
        if name in {"isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"} and target:
            return self._list_function_cost(target), None
        if name == "url" and len(args) == 1:
            return self._size_or_unknown(args[0]).factor(_STRING_TRAVERSAL_FACTOR), None
        if name in {"lowerAscii", "upperAscii", "substring", "trim"} and target is not None:
            size = self._size_or_unknown(target)
            return size.factor(_STRING_TRAVERSAL_FACTOR), size
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace_cost(target, args)
        if name == "split" and target is not None:
            return self._split_cost(target, args)
        if name == "join" and target is not None:
            return self._join_cost(target, args)
        if name in {"find", "findAll"} and target is not None and args:
            size = self._size_or_unknown(target)
            text = size.add(_ONE).factor(_STRING_TRAVERSAL_FACTOR)
            regex = self._size_or_unknown(args[0]).factor(_REGEX_LENGTH_FACTOR)
            return text.times(regex), _Range(0, size.hi)
        if name in _PARSING_FUNCTIONS and target is not None and args:
            return self._size_or_unknown(args[0]).factor(_STRING_TRAVERSAL_FACTOR), None
        if name == "ip" and target is not None:
            if args and overload != "cidr_ip":
                return self._size_or_unknown(args[0]).factor(_STRING_TRAVERSAL_FACTOR), None
            return _ONE, None
        if name == "ip.isCanonical" and target is not None and args:
            return self._size_or_unknown(args[0]).factor(2 * _STRING_TRAVERSAL_FACTOR), None
        if name in {"containsIP", "containsCIDR"} and target is not None and args:
            return self._contains_cost(name, args[0]), None
        return None

    def _list_function_cost(self, target: Expr) -> _Range:
        element = self._element(target)
        if element is None:  # indexOf / lastIndexOf on a string
            return self._size_or_unknown(target).factor(_STRING_TRAVERSAL_FACTOR)
        per_element = _ONE
        if element[1] in {"string", "bytes"}:
            per_element = per_element.add(
                self._estimate(element[0]).factor(_STRING_TRAVERSAL_FACTOR)
            )
        return self._size_or_unknown(target).times(per_element)

    def _replace_cost(self, target: Expr, args: Sequence[Expr]) -> tuple[_Range, _Range]:
        size = self._size_or_unknown(target)
        old = self._size_or_unknown(args[0])
        new = self._size_or_unknown(args[1])
        if old.lo == 0:
            count_hi, kept_hi = (size.hi + 1 if size.hi < _U64 else size.hi), size.hi
        elif new.hi <= old.lo:
            count_hi, kept_hi = 0, size.hi
        else:
            count_hi, kept_hi = math.ceil(size.hi / old.lo), 0
        if old.hi == 0:
            count_lo, kept_lo = (size.lo + 1 if size.lo < _U64 else size.lo), size.lo
        elif old.hi <= new.lo:
            count_lo, kept_lo = 0, size.lo
        else:
            count_lo, kept_lo = math.ceil(size.lo / old.hi), 0
        result = _Range(count_lo, count_hi).times(new).add(_Range(kept_lo, kept_hi))
        return size.factor(2 * _STRING_TRAVERSAL_FACTOR), result

    def _split_cost(self, target: Expr, args: Sequence[Expr]) -> tuple[_Range, _Range]:
        size = self._size_or_unknown(target)
        most = size.hi
        if len(args) > 1 and isinstance(args[1], checked.Const):
            value = args[1].value
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                most = value
        return size.factor(2 * _STRING_TRAVERSAL_FACTOR), _Range(0, most)

    def _join_cost(self, target: Expr, args: Sequence[Expr]) -> tuple[_Range, _Range]:
        count = self._size_or_unknown(target)
        size = _ZERO
        element = self._element(target)
        if element is not None:
            size = count.times(self._estimate(element[0]))
        if args:
            separators = _Range(max(count.lo - 1, 0), max(count.hi - 1, 0))
            size = size.add(self._size_or_unknown(args[0]).times(separators))
        return size.factor(_STRING_TRAVERSAL_FACTOR), size

    def _contains_cost(self, name: str, other: Expr) -> _Range:
        address = _Range(4, 16)
        total = address.add(address).factor(_STRING_TRAVERSAL_FACTOR)
        if name == "containsCIDR":
            total = total.add(address.factor(_STRING_TRAVERSAL_FACTOR)).add(_ONE)
        if self._kind(other) == "string":
            total = total.add(self._size_or_unknown(other).factor(_STRING_TRAVERSAL_FACTOR))
        return total

    # -- overloads and types --

    def _overloads(self, node: checked.Call) -> tuple[str, ...]:
        chosen = _overload_for(node.function, node.target is not None, self._arg_kinds(node))
        if chosen is not None:
            return (chosen,)
        return self.tree.overloads.get(node.id, ("",))

    def _arg_kinds(self, node: checked.Call) -> list[str]:
        return [self._kind(arg) for arg in node.args]

    def _kind(self, node: Expr) -> str:
        decl = self._decl_of(node)
        if decl is not None:
            return decl.kind
        return _kind_of_type(self.tree.type_of(node))

    def _element(self, target: Expr) -> tuple[_SizedNode, str] | None:
        """The element node of a list-typed target (cel-go's listElementNode)."""
        decl = self._decl_of(target)
        path = self._path(target)
        if decl is not None:
            if decl.kind != "list" or decl.elem is None:
                return None
            return _SizedNode(path + ("@items",) if path else ()), decl.elem.kind
        type_name = self.tree.type_of(target)
        if type_name.startswith("list("):
            return _SizedNode(path + ("@items",) if path else ()), _kind_of_type(type_name[5:-1])
        return None

    # -- sizes --

    def _size_or_unknown(self, node: Expr) -> _Range:
        size = self._size(node)
        return size if size is not None else _UNKNOWN

    def _size(self, node: Expr) -> _Range | None:
        if node.id in self.sizes:
            return self.sizes[node.id]
        literal = _literal_size(node)
        if literal is not None:
            return literal
        estimate = self._schema_size(self._path(node))
        if estimate is not None:
            self.sizes[node.id] = estimate
            return estimate
        if _is_scalar(self.tree.type_of(node)):
            return _ONE
        if isinstance(node, checked.Ident):
            local = self._peek(node.name)
            if local is not None and local.size is not None:
                return local.size
        return None

    def _estimate(self, sized: _SizedNode) -> _Range:
        estimate = self._schema_size(sized.path)
        return estimate if estimate is not None else _UNKNOWN

    def _schema_size(self, path: tuple[str, ...]) -> _Range | None:
        if not path:
            return None
        decl = self._decl_at(path)
        if decl is None:
            return None
        if decl.bound is not None and path[0] in CRD_VARIABLES:
            rendered = _render(path)
            self.traversed[rendered] = Unbounded(rendered, decl.bound, decl.max_elements)
        return _Range(0, decl.max_elements)

    def _entry(self, node: Expr) -> _Entry | None:
        if node.id in self.entries:
            return self.entries[node.id]
        if isinstance(node, checked.Ident):
            local = self._peek(node.name)
            if local is not None:
                return local.entry
        return None

    def _set_size(self, node: Expr, size: _Range | None) -> None:
        if size is not None:
            self.sizes[node.id] = size

    def _copy_sizes(self, destination: Expr, source: Expr) -> None:
        self._set_size(destination, self._size(source))
        entry = self._entry(source)
        if entry is not None:
            self.entries[destination.id] = entry

    # -- paths and declarations --

    def _path(self, node: Expr) -> tuple[str, ...]:
        if isinstance(node, checked.Ident):
            local = self._peek(node.name)
            if local is not None:
                return local.path
        return self.paths.get(node.id, ())

    def _decl_of(self, node: Expr) -> _Decl | None:
        path = self._path(node)
        if not path or path[0] not in CRD_VARIABLES:
            return None
        return self._decl_at(path)

    def _decl_at(self, path: tuple[str, ...]) -> _Decl | None:
        # Like the API server's size estimator, the first element (the variable) is skipped.
        current = self.root
        for name in path[1:]:
            if current is None:
                return None
            if name in {"@items", "@values"}:
                current = current.elem
            elif name in {"@keys", "@indices"}:
                current = _Decl("string", 0) if current.kind == "map" else None
            else:
                current = current.fields.get(name)
        return current

    # -- local variables --

    def _push_local(self, name: str, init: Expr) -> None:
        local = _Local(self._path(init), self._size(init), self._entry(init))
        self.locals.setdefault(name, []).append(local)

    def _push_iter(self, name: str, iter_range: Expr, role: str) -> None:
        entry = self._entry(iter_range)
        container = entry.container if entry is not None else self._kind(iter_range)
        is_list = container == "list"
        if role == "key":
            sub, size = ("@indices" if is_list else "@keys"), (entry.key if entry else None)
        elif role == "value":
            sub, size = ("@items" if is_list else "@values"), (entry.value if entry else None)
        else:
            sub = "@items" if is_list else "@keys"
            size = (entry.value if is_list else entry.key) if entry else None
        local = _Local(self._path(iter_range) + (sub,), size, None)
        self.locals.setdefault(name, []).append(local)

    def _peek(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def _pop(self, name: str) -> None:
        stack = self.locals.get(name)
        if stack:
            stack.pop()


@dataclass(frozen=True)
class _SizedNode:
    path: tuple[str, ...]


_NOMINAL_FUNCTIONS: Final = frozenset({
    "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name",
    "allowed", "reason", "error", "errored",
    "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "sign", "asInteger", "isInteger", "asApproximateFloat", "isGreaterThan", "isLessThan",
    "compareTo", "add", "sub",
})

_PARSING_FUNCTIONS: Final = frozenset({"cidr", "isIP", "isCIDR", "quantity", "isQuantity"})
"""Kubernetes prices these only in member form, which they never take: they cost 1 + args."""

_SIZE_COMPARISONS: Final = frozenset({
    "less_string", "greater_string", "less_equals_string", "greater_equals_string",
    "less_bytes", "greater_bytes", "less_equals_bytes", "greater_equals_bytes",
    "equals", "not_equals",
})

_ORDERING_NAMES: Final = {"_<_": "less", "_>_": "greater", "_<=_": "less_equals",
                          "_>=_": "greater_equals"}


def _overload_for(function: str, member: bool, kinds: list[str]) -> str | None:
    """The overload the API server's typed checker resolves, when the kinds decide it."""
    fixed = {"_&&_": "logical_and", "_||_": "logical_or", "_?_:_": "conditional",
             "_==_": "equals", "_!=_": "not_equals"}
    if function in fixed:
        return fixed[function]
    if function == "_+_" and kinds and kinds[0] in {"string", "bytes", "list"}:
        return f"add_{kinds[0]}"
    if function in _ORDERING_NAMES and kinds and kinds[0] in {"string", "bytes"}:
        return f"{_ORDERING_NAMES[function]}_{kinds[0]}"
    if function == "_[_]" and kinds:
        return {"list": "index_list", "map": "index_map", "struct": "index_map"}.get(kinds[0])
    if function == "@in" and len(kinds) == 2:
        return {"list": "in_list", "map": "in_map"}.get(kinds[1])
    member_overloads = {"matches": "matches_string", "contains": "contains_string",
                        "startsWith": "starts_with_string", "endsWith": "ends_with_string",
                        "format": "ext_format_string"}
    if member and function in member_overloads:
        return member_overloads[function]
    if function == "bytes" and kinds == ["string"]:
        return "string_to_bytes"
    if function == "string" and kinds == ["bytes"]:
        return "bytes_to_string"
    if function == "strings.quote":
        return "ext_quote_string"
    if function in {"matches", "size", "has", "@not_strictly_false", "!_", "-_", "_-_", "_*_",
                    "_/_", "_%_", "_<_", "_>_", "_<=_", "_>=_", "_+_", "int", "uint", "double",
                    "string", "bytes", "duration", "timestamp", "type", "dyn"}:
        return function
    return None


def _kind_of_type(type_name: str) -> str:
    if type_name.startswith("list("):
        return "list"
    if type_name.startswith("map("):
        return "map"
    return {
        "google.protobuf.Timestamp": "timestamp",
        "google.protobuf.Duration": "duration",
    }.get(type_name, type_name)


def _is_scalar(type_name: str) -> bool:
    if type_name.startswith("optional_type(") and type_name.endswith(")"):
        return _is_scalar(type_name[len("optional_type(") : -1])
    return _kind_of_type(type_name) in {"bool", "double", "duration", "int", "timestamp", "uint"}


def _literal_size(node: Expr) -> _Range | None:
    if isinstance(node, checked.Const):
        if node.kind == "string":
            return _fixed(len(str(node.value)))
        if node.kind == "bytes":
            value = node.value
            return _fixed(len(value) if isinstance(value, bytes) else 0)
        return _ONE
    if isinstance(node, checked.ListExpr):
        return _fixed(len(node.elements))
    if isinstance(node, checked.MapExpr):
        return _fixed(len(node.entries))
    return None


def _is_bind(node: checked.Comprehension) -> bool:
    return (
        isinstance(node.iter_range, checked.ListExpr)
        and not node.iter_range.elements
        and isinstance(node.loop_condition, checked.Const)
        and node.loop_condition.value is False
        and node.accu_var not in _ACCUMULATORS
    )


def _render(path: tuple[str, ...]) -> str:
    text = path[0]
    for part in path[1:]:
        text += {"@items": "[*]", "@values": "[*]", "@keys": "<keys>"}.get(part, f".{part}")
    return text


def sum_costs(costs: Sequence[_Range]) -> _Range:
    total = _ZERO
    for cost in costs:
        total = total.add(cost)
    return total
