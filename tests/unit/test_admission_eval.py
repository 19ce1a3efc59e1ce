"""The offline admission evaluator: schema, CRD rules (typed self, transitions, ratcheting) and
ValidatingAdmissionPolicies (matching, params, variables, actions, failure policy)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fivespot.policies.admission_eval import (
    Checker,
    NamespaceRequired,
    PolicySet,
    Request,
    SchemaError,
    review,
)
from fivespot.policies.admission_eval.crd import compile_schema, with_root_fields
from fivespot.policies.admission_eval.pruning import prune_and_default
from fivespot.policies.admission_eval.regex import _MEMO_TEXT, Pattern
from fivespot.policies.kubeversions import DEFAULT
from fivespot.policies.memo import LIMIT as _MEMO_ENTRIES

import re2

GROUP = "example.com"


def crd(schema: dict[str, Any], *, status: bool = False, scope: str = "Namespaced") -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{GROUP}"},
            "spec": {"group": GROUP, "scope": scope, "versions": [version],
                     "names": {"kind": "Widget", "plural": "widgets"}}}


def widget(spec: Any, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "team", **meta}, "spec": spec}


def spec_schema(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": properties,
                                                      **extra}}}


def decide(schema: dict[str, Any], spec: Any, old_spec: Any = None, **kw: Any) -> Any:
    checker = Checker.compile([crd(schema, **kw)], server=DEFAULT)
    old = widget(old_spec) if old_spec is not None else None
    return checker.check(Request("UPDATE" if old else "CREATE", widget(spec), old))


def fields(verdict: Any) -> list[tuple[str, str | None]]:
    return sorted(((v.source, v.field) for v in verdict.violations), key=lambda f: (f[0], f[1] or ""))


SCHEMA_CASES = [
    ("an integer within bounds is allowed", {"n": {"type": "integer", "minimum": 0, "maximum": 3}}, {"n": 3}, []),
    ("an integer above maximum is denied", {"n": {"type": "integer", "maximum": 3}}, {"n": 4}, [("schema", "spec.n")]),
    ("an exclusive minimum excludes the bound", {"n": {"type": "number", "minimum": 1, "exclusiveMinimum": True}}, {"n": 1}, [("schema", "spec.n")]),
    ("an integral float is an integer", {"n": {"type": "integer"}}, {"n": 2.0}, []),
    ("a boolean is not an integer", {"n": {"type": "integer"}}, {"n": True}, [("schema", "spec.n"), ]),
    ("maxLength counts characters not bytes", {"s": {"type": "string", "maxLength": 2}}, {"s": "éé"}, []),
    ("minLength counts characters", {"s": {"type": "string", "minLength": 3}}, {"s": "éé"}, [("schema", "spec.s")]),
    ("a pattern is RE2: $ does not match before a trailing newline", {"s": {"type": "string", "pattern": "^a$"}}, {"s": "a\n"}, [("schema", "spec.s")]),
    ("an enum value outside the list is denied", {"s": {"type": "string", "enum": ["a", "b"]}}, {"s": "c"}, [("schema", "spec.s")]),
    ("too many items are denied", {"l": {"type": "array", "maxItems": 1, "items": {"type": "string"}}}, {"l": ["a", "b"]}, [("schema", "spec.l")]),
    ("too few items are denied", {"l": {"type": "array", "minItems": 2, "items": {"type": "string"}}}, {"l": ["a"]}, [("schema", "spec.l")]),
    ("a duplicate in a set list is denied", {"l": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}, {"l": ["a", "a"]}, [("schema", "spec.l[1]")]),
    ("a duplicate key in a map list is denied", {"l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}, {"l": [{"k": "a"}, {"k": "a"}]}, [("schema", "spec.l[1]")]),
    ("an invalid date is denied by its format", {"d": {"type": "string", "format": "date"}}, {"d": "2024-02-30"}, [("schema", "spec.d")]),
    ("a valid date-time passes its format", {"d": {"type": "string", "format": "date-time"}}, {"d": "2024-02-29T10:00:00Z"}, []),
    ("a null in a non-nullable field is dropped", {"s": {"type": "string"}}, {"s": None}, []),
    ("a null in a nullable field is kept", {"s": {"type": "string", "nullable": True}}, {"s": None}, []),
]


@pytest.mark.parametrize(("name", "properties", "spec", "expected"), SCHEMA_CASES,
                         ids=[c[0] for c in SCHEMA_CASES])
def test_structural_schema(name: str, properties: dict[str, Any], spec: Any,
                           expected: list[tuple[str, str]]) -> None:
    verdict = decide(spec_schema(properties), spec)
    assert [f for f in fields(verdict) if f[1] is not None] == expected
    assert verdict.allowed == (not expected)


def test_required_field_is_denied_and_stops_the_rules_like_the_api_server() -> None:
    schema = spec_schema({"s": {"type": "string"}}, required=["s"],
                         **{"x-kubernetes-validations": [{"rule": "self.s != ''"}]})
    verdict = decide(schema, {})
    assert fields(verdict) == [("schema", None), ("schema", "spec.s")]
    assert "some validation rules were not checked" in verdict.violations[-1].message


def test_unknown_fields_are_pruned_with_a_warning_and_defaults_applied() -> None:
    node = compile_schema(with_root_fields(spec_schema({"on": {"type": "boolean", "default": True},
                                       "free": {"type": "object",
                                                "x-kubernetes-preserve-unknown-fields": True}})), server=DEFAULT)
    warnings: list[str] = []
    out = prune_and_default(widget({"x": 1, "free": {"y": 2}}, extra="z"), node, warnings)
    assert out["spec"] == {"free": {"y": 2}, "on": True}
    assert sorted(warnings) == ['unknown field "metadata.extra"', 'unknown field "spec.x"']


@pytest.mark.parametrize(("value", "unknown"), [
    ({"flag": {"on": True}}, ["spec.flag.on"]),  # an object at a boolean
    ({"box": [{"a": 1, "b": 2}]}, ["spec.box[0].a", "spec.box[0].b"]),  # a list at an object
    ({"names": {"x": "y"}}, ["spec.names.x"]),  # an object at a list
    ({"names": [{"x": "y"}]}, ["spec.names[0].x"]),  # an object in a list of strings
    ({"box": {"a": [[{"deep": 1}]]}}, ["spec.box.a[0][0].deep"]),  # deeper, inside a known field
    ({"free": [{"kept": 1}], "flag": True}, []),  # preserved fields keep anything
])
def test_a_value_of_another_shape_is_pruned_as_the_api_server_walks_it(
        value: dict[str, Any], unknown: list[str]) -> None:
    """apiextensions' pruning walks the value, not the schema's type: a key the node does not
    declare is unknown whatever the node's type (the test_checker_fidelity corpus has the API
    server's answers to these shapes)."""
    node = compile_schema(with_root_fields(spec_schema({
        "flag": {"type": "boolean"}, "box": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "names": {"type": "array", "items": {"type": "string"}},
        "free": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    })), server=DEFAULT)
    warnings: list[str] = []
    prune_and_default(widget(value), node, warnings)
    assert warnings == [f'unknown field "{field}"' for field in unknown]


