"""The ScheduledCapacity and ScheduledMachine models: their rules agree with the field-path rule
of `fivespot.api.fieldpath` and with the CEL the API server will run, and their schemas carry what
the CRD emitter needs (descriptions, bounds, camelCase names, CEL rules that compile).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from fivespot.api.fieldpath import (
    CAPACITY_PATH_MESSAGE,
    CAPACITY_PATH_PATTERN,
    DRAINED_PATH_MESSAGE,
    DRAINED_PATH_PATTERN,
    MAX_PATH_LENGTH,
    capacity_path_error,
    drained_path_error,
)
from fivespot.api.kinds.scheduled_capacity import (
    CAPACITY_PATH_CEL,
    DRAINED_PATH_CEL,
    HANDBACK_TIMEOUT_CEL,
    HANDBACK_TIMEOUT_PATTERN,
    SCHEDULE_API_VERSION_CEL,
    SCHEDULE_API_VERSION_MESSAGE,
    Capacity,
    Handback,
    Phase,
    ScheduledCapacitySpec,
    ScheduledCapacityStatus,
    ScheduleRef,
    cel_string,
    parse_duration,
)
from fivespot.api.kinds.scheduled_machine import (
    ScheduledMachineSpec,
    ScheduledMachineStatus,
    governed_node,
)
from fivespot.policies.cel.engine import CRD_VARIABLES, CelEvaluationError, compile_expression

CAPACITY_PATHS = [
    "spec.warmReplicas", "spec.a", "spec.pool.size", "spec.a.b.c.d.e.f.g", "spec.x9Y",
    "spec", "metadata.labels", "metadata.ownerReferences", "status.inUse", "spec.a.b.c.d.e.f.g.h",
    "spec..replicas", "spec.replicas[0]", "spec.*", "spec.'a'", 'spec."a"', "spec/replicas",
    "/spec/replicas", "spec.Replicas", "spec.warm_replicas", "spec.warm-replicas", "spec.replicas.",
    ".spec.replicas", "spec.replicas\n", "spec.r\u0435plicas", "", "spec.a" + "b" * 300,
]
DRAINED_PATHS = [
    "status.inUse", "status.a.b", "status", "spec.inUse", "status..inUse", "status.in_use",
    "status.inUse[0]", "metadata.x", "status.inUse\n", "status.a.b.c.d.e.f.g.h",
]
path_text = st.text(alphabet="abcZ9._[]'/*-\n", max_size=20)
generated_paths = st.one_of(
    path_text,
    st.tuples(st.sampled_from(["spec", "status", "metadata", "Spec"]), path_text).map("".join),
)


def admitted_by_cel(rule: str, value: str) -> bool:
    """What the API server's CEL rule says about `value` (an evaluation error rejects)."""
    try:
        return compile_expression(rule, CRD_VARIABLES).evaluate({"self": value}) is True
    except CelEvaluationError:
        return False


def model_accepts(model: type[BaseModel], **fields: Any) -> bool:
    try:
        model.model_validate(fields)
    except ValidationError:
        return False
    return True


# --- the field-path rule, three ways ---------------------------------------------------------------


def _capacity_verdicts(path: str) -> tuple[bool, bool, bool]:
    return (
        capacity_path_error(path) is None,
        model_accepts(Capacity, path=path, activeValue=1),
        admitted_by_cel(CAPACITY_PATH_CEL, path) and len(path) <= MAX_PATH_LENGTH,
    )


def _drained_verdicts(path: str) -> tuple[bool, bool, bool]:
    return (
        drained_path_error(path) is None,
        model_accepts(Handback, drainedPath=path, timeout="15m"),
        admitted_by_cel(DRAINED_PATH_CEL, path) and len(path) <= MAX_PATH_LENGTH,
    )


@pytest.mark.parametrize("path", CAPACITY_PATHS, ids=repr)
def test_capacity_path_model_cel_and_rule_agree(path: str) -> None:
    verdicts = _capacity_verdicts(path)
    assert len(set(verdicts)) == 1, verdicts


