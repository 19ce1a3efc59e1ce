"""CompositeSchedule: the three-valued decision (anyOf, allOf, not, nested), the status it
publishes per the provider contract, its next transition from the children's, cycles, and the
spec's admission rules agreeing with the model."""

from __future__ import annotations

import datetime as dt
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from fivespot.api.kinds.composite import (
    LEAF_MESSAGE,
    LEAF_RULE,
    MAX_DEPTH,
    NODE_FORM_MESSAGE,
    NODE_FORM_RULE,
    REFERENCE_API_VERSION_RULE,
    SELF_REFERENCE_MESSAGE,
    SELF_REFERENCE_MESSAGE_EXPRESSION,
    SELF_REFERENCE_RULE,
    CompositeScheduleSpec,
)
from fivespot.api.providers import BuiltinProvider
from fivespot.api.provider_contract import LookupFailed, Resolved, ScheduleObservation, Unresolved, UnresolvedReason
from fivespot.controllers.spotschedules import composite
from fivespot.controllers.spotschedules.composite import AllOf, AnyOf, Children, Not, Ref, Truth, truth
from fivespot.compiler.emit.crds import builtin_provider, crd
from fivespot.compiler.pipeline import compile_repo
from fivespot.controllers.spotschedules.composite_controller import child_keys
from fivespot.policies.admission_eval import Checker, Request
from fivespot.policies.cel import compile_crd_rule, compile_expression
from fivespot.policies.kubeversions import DEFAULT

pytestmark = pytest.mark.unit

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 3, 4, 10, 15, tzinfo=UTC)
V1 = "spotschedules.5spot.finos.org/v1alpha1"
GROUP = "spotschedules.5spot.finos.org"


def ref(name: str, kind: str = "ManualSchedule") -> dict[str, str]:
    return {"apiVersion": V1, "kind": kind, "name": name}


def r(name: str, kind: str = "ManualSchedule") -> Ref:
    return Ref(GROUP, kind, name, "spec")


A, B, C = r("a"), r("b"), r("c")
T, F, U = True, False, None


def values(**given: Truth) -> Any:
    return lambda reference: given[reference.name]


# --- the decision table ---------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "any_of", "all_of"), [
    (T, T, T, T), (T, F, T, F), (T, U, T, U),
    (F, T, T, F), (F, F, F, F), (F, U, U, F),
    (U, T, T, U), (U, F, U, F), (U, U, U, U),
])
def test_anyof_and_allof_follow_kleene_logic(a: Truth, b: Truth, any_of: Truth, all_of: Truth) -> None:
    assert truth(AnyOf((A, B)), values(a=a, b=b)) is any_of
    assert truth(AllOf((A, B)), values(a=a, b=b)) is all_of


@pytest.mark.parametrize(("a", "expected"), [(T, F), (F, T), (U, U)])
def test_not_negates_and_keeps_unknown_unknown(a: Truth, expected: Truth) -> None:
    assert truth(Not(A), values(a=a)) is expected


OFFICE_OR_OVERRIDE_AND_NOT_FREEZE = AllOf((AnyOf((A, B)), Not(C)))


@pytest.mark.parametrize(("a", "b", "c", "expected"), [
    # office hours, override, freeze -> active
    (T, F, F, T), (F, T, F, T), (T, T, F, T), (F, F, F, F),
    (T, F, T, F), (F, T, T, F), (F, F, T, F),
    # an unresolved child decides only where the others leave the answer open
    (T, U, F, T), (U, T, F, T), (U, F, F, U), (F, F, U, F), (T, F, U, U), (U, U, T, F),
    (U, U, U, U),
])
def test_office_hours_or_override_and_not_freeze(a: Truth, b: Truth, c: Truth, expected: Truth) -> None:
    assert truth(OFFICE_OR_OVERRIDE_AND_NOT_FREEZE, values(a=a, b=b, c=c)) is expected


