"""The offline checker's fast paths decide exactly what the plain paths decide.

Projections (the activation holds only what a program can select), the batch of all-validations
programs, the match table, and the schema's one-call leaf checks are all shortcuts: each test here
compares a shortcut with the long way on inputs chosen to hit its edges (absent keys, non-map
values, `has()`, whole-value uses, comprehension variables, errors, partial failures, UPDATE).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from msgspec.structs import force_setattr

from fivespot.policies.admission_eval import Checker, PolicySet, Request, review
from fivespot.policies.admission_eval import projection
from fivespot.policies.admission_eval.crd import compile_schema, with_root_fields
from fivespot.policies.admission_eval.structural import FieldError
from fivespot.policies.admission_eval.validation import validate
from fivespot.policies.cel import ABSENT, ADMISSION_VARIABLES, CelEvaluationError, compile_expression
from fivespot.policies.kubeversions import DEFAULT

GROUP = "example.com"

EXPRESSIONS = [
    "object.spec.a == 1",
    "has(object.spec.b) && object.spec.b.c > 0",
    "has(object.spec.b)",
    "object.spec.b.c + object.spec.a",
    "size(object.spec) > 1",
    "object.spec['a'] == 1",
    "object.spec.?b.c.orValue(0) == 0",
    "object.spec.list.all(x, x.v > 0)",
    "[1, 2].exists(object, object > 1) && object.spec.a == 1",
    "object.spec == oldObject.spec",
    "object.metadata.name.startsWith('w') && request.namespace == 'team'",
    "params.spec.max >= object.spec.a",
]

OBJECTS = [
    {"metadata": {"name": "w", "labels": {"x": "y"}}, "spec": {"a": 1, "b": {"c": 2, "d": 3}, "list": [{"v": 1}]}},
    {"metadata": {"name": "w"}, "spec": {"a": 2}},
    {"metadata": {"name": "v"}, "spec": {"a": 1, "b": "not a map", "list": []}},
    {"metadata": {"name": "w"}, "spec": "not a map"},
    {"metadata": {"name": "w"}, "spec": {"a": 1, "b": {}, "list": [{"v": 0}, {"w": 1}]}},
    {"metadata": {"name": "w"}},
]


def outcome(expression: str, data: dict[str, Any]) -> tuple[str, object]:
    try:
        return ("value", compile_expression(expression, ADMISSION_VARIABLES).evaluate(data))
    except CelEvaluationError as error:
        return ("error", error.message)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_projection_gives_every_program_the_same_value_and_error(expression: str) -> None:
    program = compile_expression(expression, ADMISSION_VARIABLES)
    reads = projection.reads(program.tree.root, ADMISSION_VARIABLES)
    params = {"spec": {"max": 1, "other": [1, 2, 3]}, "metadata": {"name": "p"}}
    for obj, old in itertools.product(OBJECTS, [None, OBJECTS[0]]):
        full = {"object": obj, "oldObject": old, "request": {"namespace": "team", "name": "w"},
                "params": params, "namespaceObject": None, "authorizer": None, "variables": {}}
        cut = {name: projection.project(value, reads[name]) if name in reads else value
               for name, value in full.items()}
        assert outcome(expression, cut) == outcome(expression, full), (expression, obj)


def test_reads_keeps_whole_values_a_program_uses_whole() -> None:
    program = compile_expression(
        "has(object.spec.x) && object.spec.y.z == 1 && size(object.status) > 0 && "
        "[0].all(object, object == 0) && params.data['k'] == 'v'", ADMISSION_VARIABLES)
    reads = projection.reads(program.tree.root, ADMISSION_VARIABLES)
    assert reads["params"] == {"data": None}  # indexed below `data`: `data` kept whole
    # The comprehension variable named `object` makes the projection larger, never smaller.
    assert reads["object"] is None


def test_project_keeps_absent_keys_absent_and_non_maps_whole() -> None:
    paths: projection.Paths = {"spec": {"a": None, "b": {"c": None}}}
    assert projection.project({"spec": {"b": 5, "z": 1}, "x": 2}, paths) == {"spec": {"b": 5}}
    assert projection.project({"spec": [1]}, paths) == {"spec": [1]}
    assert projection.project("text", paths) == "text"


# --- the batch, the match table and the per-validation path agree ------------------------------


def vap(name: str, validations: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "validations": validations, "matchConstraints": {
                "resourceRules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
                                   "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]},
                     **spec}}


def vap_binding(name: str, policy: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": policy, "validationActions": ["Deny"], **spec}}


CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap"}
POLICIES = [
    vap("a-limit", [{"expression": "object.spec.n <= int(params.data.max)",
                     "messageExpression": "'n ' + string(object.spec.n) + ' over ' + params.data.max"}],
        paramKind=CONFIG_MAP),
    vap("b-kind", [{"expression": "object.spec.kind in variables.kinds"}],
        variables=[{"name": "kinds", "expression": "['A', 'B']"}]),
    vap("c-names", [{"expression": "request.namespace in ['team', 'other']"},
                    {"expression": "!has(object.spec.node) || object.spec.node.startsWith('gpu')",
                     "message": "gpu nodes only"}]),
    vap("d-errors", [{"expression": "object.spec.n > 0 || object.spec.missing"}]),
    vap_binding("a-team", "a-limit", paramRef={"name": "team-limits", "namespace": "team",
                                               "parameterNotFoundAction": "Deny"},
                matchResources={"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}}),
    vap_binding("a-other", "a-limit", paramRef={"name": "other-limits", "namespace": "other",
                                                "parameterNotFoundAction": "Deny"},
                matchResources={"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}}),
    vap_binding("b", "b-kind"),
    vap_binding("c", "c-names"),
    vap_binding("d", "d-errors"),
]
PARAMS = [
    {**CONFIG_MAP, "metadata": {"name": "team-limits", "namespace": "team"}, "data": {"max": "3"}},
    {**CONFIG_MAP, "metadata": {"name": "other-limits", "namespace": "other"}, "data": {"max": "5"}},
]


def admission(spec: dict[str, Any], namespace: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    def obj(body: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                "metadata": {"name": "w", "namespace": namespace}, "spec": body}
    return {"operation": "UPDATE" if old else "CREATE", "namespace": namespace, "name": "w",
            "kind": {"group": GROUP, "version": "v1", "kind": "Widget"},
            "resource": {"group": GROUP, "version": "v1", "resource": "widgets"},
            "object": obj(spec), "oldObject": obj(old) if old else None,
            "userInfo": {"username": "u", "groups": []}}


SPECS = [{"n": n, "kind": kind, **node} for n, kind, node in itertools.product(
    [-1, 0, 3, 4, 5, 6], ["A", "C"], [{}, {"node": "gpu-1"}, {"node": "cpu-1"}])]


def test_the_fast_policy_set_decides_every_request_as_the_plain_one() -> None:
    fast = PolicySet.compile(POLICIES, PARAMS)
    plain = PolicySet.compile(POLICIES, PARAMS)
    # The plain set: no match table (so no batch), no projections.
    force_setattr(plain, "_static", False)
    force_setattr(plain, "_shortcut_reads", None)
    for policy in plain.policies.values():
        force_setattr(policy, "reads", None)
    decided = 0
    for spec, namespace in itertools.product(SPECS, ["team", "other", "elsewhere"]):
        for old in (None, {"n": 1, "kind": "A"}):
            request = admission(spec, namespace, old)
            for _ in range(2):  # the second time from the memoised tables
                assert review(fast, request) == review(plain, request), (spec, namespace, old)
            decided += 1
    assert fast._batches and any(b is not None for b in fast._batches.values())
    assert decided == len(SPECS) * 3 * 2


def test_a_batch_remembers_each_projection_by_its_exact_value() -> None:
    typed = [vap("t-int", [{"expression": "type(object.spec.n) == int"}]),
             vap("t-kind", [{"expression": "object.spec.kind in ['A']"}]),
             vap_binding("t-int", "t-int"), vap_binding("t-kind", "t-kind")]
    fast = PolicySet.compile(typed)
    plain = PolicySet.compile(typed)
    force_setattr(plain, "_static", False)
    values: list[Any] = [1, 1.0, "1", True, None, [1], {"n": 1}, 1]
    verdicts = []
    for value in values:
        request = admission({"n": value, "kind": "A"}, "team")
        verdicts.append(review(fast, request))
        assert verdicts[-1] == review(plain, request), value
    assert [v.allowed for v in verdicts] == [True, False, False, False, False, False, False, True]
    (batch,) = [b for b in fast._batches.values() if b is not None]
    assert len(batch.seen) == len(values) - 1  # the last 1 was looked up


# --- schema leaf fast paths --------------------------------------------------------------------


LEAVES = {
    "s": {"type": "string", "maxLength": 4, "minLength": 2, "pattern": "^[a-z]+$"},
    "i": {"type": "integer", "minimum": 0, "maximum": 10, "exclusiveMaximum": True},
    "d": {"type": "string", "format": "date"},
    "n": {"type": "string", "nullable": True, "pattern": "^x"},
}
VALUES = ["ab", "abcde", "a", "AB", "abc\n", "", None, 3, 10, 0, -1, 2.0, True, "2024-02-30",
          "2024-02-29", "x1", "\ud800", [1], {"k": 1}]


def test_leaf_fast_paths_report_exactly_what_the_full_checks_report() -> None:
    node = compile_schema(with_root_fields({"type": "object", "properties": {
        "spec": {"type": "object", "properties": LEAVES}}}), server=DEFAULT)
    spec = node.properties["spec"] if node.properties else None
    assert spec is not None and spec.properties is not None
    for key, value, old in itertools.product(LEAVES, VALUES, [ABSENT, "ab", 3]):
        if key == "d" and value == "\ud800":
            continue  # formats.py's date check cannot encode a lone surrogate (either path)
        leaf = spec.properties[key]
        fast: list[FieldError] = []
        assert leaf.check is not None
        leaf.check(value, old, f"spec.{key}", fast)
        full: list[FieldError] = []
        validate(value, old, leaf, f"spec.{key}", full)
        assert fast == full
        # Through the object as well, so the parent passes the same path and old value.
        whole: list[FieldError] = []
        validate({"spec": {key: value}}, ABSENT, node, "", whole)
        assert [e for e in whole if e.path.startswith("spec.")] == [
            FieldError(e.path, e.type, e.detail) for e in whole if e.path.startswith("spec.")]


def test_pattern_rules_proven_by_the_schema_still_deny_when_the_schema_denies() -> None:
    schema = with_root_fields({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "p": {"type": "string", "pattern": "^a+$",
              "x-kubernetes-validations": [{"rule": "self.matches('^a+$')", "message": "only a"}]}}}}})
    checker = Checker.compile([{
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}]}}], server=DEFAULT)

    def check(value: str, old: str | None = None) -> list[tuple[str, str | None, str]]:
        def widget(p: str) -> dict[str, Any]:
            return {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                    "metadata": {"name": "w", "namespace": "team"}, "spec": {"p": p}}
        verdict = checker.check(Request("UPDATE" if old else "CREATE", widget(value),
                                        widget(old) if old else None))
        return [(v.source, v.field, v.message) for v in verdict.violations]

    assert check("aaa") == []
    assert check("aaa", old="b") == []
    denied = check("ab")
    assert ("crd-rule", "spec.p", 'Invalid value: "ab": only a') in denied
    assert any(v[0] == "schema" for v in denied)
    assert check("ab", old="ab") == []  # unchanged: ratcheted
    assert copy.deepcopy(denied) == check("ab", old="b")