def test_a_string_with_a_format_names_the_format_and_lets_a_list_through() -> None:
    """kube-openapi's type validator (validate/type.go) on a string field with a format."""
    schema = spec_schema({"at": {"type": "string", "format": "date-time"}})
    for value, message in ((5, 'Invalid value: "int64": spec.at in body must be of type date-time: "int64"'),
                           (2.5, 'Invalid value: "float64": spec.at in body must be of type date-time: "float64"'),
                           (True, 'Invalid value: "": spec.at in body must be of type date-time: ""')):
        verdict = decide(schema, {"at": value})
        assert [v.message for v in verdict.violations if v.field == "spec.at"] == [message]
    assert decide(schema, {"at": ["not", "a", "date"]}).allowed


RULE_CASES = [
    ("a failing rule denies with its message", {"rule": "self.n < 3", "message": "n too big"}, {"n": 5}, None, "n too big"),
    ("messageExpression wins over message", {"rule": "self.n < 3", "message": "m", "messageExpression": "'n is ' + string(self.n)"}, {"n": 5}, None, "n is 5"),
    ("no message falls back to the rule", {"rule": "self.n < 3"}, {"n": 5}, None, "failed rule: self.n < 3"),
    ("reason Forbidden reads as Forbidden", {"rule": "self.n < 3", "reason": "FieldValueForbidden", "message": "no"}, {"n": 5}, None, "Forbidden: no"),
    ("fieldPath moves the error to the field", {"rule": "self.n < 3", "fieldPath": ".n", "message": "no"}, {"n": 5}, None, "no"),
    ("a transition rule is skipped on create", {"rule": "self.n >= oldSelf.n", "message": "no"}, {"n": 1}, None, None),
    ("a transition rule runs on update", {"rule": "self.n >= oldSelf.n", "message": "shrank"}, {"n": 1}, {"n": 2}, "shrank"),
    ("optionalOldSelf runs the rule on create", {"rule": "!oldSelf.hasValue() && self.n == 1 || oldSelf.hasValue()", "optionalOldSelf": True, "message": "no"}, {"n": 2}, None, "no"),
    ("an unchanged invalid value is ratcheted", {"rule": "self.n < 3", "message": "no"}, {"n": 5}, {"n": 5}, None),
    ("a rule erroring on a missing key denies", {"rule": "self.missing == 1", "message": "m"}, {"n": 5}, None, "no such key"),
]