@pytest.mark.parametrize("path", DRAINED_PATHS, ids=repr)
def test_drained_path_model_cel_and_rule_agree(path: str) -> None:
    verdicts = _drained_verdicts(path)
    assert len(set(verdicts)) == 1, verdicts


@settings(max_examples=300, deadline=None)
@given(generated_paths)
def test_generated_paths_get_one_verdict_from_rule_model_and_cel(path: str) -> None:
    assert len(set(_capacity_verdicts(path))) == 1
    assert len(set(_drained_verdicts(path))) == 1


def test_the_examples_include_both_verdicts() -> None:
    assert {capacity_path_error(p) is None for p in CAPACITY_PATHS} == {True, False}
    assert {drained_path_error(p) is None for p in DRAINED_PATHS} == {True, False}


def test_the_cel_rules_are_built_from_the_pattern_constants() -> None:
    assert CAPACITY_PATH_CEL == f"self.matches({cel_string(CAPACITY_PATH_PATTERN)})"
    assert DRAINED_PATH_CEL == f"self.matches({cel_string(DRAINED_PATH_PATTERN)})"


def test_cel_string_escapes_backslashes_and_quotes() -> None:
    rule = f"self == {cel_string(chr(92) + chr(39) + 'x')}"
    assert admitted_by_cel(rule, "\\'x")


# --- the other rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_version", "admitted"),
    [
        ("spotschedules.5spot.finos.org/v1alpha1", True),
        ("spotschedules.5spot.finos.org/v1", True),
        ("spotschedules.5spot.finos.org/v2beta3", True),
        ("5spot.finos.org/v1alpha1", False),
        ("spotschedules.5spot.finos.org", False),
        ("xspotschedules.5spot.finos.org/v1", False),
        ("spotschedulesX5spot.finos.org/v1", False),
        ("spotschedules.5spot.finos.org/v1alpha1/x", False),
        ("spotschedules.5spot.finos.org/v1\n", False),
        ("pools.example.com/v1", False),
        ("v1", False),
    ],
)
def test_the_schedule_ref_is_pinned_to_the_provider_group(api_version: str, admitted: bool) -> None:
    ref = {"apiVersion": api_version, "kind": "ManualSchedule", "name": "desk"}
    assert model_accepts(ScheduleRef, **ref) is admitted
    assert admitted_by_cel(SCHEDULE_API_VERSION_CEL, api_version) is admitted
    assert model_accepts(ScheduledMachineSpec, schedule=ref) is admitted


@pytest.mark.parametrize(
    ("timeout", "seconds"),
    [
        ("15m", 900.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("90s", 90.0),
        ("1s", 1.0),
        ("168h", 604800.0),
        ("1500ms", 1.5),
        ("0s", None),
        ("500ms", None),
        ("169h", None),
        ("15", None),
        ("-5m", None),
        ("15M", None),
        ("1d", None),
        ("", None),
        ("1h 30m", None),
    ],
)
def test_handback_timeout_model_cel_and_parser_agree(timeout: str, seconds: float | None) -> None:
    admitted = re.fullmatch(HANDBACK_TIMEOUT_PATTERN[1:-1], timeout) is not None and admitted_by_cel(
        HANDBACK_TIMEOUT_CEL, timeout
    )
    assert admitted is (seconds is not None)
    assert model_accepts(Handback, drainedPath="status.inUse", timeout=timeout) is admitted
    if seconds is not None:
        assert parse_duration(timeout) == timedelta(seconds=seconds)
        same = f"duration(self) == duration({cel_string(f'{int(seconds * 1000)}ms')})"
        assert admitted_by_cel(same, timeout)


@pytest.mark.parametrize("text", ["", "15", "1d", "-1s", "1h 30m"])
def test_parse_duration_refuses_what_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_active_value_is_a_non_negative_int32() -> None:
    assert model_accepts(Capacity, path="spec.a", activeValue=0)
    assert not model_accepts(Capacity, path="spec.a", activeValue=-1)
    assert not model_accepts(Capacity, path="spec.a", activeValue=2**31)


# --- the spec a tenant writes --------------------------------------------------------------------------


SEED_EXAMPLE = {
    "schedule": {
        "apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
        "kind": "CapitalMarketsSchedule",
        "name": "nyse-hours",
    },
    "targetRef": {
        "apiVersion": "pool.kubevirt.io/v1alpha1",
        "kind": "VirtualMachinePool",
        "name": "agent-sandbox",
    },
    "capacity": {"path": "spec.warmReplicas", "activeValue": 10},
    "handback": {"drainedPath": "status.inUse", "timeout": "15m"},
    "nodeName": "worker-3",
}


def test_the_seed_example_parses_with_defaults() -> None:
    spec = ScheduledCapacitySpec.model_validate(SEED_EXAMPLE)
    assert (spec.enabled, spec.kill_switch) == (True, False)
    assert spec.target_ref.group == "pool.kubevirt.io"
    assert spec.handback is not None and spec.handback.timeout_delta == timedelta(minutes=15)
    assert spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True) == SEED_EXAMPLE