def _completions(expression: composite.Expr, named: dict[str, Truth]) -> set[Truth]:
    unknown = [k for k, v in named.items() if v is None]
    return {truth(expression, values(**{**named, **dict(zip(unknown, fill))}))
            for fill in itertools.product((T, F), repeat=len(unknown))}


def test_with_each_child_named_once_the_result_is_known_exactly_when_every_resolution_agrees() -> None:
    expression = AnyOf((AllOf((A, Not(B))), Not(AnyOf((C, r("d"))))))
    for given in itertools.product((T, F, U), repeat=4):
        named = dict(zip("abcd", given))
        outcomes = _completions(expression, named)
        expected = outcomes.pop() if len(outcomes) == 1 else None
        assert truth(expression, values(**named)) is expected, named


def test_a_known_result_is_never_contradicted_by_resolving_the_unknowns() -> None:
    """A child named twice can make every resolution agree while the logic says unknown
    (c or not c); it never says a value some resolution contradicts."""
    expression = AnyOf((AllOf((A, Not(B))), AllOf((Not(A), C)), Not(AnyOf((B, C)))))
    for given in itertools.product((T, F, U), repeat=3):
        named = dict(zip("abc", given))
        known = truth(expression, values(**named))
        if known is not None:
            assert _completions(expression, named) == {known}, named


def test_only_the_unknowns_that_decide_are_blamed() -> None:
    given = values(a=T, b=U, c=U)
    assert composite.deciding_unknowns(OFFICE_OR_OVERRIDE_AND_NOT_FREEZE, given) == [C]
    assert composite.deciding_unknowns(AnyOf((A, B)), given) == []


# --- the next transition --------------------------------------------------------------------------


def test_the_next_transition_is_the_first_child_flip_that_changes_the_result() -> None:
    at = {"a": NOW + dt.timedelta(hours=1), "b": NOW + dt.timedelta(hours=2),
          "c": NOW + dt.timedelta(hours=3)}
    upcoming = lambda reference: at[reference.name]  # noqa: E731
    # office (a) closes in 1 h but the override (b) is on: the composite flips only when b does.
    assert composite.next_transition(OFFICE_OR_OVERRIDE_AND_NOT_FREEZE, values(a=T, b=T, c=F),
                                     upcoming) == at["b"]
    assert composite.next_transition(AnyOf((A, B)), values(a=T, b=T), upcoming) == at["b"]
    assert composite.next_transition(AnyOf((A, B)), values(a=T, b=F), upcoming) == at["a"]
    # office hours open (a) as the override ends (b): still active until the freeze starts (c).
    assert composite.next_transition(OFFICE_OR_OVERRIDE_AND_NOT_FREEZE, values(a=F, b=T, c=F),
                                     upcoming) == at["c"]
    assert composite.next_transition(AllOf((A, Not(C))), values(a=T, c=F),
                                     lambda reference: at["c"] if reference.name == "c" else None
                                     ) == at["c"]


def test_children_flipping_at_the_same_instant_are_judged_together() -> None:
    same = NOW + dt.timedelta(minutes=5)
    # a turns off and b turns on at once: anyOf stays active, no transition.
    assert composite.next_transition(AnyOf((A, B)), values(a=T, b=F), lambda _: same) is None


def test_no_next_transition_while_unknown_or_without_child_flips() -> None:
    assert composite.next_transition(AnyOf((A, B)), values(a=U, b=F), lambda _: NOW) is None
    assert composite.next_transition(AnyOf((A, B)), values(a=T, b=F), lambda _: None) is None


# --- one reconcile: the published status ----------------------------------------------------------

SPEC = {"allOf": [{"anyOf": [ref("office", "TimeBasedSpotSchedule"), ref("override")]},
                  {"not": ref("freeze")}]}


def children(observed: dict[str, ScheduleObservation], upcoming: dict[str, dt.datetime] | None = None,
             graph: dict[str, dict[str, Any]] | None = None, name: str = "desk") -> Children:
    def expression(other: str) -> composite.Expr | None:
        parsed = composite.parse_spec((graph or {}).get(other))
        return None if isinstance(parsed, ValidationError) else parsed

    return Children(name=name, lookup=lambda reference: observed[reference.name],
                    upcoming=lambda reference: (upcoming or {}).get(reference.name),
                    graph=expression)


