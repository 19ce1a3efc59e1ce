"""The static cost estimate agrees with the API server's, unit for unit.

KUBERNETES_COST_TABLE is Kubernetes' own expectation table, `TestCostEstimation` in
kubernetes/kubernetes `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/
compilation_test.go`: each rule is estimated once on a schema without bounds and once with the
bound `set` applied (maxItems / maxProperties / maxLength); `None` there means only "over the
per-CRD limit" is asserted upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fivespot.policies.cel import (
    PER_CRD_LIMIT,
    PER_RULE_LIMIT,
    CelCompileError,
    CostEstimate,
    budget_violation,
    estimate_cost,
)
from fivespot.policies.kubeversions import DEFAULT

Schema = dict[str, Any]
Generator = Callable[[int | None], Schema]


def scalar(kind: str) -> Schema:
    if kind == "int-or-string":
        return {"x-kubernetes-int-or-string": True}
    if kind in {"duration", "date", "date-time", "byte"}:
        return {"type": "string", "format": kind}
    return {"type": kind}


def string(max_length: int | None) -> Schema:
    return {"type": "string"} | ({} if max_length is None else {"maxLength": max_length})


def array(items: Schema, max_items: int | None) -> Schema:
    schema: Schema = {"type": "array", "items": items}
    return schema | ({} if max_items is None else {"maxItems": max_items})


def mapping(values: Schema, max_properties: int | None) -> Schema:
    schema: Schema = {"type": "object", "additionalProperties": values}
    return schema | ({} if max_properties is None else {"maxProperties": max_properties})


def array_of(kind: str) -> Generator:
    return lambda bound: array(scalar(kind), bound)


def map_of(kind: str) -> Generator:
    return lambda bound: mapping(scalar(kind), bound)


def strings() -> Generator:
    return string


def bytes_with(bound: int | None) -> Schema:
    return scalar("byte") | ({} if bound is None else {"maxLength": bound})


KUBERNETES_COST_TABLE: list[tuple[str, Generator, str, int | None, int, int]] = [
    ("number array with all", array_of("number"), "self.all(x, true)", 4718591, 10, 32),
    ("string array with all", array_of("string"), "self.all(x, true)", 3145727, 20, 62),
    ("boolean array with all", array_of("boolean"), "self.all(x, true)", 1887437, 5, 17),
    ("array of number arrays with all", lambda b: array(array(scalar("number"), b), b),
     "self.all(x, true)", 3145727, 100, 302),
    ("map of numbers with all", map_of("number"), "self.all(x, true)", 1348169, 10, 32),
    ("map of strings with all", map_of("string"), "self.all(x, true)", 1179647, 3, 11),
    ("map of booleans with all", map_of("boolean"), "self.all(x, true)", 943718, 100, 302),
    ("string with contains", strings(), "self.contains('test')", 314574, 10, 5),
    ("string with startsWith", strings(), "self.startsWith('test')", 2, 15, 2),
    ("string with endsWith", strings(), "self.endsWith('test')", 2, 30, 2),
    ("concat string", strings(), 'size(self + "hello") > size("hello")', 314578, 4, 7),
    ("index of array with numbers", array_of("number"), "self[1] == 0.0", 2, 5000, 2),
    ("index of array with strings", array_of("string"), "self[1] == self[1]", 314577, 8, 314577),
    ("O(n^2) loop with numbers", array_of("number"), "self.all(x, self.all(y, true))",
     None, 10, 352),
    ("O(n^3) loop with numbers", array_of("number"),
     "self.all(x, self.all(y, self.all(z, true)))", None, 10, 3552),
    ("regex matches simple", strings(), 'self.matches("x")', 314574, 50, 22),
    ("regex matches empty string", strings(), '"".matches("(((((((((())))))))))[0-9]")',
     7, 10, 7),
    ("regex matches empty regex", strings(), 'self.matches("")', 1, 100, 1),
    ("set array maxLength to zero", array_of("number"), "self[3] == 0.0", 2, 0, 2),
    ("set map maxLength to zero", map_of("number"), 'self["x"] == 0.0', 2, 0, 2),
    ("set string maxLength to zero", strings(), 'self == "x"', 2, 0, 1),
    ("set bytes maxLength to zero", bytes_with, 'self == b"x"', 2, 0, 1),
    ("set maxLength greater than estimated maxLength", array_of("number"),
     "self.all(x, x == 0.0)", 6291454, 3 * 1024 * 2048, 25165826),
    ("int-or-string array with all", array_of("int-or-string"), "self.all(x, true)",
     4718591, 10, 32),
    ("index of array with int-or-strings", array_of("int-or-string"), "self[0] == 5", 3, 10, 3),
    ("index of array with booleans", array_of("boolean"), "self[0] == false", 2, 25, 2),
    ("index of array of array of numbers", lambda b: array(array(scalar("number"), b), b),
     "self[0][0] == -1.0", 3, 51, 3),
    ("array of number maps with all", lambda b: array(mapping(scalar("number"), b), b),
     "self.all(x, x.y == 25.2)", 6291452, 12, 74),
    ("index of array of number maps", lambda b: array(mapping(scalar("number"), b), b),
     "self[0].x > 2.0", 4, 3000, 4),
    ("duration array with all", array_of("duration"), "self.all(x, true)", 2359295, 5, 17),
    ("index of duration array", array_of("duration"), "self[0].getHours() == 2", 4, 525, 4),
    ("date array with all", array_of("date"), "self.all(x, true)", 725936, 15, 47),
    ("index of date array", array_of("date"), "self[2].getDayOfMonth() == 13", 4, 42, 4),
    ("date-time array with all", array_of("date-time"), "self.all(x, true)", 428963, 25, 77),
    ("index of date-time array", array_of("date-time"), "self[2].getMinutes() == 45", 4, 99, 4),
    ("map of int-or-strings with all", map_of("int-or-string"), "self.all(x, true)",
     1348169, 15, 47),
    ("map of number maps with all", lambda b: mapping(mapping(scalar("number"), b), b),
     "self.all(x, true)", 1179647, 10, 32),
    ("map of number arrays with all", lambda b: mapping(array(scalar("number"), b), b),
     "self.all(x, true)", 1179647, 25, 77),
    ("map of durations with all", map_of("duration"), "self.all(x, true)", 1048577, 5, 17),
    ("map of dates with all", map_of("date"), "self.all(x, true)", 524288, 10, 32),
    ("map of date-times with all", map_of("date-time"), "self.all(x, true)", 349526, 25, 77),
    ("extended library regex find", strings(), "self.find('[0-9]+') == ''", 629147, 10, 11),
    ("extended library join", lambda b: array(string(b), b), "self.join(' ') == 'aa bb'",
     329853068905, 10, 43),
    ("extended library isSorted", lambda b: array(string(b), b), "self.isSorted() == true",
     329854432052, 10, 52),
    ("extended library replace",
     lambda b: {"type": "object", "properties": {"str": string(b), "before": string(2),
                                                 "after": string(4)}},
     "self.str.replace(self.before, self.after) == 'does not matter'", 629154, 4, 12),
    ("extended library split",
     lambda b: {"type": "object", "properties": {"str": string(b), "separator": string(b)}},
     "self.str.split(self.separator) == []", 629160, 10, 22),
    ("extended library lowerAscii", strings(), "self.lowerAscii() == 'lower!'", 314575, 10, 6),
    ("check cost of size call", map_of("integer"), "oldSelf.size() == self.size()", 5, 10, 5),
    ("check cost of timestamp comparison", map_of("date-time"), 'self["a"] == self["b"]',
     8, 7, 8),
    ("check cost of duration comparison", map_of("duration"), 'self["c"] == self["d"]',
     8, 42, 8),
    ("enums with maxLength equals to the longest possible value",
     lambda b: string(b) | {"enum": ["A", "B", "C", "LongValue"]}, "self.contains('A')",
     2, 1000, 401),
]


@pytest.mark.parametrize(
    ("generator", "rule", "unbounded_cost", "bound", "bounded_cost"),
    [case[1:] for case in KUBERNETES_COST_TABLE],
    ids=[case[0] for case in KUBERNETES_COST_TABLE],
)
def test_estimates_equal_the_api_servers(
    generator: Generator, rule: str, unbounded_cost: int | None, bound: int, bounded_cost: int
) -> None:
    unbounded = estimate_cost(rule, generator(None), server=DEFAULT).max
    if unbounded_cost is None:
        assert unbounded > PER_CRD_LIMIT
    else:
        assert unbounded == unbounded_cost
    assert estimate_cost(rule, generator(bound), server=DEFAULT).max == bounded_cost


# --- budgets and messages -----------------------------------------------------------------------

ALL_MATCH = "self.all(x, x.matches('^[a-z]+(-[a-z]+)*$'))"


def test_matching_every_string_of_an_unbounded_list_blows_the_budget() -> None:
    estimate = estimate_cost(ALL_MATCH, array(string(None), None), server=DEFAULT)
    assert estimate.max > 100 * PER_RULE_LIMIT
    message = budget_violation(estimate, PER_RULE_LIMIT)
    assert message is not None
    assert message.startswith(
        "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the "
        "rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and "
        "strings are declared)"
    )
    assert "maxItems to self" in message
    assert "maxLength to self[*]" in message


def test_bounding_the_list_and_its_strings_brings_the_rule_under_budget() -> None:
    estimate = estimate_cost(ALL_MATCH, array(string(63), 100), server=DEFAULT)
    # 100 items × (condition 2 + step: @result 1 + x 1 + regex ceil((4×63+1)×0.1)=26 × ceil(18×0.25)=5)
    assert estimate.max == 1 + 100 * (2 + 1 + 1 + 26 * 5) + 1
    assert budget_violation(estimate, PER_RULE_LIMIT) is None
    assert estimate.unbounded == ()


def test_bounding_only_the_list_names_the_strings_as_the_bound_to_add() -> None:
    estimate = estimate_cost(ALL_MATCH, array(string(None), 10), server=DEFAULT)
    # 10 items × (2 + 1 + 1 + ceil((3,145,726+1)×0.1)=314,573 × 5) + 2 = 15,728,692
    assert estimate.max == 15_728_692
    message = budget_violation(estimate, PER_RULE_LIMIT)
    assert message is not None
    assert "by factor of 1.6x" in message
    assert message.endswith("unbounded here: add maxLength to self[*]")


def test_factors_close_to_the_limit_are_printed_precisely() -> None:
    over = CostEstimate(min=0, max=12_000_000)
    assert budget_violation(over, PER_RULE_LIMIT) == (
        "estimated rule cost exceeds budget by factor of 1.200000x (try simplifying the rule, "
        "or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings "
        "are declared)"
    )


def test_the_crd_total_budget_uses_the_total_wording() -> None:
    total = CostEstimate(min=0, max=250_000_000)
    message = budget_violation(total, PER_CRD_LIMIT)
    assert message is not None
    assert message.startswith("estimated rule cost total exceeds budget by factor of 2.5x")


def test_a_rule_run_once_per_list_item_is_scaled_by_the_cardinality() -> None:
    estimate = estimate_cost("self.startsWith('a')", string(None), server=DEFAULT)
    assert estimate.times(1000).max == 1000 * estimate.max


CHEAP_RULES = [
    ("presence test", "!has(self.handback) || self.handback.drainedPath.startsWith('status.')"),
    ("field comparison", "self.minReplicas <= self.maxReplicas"),
    ("bounded path pattern", "self.path.matches('^spec(\\\\.[a-z][a-zA-Z0-9]*){1,7}$')"),
    ("transition rule on an integer", "self.maxReplicas >= oldSelf.maxReplicas"),
]

SPEC_SCHEMA: Schema = {
    "type": "object",
    "properties": {
        "minReplicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "path": {"type": "string", "maxLength": 256},
        "handback": {
            "type": "object",
            "properties": {"drainedPath": {"type": "string", "maxLength": 256}},
        },
    },
}


@pytest.mark.parametrize(
    "rule", [case[1] for case in CHEAP_RULES], ids=[case[0] for case in CHEAP_RULES]
)
def test_ordinary_rules_are_far_under_budget(rule: str) -> None:
    estimate = estimate_cost(rule, SPEC_SCHEMA, server=DEFAULT)
    assert estimate.max < PER_RULE_LIMIT // 1000
    assert budget_violation(estimate) is None


def test_presence_tests_are_free_and_field_selection_costs_one() -> None:
    assert estimate_cost("has(self.minReplicas)", SPEC_SCHEMA, server=DEFAULT).max == 1
    assert estimate_cost("self.minReplicas == 1", SPEC_SCHEMA, server=DEFAULT).max == 2


def test_rules_that_do_not_compile_raise_compile_errors() -> None:
    with pytest.raises(CelCompileError):
        estimate_cost("self.metadata.name.", {"type": "object"}, root_is_object=True, server=DEFAULT)


def test_resource_roots_declare_metadata_name_unbounded() -> None:
    rule = "self.metadata.name.startsWith('fivespot-')"
    root = estimate_cost("self.metadata.name.contains('x')", {"type": "object"},
                         root_is_object=True, server=DEFAULT)
    assert root.max == 1 + 1 + 1 + 314573
    assert estimate_cost(rule, {"type": "object"}, root_is_object=True, server=DEFAULT).max == 4


def test_list_literals_and_map_literals_have_creation_costs() -> None:
    assert estimate_cost("[1, 2].size() == 2", {"type": "object"}, server=DEFAULT).max == 10 + 1 + 1
    assert estimate_cost("{'a': 1}.size() == 1", {"type": "object"}, server=DEFAULT).max == 30 + 1 + 1


def test_costs_saturate_at_uint64_max() -> None:
    rule = "self.all(a, self.all(b, self.all(c, self.all(d, a.matches(b)))))"
    assert estimate_cost(rule, array(string(None), None), server=DEFAULT).max == 2**64 - 1