@pytest.mark.parametrize(("name", "rule", "spec", "old", "message"), RULE_CASES,
                         ids=[c[0] for c in RULE_CASES])
def test_crd_rules(name: str, rule: dict[str, Any], spec: Any, old: Any, message: str | None) -> None:
    schema = spec_schema({"n": {"type": "integer"}, "missing": {"type": "integer"}},
                         **{"x-kubernetes-validations": [rule]})
    verdict = decide(schema, spec, old)
    if message is None:
        assert verdict.allowed, verdict
    else:
        assert not verdict.allowed
        assert message in verdict.violations[0].message
        assert verdict.violations[0].source == "crd-rule"
        assert verdict.violations[0].field == ("spec.n" if "fieldPath" in rule else "spec")


def test_date_and_duration_fields_reach_rules_as_timestamps_and_durations() -> None:
    schema = spec_schema({
        "day": {"type": "string", "format": "date"},
        "wait": {"type": "string", "format": "duration"},
        "days": {"type": "array", "items": {"type": "string", "format": "date"}},
    }, **{"x-kubernetes-validations": [
        {"rule": "self.day > timestamp('2024-01-01T00:00:00Z') && self.wait < duration('1h')"
                 " && self.days.all(d, d.getFullYear() == 2025)"},
        {"rule": "!has(self.unset)"}]})
    assert decide(schema, {"day": "2024-06-01", "wait": "30m", "days": ["2025-01-02"]}).allowed
    assert not decide(schema, {"day": "2023-06-01", "wait": "30m", "days": []}).allowed
    assert not decide(schema, {"day": "2024-06-01", "wait": "30m", "days": ["2024-01-02"]}).allowed


def test_status_is_dropped_on_create_and_kept_from_the_old_object_on_update() -> None:
    schema = spec_schema({"n": {"type": "integer"}})
    schema["properties"]["status"] = {"type": "object", "properties": {"phase": {"type": "string", "enum": ["A"]}}}
    assert decide(schema, {"n": 1}, status=True).allowed
    checker = Checker.compile([crd(schema, status=True)], server=DEFAULT)
    new = widget({"n": 1}) | {"status": {"phase": "Bogus"}}
    assert checker.check(Request("CREATE", new)).allowed
    assert checker.check(Request("UPDATE", new, widget({"n": 1}))).allowed


def test_a_rule_that_does_not_compile_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="x-kubernetes-validations rule"):
        Checker.compile([crd(spec_schema({}, **{"x-kubernetes-validations": [{"rule": "self.("}]}))],
                        server=DEFAULT)


@pytest.mark.parametrize("text", ["a", "spec.x", "spec..x", "é", "x\n", "", "spec.a.b.c.d.e.f.g.h"])
def test_the_fast_pattern_agrees_with_re2(text: str) -> None:
    for pattern in (r"^spec(\.[a-z][a-zA-Z0-9]*){1,7}$", r"é", r"^$", r"\d"):
        assert Pattern(pattern).search(text) == (re2.search(pattern, text) is not None)


# --- ValidatingAdmissionPolicy ----------------------------------------------------------------