def ready(patch: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in patch["status"]["conditions"] if c["type"] == "Ready")


def test_it_publishes_active_ready_and_the_next_transition_per_the_contract() -> None:
    closes = NOW + dt.timedelta(hours=7)
    patch, requeue = composite.evaluate_with(
        children({"office": Resolved(True), "override": Resolved(False), "freeze": Resolved(False)},
                 {"office": closes}),
        SPEC, 4, None, NOW)
    assert patch is not None and requeue is None  # no timer: child events drive it
    status = patch["status"]
    assert status["active"] is True and status["observedGeneration"] == 4
    assert status["nextTransitionTime"] == "2026-03-04T17:15:00Z"
    assert ready(patch)["status"] == "True" and ready(patch)["reason"] == "ExpressionTrue"
    assert "TimeBasedSpotSchedule/office=active" in ready(patch)["message"]


def test_an_unresolved_child_that_decides_holds_the_last_state_and_names_it() -> None:
    prior, _ = composite.evaluate_with(
        children({"office": Resolved(True), "override": Resolved(False), "freeze": Resolved(False)}),
        SPEC, 1, None, NOW)
    assert prior is not None
    gone = Unresolved(UnresolvedReason.CRD_NOT_INSTALLED, "install its CRD")
    later = NOW + dt.timedelta(minutes=1)
    patch, _ = composite.evaluate_with(
        children({"office": Resolved(True), "override": Resolved(False), "freeze": gone}),
        SPEC, 1, prior["status"], later)
    assert patch is not None
    assert patch["status"]["active"] is True  # held
    assert patch["status"]["lastTransitionTime"] == prior["status"]["lastTransitionTime"]
    assert ready(patch)["status"] == "False" and ready(patch)["reason"] == "ChildUnresolved"
    assert "ManualSchedule/freeze at spec.allOf[1].not: ProviderCRDNotInstalled" in ready(patch)["message"]
    assert "nextTransitionTime" not in patch["status"] or patch["status"]["nextTransitionTime"] is None


def test_an_unresolved_child_that_does_not_decide_changes_nothing() -> None:
    gone = Unresolved(UnresolvedReason.NOT_FOUND, "create it")
    patch, _ = composite.evaluate_with(
        children({"office": Resolved(True), "override": gone, "freeze": Resolved(False)}),
        SPEC, 1, None, NOW)
    assert patch is not None and patch["status"]["active"] is True
    assert ready(patch)["status"] == "True"


def test_a_child_that_cannot_be_looked_at_yet_writes_nothing_and_retries() -> None:
    patch, requeue = composite.evaluate_with(
        children({"office": LookupFailed("cache not synced"), "override": Resolved(False),
                  "freeze": Resolved(False)}),
        SPEC, 1, None, NOW)
    assert patch is None and requeue is not None and requeue > NOW


def test_a_self_reference_or_a_cycle_is_an_invalid_spec() -> None:
    looped = {"anyOf": [ref("override"), ref("other", "CompositeSchedule")]}
    other = {"not": ref("desk", "CompositeSchedule")}
    observed: dict[str, ScheduleObservation] = {"override": Resolved(False), "other": Resolved(True)}
    patch, requeue = composite.evaluate_with(children(observed, graph={"other": other}),
                                             looped, 1, None, NOW)
    assert patch is not None and requeue is None
    assert ready(patch)["reason"] == "InvalidSpec"
    assert "CompositeSchedule desk -> other -> desk is a cycle" in ready(patch)["message"]
    itself = {"not": ref("desk", "CompositeSchedule")}
    patch, _ = composite.evaluate_with(children({"desk": Resolved(True)}), itself, 1, None, NOW)
    assert patch is not None and "desk -> desk is a cycle" in ready(patch)["message"]


