"""The CEL engine compiles, evaluates and converts values the way the rest of fivespot relies on.

Timing (not asserted; 2-core dev machine, Python 3.11, cel-expr-python 0.1.3, compiled once):
  `self.path.matches(CAPACITY_PATH_PATTERN) && size(self.path) <= 256`       ~45 µs/eval
  `!has(self.handback) || self.handback.drainedPath.startsWith('status.')`  ~8 µs/eval
    (raw cel-expr-python eval 4.9 µs; result type check + conversion add ~3.5 µs)
  `self.items.all(x, x.value >= 0 && x.value < 1000)` over 100 items       ~88 µs/eval
  compile of a small rule (uncached)                                        ~350 µs
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fivespot.api.fieldpath import CAPACITY_PATH_PATTERN, capacity_path_error
from fivespot.policies.cel import (
    CRD_VARIABLES,
    CelCompileError,
    CelEvaluationError,
    compile_expression,
)

SELF = ["self"]

# --- evaluation table -----------------------------------------------------------------------------

ARITHMETIC = "self.a * 2 + 1"
STRING_CONCAT = "self.name + '-' + string(self.n)"
NESTED_SELECT = "self.spec.capacity.activeValue"
LIST_COMPREHENSION = "self.items.map(i, i.v).filter(v, v > 1)"
MAP_LITERAL = "{'k': self.a}"
BYTES_RESULT = "b'ab' + bytes(self.name)"
TIMESTAMP_ARITHMETIC = "timestamp(self.t) + duration('90m')"
NULL_FIELD = "self.n == null"
OPTIONAL_SELECT = "self.?missing.orValue('fallback')"
STRINGS_EXTENSION = "self.name.upperAscii().replace('E', '3')"
MATH_EXTENSION = "math.greatest(self.a, 7)"
ENCODERS_EXTENSION = "base64.encode(bytes(self.name))"
BINDINGS_EXTENSION = "cel.bind(x, self.a * 10, x + x)"
LISTS_EXTENSION = "[3, 1, 2].sort()"
SETS_EXTENSION = "sets.contains(self.tags, ['b'])"
TWO_VARIABLE_COMPREHENSION = "self.tags.all(i, t, i < 2 || t == 'c')"

EVALUATIONS = [
    ("integer arithmetic", ARITHMETIC, {"a": 20}, 41),
    ("string concatenation", STRING_CONCAT, {"name": "pool", "n": 3}, "pool-3"),
    ("nested field selection", NESTED_SELECT, {"spec": {"capacity": {"activeValue": 5}}}, 5),
    ("map then filter", LIST_COMPREHENSION, {"items": [{"v": 1}, {"v": 2}, {"v": 3}]}, [2, 3]),
    ("map literal result", MAP_LITERAL, {"a": 1}, {"k": 1}),
    ("bytes result as bytes", BYTES_RESULT, {"name": "c"}, b"abc"),
    (
        "timestamps come back as aware datetimes",
        TIMESTAMP_ARITHMETIC,
        {"t": "2024-01-01T00:00:00Z"},
        datetime(2024, 1, 1, 1, 30, tzinfo=timezone.utc),
    ),
    ("null input compares to null", NULL_FIELD, {"n": None}, True),
    ("optional field select", OPTIONAL_SELECT, {}, "fallback"),
    ("strings extension", STRINGS_EXTENSION, {"name": "fee"}, "F33"),
    ("math extension", MATH_EXTENSION, {"a": 3}, 7),
    ("encoders extension", ENCODERS_EXTENSION, {"name": "a"}, "YQ=="),
    ("bindings extension", BINDINGS_EXTENSION, {"a": 2}, 40),
    ("lists extension", LISTS_EXTENSION, {}, [1, 2, 3]),
    ("sets extension", SETS_EXTENSION, {"tags": ["a", "b", "c"]}, True),
    ("two-variable comprehension", TWO_VARIABLE_COMPREHENSION, {"tags": ["a", "b", "c"]}, True),
]


@pytest.mark.parametrize(
    ("expression", "self_value", "expected"),
    [case[1:] for case in EVALUATIONS],
    ids=[case[0] for case in EVALUATIONS],
)
def test_expressions_evaluate_to_plain_python(
    expression: str, self_value: object, expected: object
) -> None:
    assert compile_expression(expression, SELF).evaluate({"self": self_value}) == expected


def test_durations_come_back_as_timedeltas() -> None:
    assert compile_expression("duration('1h30m')", SELF).evaluate({}) == timedelta(minutes=90)


def test_integers_beyond_int64_are_read_as_floats_like_unstructured_json() -> None:
    program = compile_expression("self.big > 1.0e19 && self.small == 1", SELF)
    assert program.evaluate({"self": {"big": 2**64, "small": 1}}) is True


def test_integers_beyond_int64_in_nested_lists_are_read_as_floats() -> None:
    program = compile_expression("self.items[1] * 2.0", SELF)
    assert program.evaluate({"self": {"items": [1, -(2**70)]}}) == -(2.0**71)


# --- compile errors ------------------------------------------------------------------------------

SYNTAX_ERROR = "self.a +"
UNDECLARED_VARIABLE = "object.metadata.name == 'x'"
WRONG_ARGUMENT_TYPE = "size(1)"
EQUALITY_ACROSS_NUMERIC_TYPES = "1 == 1.0"

COMPILE_ERRORS = [
    ("syntax errors are reported with a caret", SYNTAX_ERROR, "Syntax error"),
    ("undeclared variables are rejected", UNDECLARED_VARIABLE, "undeclared reference to 'object"),
    ("overloads are checked", WRONG_ARGUMENT_TYPE, "found no matching overload for 'size'"),
    (
        "mixed numeric equality stays an error as in cel-go",
        EQUALITY_ACROSS_NUMERIC_TYPES,
        "found no matching overload for '_==_'",
    ),
]


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [case[1:] for case in COMPILE_ERRORS],
    ids=[case[0] for case in COMPILE_ERRORS],
)
def test_invalid_expressions_raise_compile_errors(expression: str, fragment: str) -> None:
    with pytest.raises(CelCompileError) as caught:
        compile_expression(expression, CRD_VARIABLES)
    assert fragment in caught.value.message
    assert caught.value.expression == expression
    assert caught.value.message.startswith("ERROR: <input>:1:")
    assert "[INVALID_ARGUMENT]" not in caught.value.message


def test_admission_variables_are_declared_for_policies() -> None:
    program = compile_expression(
        "object.spec.replicas <= params.max && request.operation == 'CREATE'",
        ["object", "oldObject", "request", "params", "namespaceObject", "variables"],
    )
    activation = {
        "object": {"spec": {"replicas": 2}},
        "params": {"max": 3},
        "request": {"operation": "CREATE"},
    }
    assert program.evaluate(activation) is True


def test_a_variable_missing_from_the_activation_is_an_evaluation_error() -> None:
    program = compile_expression("oldSelf.a == 1", CRD_VARIABLES)
    with pytest.raises(CelEvaluationError, match=r"no such attribute\(s\): oldSelf"):
        program.evaluate({"self": {}})


# --- programs are cached and thread-safe ---------------------------------------------------------


def test_programs_are_cached_by_expression_and_variables() -> None:
    first = compile_expression("self.a == 1", ["self"])
    assert compile_expression("self.a == 1", ("self",)) is first
    assert compile_expression("self.a == 1", ["self", "oldSelf"]) is not first


def test_one_program_evaluates_correctly_from_many_threads() -> None:
    program = compile_expression("self.items.all(x, x < self.limit)", SELF)
    failures: list[str] = []

    def worker(offset: int) -> None:
        for i in range(200):
            limit = offset + i
            verdict = program.evaluate({"self": {"items": [offset, limit - 1], "limit": limit}})
            if verdict is not (limit > offset):
                failures.append(f"{offset}/{i}: {verdict}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


# --- the field-path rule, as a CRD CEL rule ------------------------------------------------------

FIELD_PATH_RULE = "self.matches('" + CAPACITY_PATH_PATTERN.replace("\\", "\\\\") + "')"

ACCEPTED_PATHS = ["spec.warmReplicas", "spec.a", "spec.pool.size", "spec.a.b.c.d.e.f.g"]
REJECTED_PATHS = [
    "spec",
    "metadata.labels",
    "status.inUse",
    "spec.a.b.c.d.e.f.g.h",
    "spec..replicas",
    "spec.replicas[0]",
    "spec.*",
    "spec/replicas",
    "spec.Replicas",
    "spec.warm_replicas",
    "spec.replicas.",
    "spec.replicas\n",
    "spec.rеplicas",  # Cyrillic e
    "",
]


@pytest.mark.parametrize("path", ACCEPTED_PATHS)
def test_field_path_rule_accepts_camel_case_paths_under_spec(path: str) -> None:
    assert compile_expression(FIELD_PATH_RULE, SELF).evaluate({"self": path}) is True


@pytest.mark.parametrize("path", REJECTED_PATHS)
def test_field_path_rule_rejects_paths_outside_the_allowlist(path: str) -> None:
    assert compile_expression(FIELD_PATH_RULE, SELF).evaluate({"self": path}) is False


_PATH_CHARS = st.sampled_from(list("spectaus.Rr9_-[]*/'\"\n.") + ["е", "ß"])
_PATHS = st.one_of(
    st.text(_PATH_CHARS, max_size=40),
    st.lists(st.from_regex(r"[a-zA-Z][a-zA-Z0-9]{0,5}", fullmatch=True), max_size=9).map(
        lambda segments: ".".join(["spec", *segments])
    ),
)


@settings(max_examples=300, deadline=None)
@given(_PATHS)
def test_field_path_rule_in_cel_agrees_with_the_reconciler_check(path: str) -> None:
    in_cel = compile_expression(FIELD_PATH_RULE, SELF).evaluate({"self": path})
    assert in_cel is (capacity_path_error(path) is None)