def policy(validations: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "spec": {"failurePolicy": "Fail", "validations": validations, "matchConstraints": {
                "resourceRules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
                                   "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]},
                     **spec}}


def binding(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
            "spec": {"policyName": "p", "validationActions": ["Deny"], **spec}}


def request(spec: Any, namespace: str = "team", operation: str = "CREATE", labels: Any = None) -> dict[str, Any]:
    obj = widget(spec)
    obj["metadata"]["namespace"] = namespace
    if labels:
        obj["metadata"]["labels"] = labels
    return {"operation": operation, "namespace": namespace, "name": "w",
            "kind": {"group": GROUP, "version": "v1", "kind": "Widget"},
            "resource": {"group": GROUP, "version": "v1", "resource": "widgets"},
            "object": obj, "oldObject": None, "userInfo": {"username": "u", "groups": []}}


LIMIT = [{"expression": "object.spec.n <= 3", "messageExpression": "'n is ' + string(object.spec.n)",
          "reason": "Forbidden"}]

VAP_CASES = [
    ("a passing validation allows", [policy(LIMIT), binding()], {"n": 3}, True, None),
    ("a failing validation denies with the API server's wording", [policy(LIMIT), binding()], {"n": 4}, False,
     "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: n is 4"),
    ("without message the expression is quoted", [policy([{"expression": "object.spec.n <= 3"}]), binding()], {"n": 4}, False,
     "failed expression: object.spec.n <= 3"),
    ("an evaluation error denies under failurePolicy Fail", [policy([{"expression": "object.spec.missing"}]), binding()], {"n": 1}, False,
     "expression 'object.spec.missing' resulted in error: no such key: missing"),
    ("an evaluation error is ignored under failurePolicy Ignore", [policy([{"expression": "object.spec.missing"}], failurePolicy="Ignore"), binding()], {"n": 1}, True, None),
    ("a binding for another namespace does not apply", [policy(LIMIT), binding(matchResources={"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}})], {"n": 4}, True, None),
    ("the implicit name label selects the namespace", [policy(LIMIT), binding(matchResources={"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team"]}]}})], {"n": 4}, False, "n is 4"),
    ("a false match condition skips the policy", [policy(LIMIT, matchConditions=[{"name": "big", "expression": "object.spec.n > 10"}]), binding()], {"n": 4}, True, None),
    ("variables are evaluated lazily and in order", [policy([{"expression": "variables.b == 2"}], variables=[{"name": "a", "expression": "1"}, {"name": "b", "expression": "variables.a + 1"}, {"name": "broken", "expression": "object.nope"}]), binding()], {"n": 1}, True, None),
    ("an errored variable reports its own error", [policy([{"expression": "variables.broken"}], variables=[{"name": "broken", "expression": "object.nope"}]), binding()], {"n": 1}, False, "no such key: nope"),
    ("an object selector on other labels does not apply", [policy(LIMIT), binding(matchResources={"objectSelector": {"matchLabels": {"tier": "gold"}}})], {"n": 4}, True, None),
    ("a missing params object with Deny denies", [policy(LIMIT, paramKind={"apiVersion": "v1", "kind": "ConfigMap"}), binding(paramRef={"name": "limits", "parameterNotFoundAction": "Deny"})], {"n": 1}, False,
     "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
    ("a missing params object with Allow allows", [policy(LIMIT, paramKind={"apiVersion": "v1", "kind": "ConfigMap"}), binding(paramRef={"name": "limits", "parameterNotFoundAction": "Allow"})], {"n": 9}, True, None),
    ("an UPDATE-only policy ignores CREATE", [policy(LIMIT, matchConstraints={"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["*"]}]}), binding()], {"n": 4}, True, None),
]


@pytest.mark.parametrize(("name", "objects", "spec", "allowed", "message"), VAP_CASES,
                         ids=[c[0] for c in VAP_CASES])
def test_validating_admission_policies(name: str, objects: list[dict[str, Any]], spec: Any,
                                       allowed: bool, message: str | None) -> None:
    verdict = review(PolicySet.compile(objects), request(spec))
    assert verdict.allowed == allowed, verdict
    if message is not None:
        assert message in verdict.violations[0].message
        assert verdict.violations[0].source == "vap"


def test_a_policy_on_a_subresource_alone_claims_no_object_of_its_group() -> None:
    """`fivespot check` decides files: an object written whole, never a `/scale` write, so a
    policy given on `deployments/scale` alone leaves a tenant's Deployments to be skipped, as
    check skips every kind no given policy or CRD can match."""
    def rules(*resources: str) -> dict[str, Any]:
        return {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["*"],
                                   "operations": ["UPDATE"], "resources": list(resources)}]}
    assert not PolicySet.compile([policy(LIMIT, matchConstraints=rules("deployments/scale"))]) \
        .may_match_group("apps")
    for claims in (("deployments",), ("deployments/scale", "deployments"), ("*/*",), ("*",)):
        assert PolicySet.compile([policy(LIMIT, matchConstraints=rules(*claims))]) \
            .may_match_group("apps"), claims
    assert not PolicySet.compile([policy(LIMIT, matchConstraints=rules("deployments"))]) \
        .may_match_group("batch")


def test_params_are_read_from_the_named_object() -> None:
    params = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "team"},
              "data": {"max": "3"}}
    objects = [policy([{"expression": "object.spec.n <= int(params.data.max)"}],
                      paramKind={"apiVersion": "v1", "kind": "ConfigMap"}),
               binding(paramRef={"name": "limits", "parameterNotFoundAction": "Deny"})]
    policies = PolicySet.compile(objects, [params])
    assert review(policies, request({"n": 3})).allowed
    assert not review(policies, request({"n": 4})).allowed


def test_warn_and_audit_actions_do_not_deny() -> None:
    objects = [policy(LIMIT), binding(validationActions=["Warn", "Audit"])]
    verdict = review(PolicySet.compile(objects), request({"n": 4}))
    assert verdict.allowed
    assert verdict.warnings == ("Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': n is 4",)
    assert verdict.audit == ("p/b: n is 4",)


def test_a_label_selector_needs_the_namespace_object() -> None:
    objects = [policy(LIMIT), binding(matchResources={"namespaceSelector": {"matchLabels": {"tier": "gold"}}})]
    policies = PolicySet.compile(objects)
    with pytest.raises(NamespaceRequired):
        review(policies, request({"n": 4}))
    gold = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"tier": "gold"}}}
    assert not review(policies, request({"n": 4}), gold).allowed
    assert review(policies, request({"n": 4}), copy.deepcopy(gold) | {"metadata": {"name": "team"}}).allowed