def test_a_composite_of_composites_without_a_cycle_is_fine() -> None:
    spec = {"anyOf": [ref("inner", "CompositeSchedule"), ref("override")]}
    inner = {"not": ref("freeze")}
    patch, _ = composite.evaluate_with(
        children({"inner": Resolved(False), "override": Resolved(True)}, graph={"inner": inner}),
        spec, 1, None, NOW)
    assert patch is not None and ready(patch)["status"] == "True" and patch["status"]["active"]


def test_an_invalid_spec_is_reported_not_raised() -> None:
    patch, _ = composite.evaluate_with(children({}), {"anyOf": []}, 1, None, NOW)
    assert patch is not None and ready(patch)["reason"] == "InvalidSpec"
    assert "spec.anyOf" in ready(patch)["message"]


def test_nothing_is_written_when_nothing_changed() -> None:
    observed: dict[str, ScheduleObservation] = {
        "office": Resolved(False), "override": Resolved(False), "freeze": Resolved(False)}
    first, _ = composite.evaluate_with(children(observed), SPEC, 1, None, NOW)
    assert first is not None
    again, _ = composite.evaluate_with(children(observed), SPEC, 1, first["status"],
                                       NOW + dt.timedelta(minutes=3))
    assert again is None


def test_the_index_names_every_child_of_a_raw_spec() -> None:
    obj = {"metadata": {"namespace": "team", "name": "desk"}, "spec": SPEC}
    assert child_keys(obj) == [f"team/{GROUP}/ManualSchedule/freeze",
                               f"team/{GROUP}/ManualSchedule/override",
                               f"team/{GROUP}/TimeBasedSpotSchedule/office"]


# --- the spec: the model and the CRD rules agree ------------------------------------------------


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = ref("x")
    for _ in range(levels):
        node = {"not": node}
    return node


@pytest.mark.parametrize(("spec", "message"), [
    (SPEC, None),
    (ref("alone"), None),
    (_nested(MAX_DEPTH), None),
    (_nested(MAX_DEPTH + 1), "Extra inputs"),
    ({}, NODE_FORM_MESSAGE),
    ({"anyOf": [ref("a")], "not": ref("b")}, NODE_FORM_MESSAGE),
    ({"kind": "ManualSchedule", "name": "a"}, NODE_FORM_MESSAGE),
    ({"anyOf": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]},
     "a CompositeSchedule combines only spot-schedule providers"),
    ({"anyOf": []}, "at least 1"),
])
def test_the_model_accepts_exactly_the_well_formed_specs(spec: dict[str, Any], message: str | None) -> None:
    if message is None:
        CompositeScheduleSpec.model_validate(spec)
        return
    with pytest.raises(ValidationError, match=re.escape(message)):
        CompositeScheduleSpec.model_validate(spec)


def test_the_cel_rules_say_what_the_model_says() -> None:
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"self": cel.Type.DYN})

    def accepts(rule: str, value: Any) -> bool:
        result = env.compile(rule).eval(data={"self": value})
        return result.type().name() != "ERROR" and result.value() is True

    assert accepts(NODE_FORM_RULE, ref("a")) and accepts(NODE_FORM_RULE, {"anyOf": [ref("a")]})
    assert not accepts(NODE_FORM_RULE, {})
    assert not accepts(NODE_FORM_RULE, {"anyOf": [ref("a")], "not": ref("b")})
    assert not accepts(NODE_FORM_RULE, {"kind": "ManualSchedule", "name": "a"})
    assert accepts(LEAF_RULE, ref("a")) and not accepts(LEAF_RULE, {})
    assert accepts(REFERENCE_API_VERSION_RULE, V1) and not accepts(REFERENCE_API_VERSION_RULE, "apps/v1")
    assert "at most" in LEAF_MESSAGE


# --- a self-reference: refused at admission by a rule at the object's root -----------------------