def test_unknown_spec_fields_are_refused() -> None:
    assert not model_accepts(ScheduledCapacitySpec, **SEED_EXAMPLE, replicas=3)
    assert not model_accepts(
        ScheduledCapacitySpec, **{**SEED_EXAMPLE, "capacity": {"path": "spec.a", "activeValue": 1, "inactiveValue": 2}}
    )


def test_the_core_group_has_an_empty_name() -> None:
    spec = ScheduledCapacitySpec.model_validate(
        {**SEED_EXAMPLE, "targetRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}}
    )
    assert spec.target_ref.group == ""


# --- the schema the CRD is emitted from --------------------------------------------------------------


def _nodes(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(where, node, property-level node) for every schema node, with $refs and anyOf resolved."""
    defs = schema.get("$defs", {})

    def walk(where: str, node: dict[str, Any], prop: dict[str, Any] | None) -> Iterator[
        tuple[str, dict[str, Any], dict[str, Any] | None]
    ]:
        if "$ref" in node:
            node = {**defs[node["$ref"].split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
        for branch in node.get("anyOf", []):
            if branch.get("type") != "null":
                yield from walk(where, branch, prop or node)
        yield where, node, prop
        for name, child in node.get("properties", {}).items():
            yield from walk(f"{where}.{name}", child, child)
        if "items" in node:
            yield from walk(f"{where}[]", node["items"], None)

    yield from walk("", schema, None)


SCHEMA_MODELS = [ScheduledCapacitySpec, ScheduledCapacityStatus, ScheduledMachineSpec, ScheduledMachineStatus]


@pytest.mark.parametrize("model", SCHEMA_MODELS, ids=lambda m: m.__name__)
def test_every_field_is_described_and_bounded(model: type[BaseModel]) -> None:
    for where, node, prop in _nodes(model.model_json_schema(by_alias=True)):
        if prop is not None:
            assert prop.get("description") or node.get("description"), f"{where} has no description"
        kind = node.get("type")
        if kind == "string" and "enum" not in node and node.get("format") != "date-time":
            assert "maxLength" in node, f"{where} is an unbounded string"
        if kind == "array":
            assert "maxItems" in node, f"{where} is an unbounded list"


@pytest.mark.parametrize("model", SCHEMA_MODELS, ids=lambda m: m.__name__)
def test_every_cel_rule_in_the_schema_compiles_as_kubernetes_cel(model: type[BaseModel]) -> None:
    rules = [
        rule
        for _, node, _ in _nodes(model.model_json_schema(by_alias=True))
        for rule in node.get("x-kubernetes-validations", [])
    ]
    for rule in rules:
        assert compile_expression(rule["rule"], CRD_VARIABLES).result_type == "bool"
        assert rule["message"]
    if model is ScheduledCapacitySpec:
        assert {r["rule"] for r in rules} == {
            CAPACITY_PATH_CEL, DRAINED_PATH_CEL, SCHEDULE_API_VERSION_CEL, HANDBACK_TIMEOUT_CEL
        }


def test_the_path_fields_carry_the_pattern_and_the_rule() -> None:
    defs = ScheduledCapacitySpec.model_json_schema(by_alias=True)["$defs"]
    path = defs["Capacity"]["properties"]["path"]
    assert (path["pattern"], path["maxLength"]) == (CAPACITY_PATH_PATTERN, MAX_PATH_LENGTH)
    assert path["x-kubernetes-validations"] == [{"rule": CAPACITY_PATH_CEL, "message": CAPACITY_PATH_MESSAGE}]
    drained = defs["Handback"]["properties"]["drainedPath"]
    assert drained["pattern"] == DRAINED_PATH_PATTERN
    assert drained["x-kubernetes-validations"] == [{"rule": DRAINED_PATH_CEL, "message": DRAINED_PATH_MESSAGE}]
    api_version = defs["ScheduleRef"]["properties"]["apiVersion"]
    assert api_version["x-kubernetes-validations"][0]["message"] == SCHEDULE_API_VERSION_MESSAGE


def test_field_names_are_the_camel_case_of_the_design() -> None:
    spec = ScheduledCapacitySpec.model_json_schema(by_alias=True)
    assert set(spec["properties"]) == {
        "schedule", "targetRef", "capacity", "handback", "nodeName", "enabled", "killSwitch"
    }
    assert set(spec["required"]) == {"schedule", "targetRef", "capacity"}
    status = ScheduledCapacityStatus.model_json_schema(by_alias=True)
    assert {
        "phase", "conditions", "writtenValue", "lastWriteTime", "observedDrainedValue",
        "governedNode", "handbackDeadline", "observedGeneration", "schedule",
    } <= set(status["properties"])


def test_the_phases_are_the_eight_of_the_seed() -> None:
    assert [p.value for p in Phase] == [
        "Pending", "Active", "HandingBack", "HandbackTimedOut", "Inactive", "Disabled", "Terminated", "Error"
    ]


def test_conditions_are_a_map_list_keyed_by_type() -> None:
    conditions = ScheduledCapacityStatus.model_json_schema(by_alias=True)["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


# --- ScheduledMachine ----------------------------------------------------------------------------------


def test_a_scheduled_machine_status_exposes_its_node() -> None:
    status = ScheduledMachineStatus.model_validate({"phase": "Active", "nodeRef": {"name": "worker-3"}})
    assert status.node_ref is not None and status.node_ref.name == "worker-3"


def test_a_scheduled_machine_spec_carries_capi_templates_opaquely() -> None:
    spec = ScheduledMachineSpec.model_validate(
        {
            "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule", "name": "d"},
            "clusterName": "prod",
            "bootstrapSpec": {"kubeadmConfigSpec": {"joinConfiguration": {}}},
            "infrastructureSpec": {"kind": "Metal3Machine"},
            "nodeDrainTimeout": "10m",
        }
    )
    assert spec.bootstrap_spec == {"kubeadmConfigSpec": {"joinConfiguration": {}}}


@pytest.mark.parametrize(
    ("status", "node"),
    [
        ({"nodeRef": {"name": "worker-3"}}, "worker-3"),
        ({"nodeRef": {"name": ""}}, None),
        ({"nodeRef": {"name": 3}}, None),
        ({"nodeRef": "worker-3"}, None),
        ({"phase": "Pending"}, None),
        ({"nodeRef": {"name": "worker-3"}, "unexpected": {"field": True}}, "worker-3"),
        (None, None),
    ],
)
def test_governed_node_reads_only_the_node_ref_name(status: object, node: str | None) -> None:
    assert governed_node(status) == node