def test_fivespot_validations_are_mapped_to_their_fields() -> None:
    from fivespot.compiler.emit.admission import policies as emitted
    from fivespot.compiler.pipeline import load
    from pathlib import Path

    repo = load(Path(__file__).resolve().parents[2] / "examples" / "agent-sandbox" / "config")
    compiled = PolicySet.compile(emitted(repo))
    fields_by_policy = {p.name: [v.field for v in p.validations] for p in compiled.policies.values()}
    assert fields_by_policy["fivespot-scap-tenancy"] == ["metadata.namespace"]
    assert None not in fields_by_policy["fivespot-tenant-limits"]


def test_format_checks_give_a_verdict_for_strings_with_lone_surrogates() -> None:
    from fivespot.policies.admission_eval.formats import checker

    for name in ("date", "date-time", "duration", "hostname", "uuid", "byte", "ipv4", "cidr"):
        check = checker(name)
        assert check is not None
        assert check("\ud800") is False, name


@pytest.mark.parametrize(("text", "valid"), [
    ("2026-03-02T22:00:00Z", True), ("2026-03-02T22:00:00.5+01:00", True),
    ("2026-03-02t22:00:00z", True),  # lower-cased before it is split on "t"
    ("2026-03-02T22:00:00x5Z", True),  # the fraction follows any one character
    ("2026-03-02T22:00:00ZT", True),  # only the part before a second "t" is read
    ("2026-03-02T22:00:00+99:99", True), ("0000-02-29T00:00:00Z", True),  # Go's year 0 leaps
    ("2026-03-02 22:00:00Z", False),  # no "t" to split on
    ("2026-03-02T22:00:00+0100", False), ("2026-03-02T22:00:00", False),
    ("2026-02-29T22:00:00Z", False), ("2026-03-02T24:00:00Z", False), ("2026-03-02T22:60:00Z", False),
    ("2026-03-02T22:00Z", False), ("2026-03-02T22:00:00Z\n", False), ("T", False),
])
def test_the_date_time_format_is_kube_openapis_is_date_time(text: str, valid: bool) -> None:
    """strfmt.IsDateTime (k8s.io/kube-openapi pkg/validation/strfmt/time.go), case by case; the
    fidelity corpus asks the API server the same (`override-until` cases)."""
    from fivespot.policies.admission_eval.formats import checker

    check = checker("date-time")
    assert check is not None and check(text) is valid