def _composite(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """What a CRD rule at the root sees: apiVersion, kind, metadata.name (and generateName), spec."""
    return {"apiVersion": V1, "kind": "CompositeSchedule", "metadata": {"name": name}, "spec": spec}


def _every_position(target: dict[str, str]) -> list[dict[str, Any]]:
    """Specs holding `target` at each place a node can be, at every level of nesting."""
    other = ref("x")
    specs: list[dict[str, Any]] = [target]
    for op in ("anyOf", "allOf"):
        specs += [{op: [target]}, {op: [other, target]}, {op: [other, other, other, target]}]
        for inner in ("anyOf", "allOf"):
            specs.append({op: [other, {inner: [other, target]}]})
        specs.append({op: [{"not": target}]})
        specs.append({"not": {op: [other, target]}})
    specs += [{"not": target}, {"not": {"not": target}}]
    return specs


SELF = {"apiVersion": V1, "kind": "CompositeSchedule", "name": "desk"}
NOT_SELF = [
    {"apiVersion": V1, "kind": "CompositeSchedule", "name": "desk-2"},     # another composite
    {"apiVersion": V1, "kind": "ManualSchedule", "name": "desk"},          # same name, other kind
    {"apiVersion": V1, "kind": "CompositeSchedule", "name": "des"},
]


def test_the_self_reference_rule_finds_the_object_itself_at_every_position_and_nothing_else() -> None:
    rule = compile_crd_rule(SELF_REFERENCE_RULE)
    for spec in _every_position(SELF) + _every_position({**SELF, "apiVersion": f"{GROUP}/v1"}):
        assert rule.evaluate(_composite("desk", spec)) is False, spec
        loop = composite.cycle("desk", composite.parse(CompositeScheduleSpec.model_validate(spec)),
                               lambda name: None)
        assert loop == ["desk", "desk"], spec                  # the controller says the same
    for target in NOT_SELF:
        for spec in _every_position(target):
            assert rule.evaluate(_composite("desk", spec)) is True, spec
            assert composite.cycle("desk", composite.parse(CompositeScheduleSpec.model_validate(spec)),
                                   lambda name: None) is None
    # A generated name cannot be known when the spec is written: nothing to compare.
    assert rule.evaluate({"apiVersion": V1, "kind": "CompositeSchedule",
                          "metadata": {"generateName": "desk-"}, "spec": SELF}) is True


def test_the_self_reference_rule_is_at_the_root_of_the_compiled_crd_and_its_message_names_the_object() -> None:
    schema = crd(builtin_provider(BuiltinProvider.COMPOSITE))["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]
    (rule,) = schema["x-kubernetes-validations"]
    assert rule["rule"] == SELF_REFERENCE_RULE and rule["fieldPath"] == ".spec"
    assert rule["message"] == SELF_REFERENCE_MESSAGE
    message = compile_expression(SELF_REFERENCE_MESSAGE_EXPRESSION, ("self",)).evaluate(
        {"self": _composite("desk", SELF)})
    assert isinstance(message, str)
    assert message.startswith("CompositeSchedule desk -> desk is a cycle; a composite cannot depend")


def test_fivespot_check_refuses_a_self_reference_with_the_api_servers_answer() -> None:
    example = Path(__file__).resolve().parents[4] / "examples" / "agent-sandbox" / "config"
    checker = Checker.compile([a.obj for a in compile_repo(example).artifacts], server=DEFAULT)
    obj = {**_composite("desk", {"allOf": [{"anyOf": [ref("office"), SELF]}]}),
           "metadata": {"name": "desk", "namespace": "agents"}}
    verdict = checker.check(Request("CREATE", obj))
    assert not verdict.allowed
    assert verdict.status is not None and verdict.status.message == (
        'CompositeSchedule.spotschedules.5spot.finos.org "desk" is invalid: spec: Invalid value: '
        "CompositeSchedule desk -> desk is a cycle; a composite cannot depend on itself: "
        "reference the schedules it would combine, not the CompositeSchedule of the same name")
    legal = {**obj, "spec": {"allOf": [{"anyOf": [ref("office"), NOT_SELF[0]]}]}}
    assert checker.check(Request("CREATE", legal)).allowed