def test_gotext_renders_values_as_the_servers_go_code_does() -> None:
    from fivespot.policies.admission_eval.gotext import bad_value, format_float, json_marshal, quote

    # strconv.Quote: printable Unicode kept, controls and non-printables escaped
    assert quote("a\x00b\u00a0c\U0001F600d\u00e9\x7f\t\"\\") == \
        '"a\\x00b\\u00a0c\U0001F600d\u00e9\\x7f\\t\\"\\\\"'
    # %v of float64: shortest form, exponent from 1e+21 as Go prints it
    assert [format_float(v) for v in (1.5, 21.0, 1e6, 123456.0, 1e20, 1e21, 1e-4, 1e-5, -0.5)] == \
        ["1.5", "21", "1e+06", "123456", "1e+20", "1e+21", "0.0001", "1e-05", "-0.5"]
    assert [bad_value(v) for v in (8, True, "x", 2**63)] == ["8", "true", '"x"', "9.223372036854776e+18"]
    # encoding/json: sorted keys, HTML-safe escapes
    assert json_marshal({"b": "<x>\u2028", "a": [1, "\u00e9\x01"]}) == \
        '{"a":[1,"\u00e9\\u0001"],"b":"\\u003cx\\u003e\\u2028"}'


def test_each_supported_version_is_the_release_its_control_plane_module_pins() -> None:
    from pathlib import Path

    from fivespot.policies.admission_eval.gotext import SERVER_VERSION
    from fivespot.policies.kubeversions import DEFAULT, SUPPORTED

    wrappers = Path(__file__).resolve().parents[2] / "tools" / "controlplane"
    for version in SUPPORTED:
        go_mod = (wrappers / f"kubernetes-{version.minor}" / "go.mod").read_text()
        assert f"k8s.io/kubernetes v{version.release}\n" in go_mod or \
            f"k8s.io/kubernetes v{version.release} " in go_mod, version
        assert f"k8s.io/api => k8s.io/api v0.{version.release.partition('.')[2]}" in go_mod
    assert sorted(p.name for p in wrappers.glob("kubernetes-*")) == \
        sorted(f"kubernetes-{v.minor}" for v in SUPPORTED)
    assert SERVER_VERSION == DEFAULT.release


def test_a_pattern_answers_from_memory_as_re2_does_even_past_its_memory_limit() -> None:
    pattern = Pattern(r"^[a-z]+-[0-9]+$")
    texts = [f"pool-{n}" for n in range(_MEMO_ENTRIES + 10)] + ["Pool-1", "pool-", "x" * (_MEMO_TEXT + 1)]
    first = [pattern.search(t) for t in texts]
    again = [pattern.search(t) for t in reversed(texts)][::-1]
    expected = [re2.search(r"^[a-z]+-[0-9]+$", t) is not None for t in texts]
    assert first == again == expected
    assert expected[:3] == [True, True, True] and expected[-3:] == [False, False, False]


def test_a_sets_duplicated_value_is_reported_once_at_its_first_repeat_as_the_api_server_does() -> None:
    schema = spec_schema({"tags": {"type": "array", "items": {"type": "string"},
                                   "x-kubernetes-list-type": "set"}})
    verdict = decide(schema, {"tags": ["a", "a", "b", "b", "a", "a"]})
    assert [(v.field, v.message) for v in verdict.violations] == [
        ("spec.tags[1]", 'Duplicate value: "a"'), ("spec.tags[3]", 'Duplicate value: "b"')]


@pytest.mark.parametrize(("text", "valid"), [
    ("2026-12-24T08:00:00Z", True), ("2026-12-24t08:00:00z", True), ("2026-12-24T08:00:00+01:00", True),
    ("2026-12-24 08:00:00Z", False), ("2026-12-24T08:00:00+0100", False),
])
def test_a_date_time_needs_its_t_and_the_colon_of_its_offset_as_the_api_server_says(text: str,
                                                                                    valid: bool) -> None:
    schema = spec_schema({"at": {"type": "string", "format": "date-time"}})
    verdict = decide(schema, {"at": text})
    assert verdict.allowed is valid
    if not valid:
        assert verdict.violations[0].message.endswith(f'must be of type date-time: "{text}"')
