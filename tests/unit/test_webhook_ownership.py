"""Field ownership as the target guard judges it: the API server's own bookkeeping for a write of
the allowlisted field passes, anything else a caller does to managedFields is a change.

The managedFields shapes below are what a kube-apiserver 1.35 stored for these writes (recorded
from the local control plane), not guesses."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fivespot.webhook.ownership import identical, ownership_changes

ALLOWED = [("spec", "warmReplicas")]
API = "pools.agents.example.com/v1alpha1"


def entry(manager: str, fields: dict[str, Any], operation: str = "Update", sub: str = "",
          time: str = "2026-12-01T09:50:38Z") -> dict[str, Any]:
    found = {"apiVersion": API, "fieldsType": "FieldsV1", "fieldsV1": fields, "manager": manager,
             "operation": operation, "time": time}
    if sub:
        found["subresource"] = sub
    return found


CREATED = [entry("kubectl-create", {
    "f:metadata": {"f:labels": {".": {}, "f:team": {}}},
    "f:spec": {".": {}, "f:template": {".": {}, "f:image": {}}, "f:warmReplicas": {}}})]
AFTER_MERGE_PATCH = [
    entry("kubectl-create", {"f:metadata": {"f:labels": {".": {}, "f:team": {}}},
                             "f:spec": {".": {}, "f:template": {".": {}, "f:image": {}}}}),
    entry("fivespot-capacity-controller", {"f:spec": {"f:warmReplicas": {}}},
          time="2026-12-01T09:50:39Z")]


def test_the_api_servers_bookkeeping_for_a_write_of_the_field_is_no_change() -> None:
    assert ownership_changes(CREATED, AFTER_MERGE_PATCH, ALLOWED) == []
    refreshed = copy.deepcopy(AFTER_MERGE_PATCH)
    refreshed[1]["time"] = "2026-12-01T10:00:00Z"
    assert ownership_changes(AFTER_MERGE_PATCH, refreshed, ALLOWED) == []


def test_the_api_servers_re_encoding_of_a_node_it_still_owns_is_no_change() -> None:
    """Created with only the field, the creator keeps owning `spec` itself, which the API server
    then writes as {"f:spec": {}} instead of {"f:spec": {".": {}}} (found by `make demo`)."""
    created = [entry("OpenAPI-Generator", {"f:spec": {".": {}, "f:warmReplicas": {}}})]
    patched = [entry("OpenAPI-Generator", {"f:spec": {}}),
               entry("fivespot-capacity-controller", {"f:spec": {"f:warmReplicas": {}}})]
    assert ownership_changes(created, patched, ALLOWED) == []
    assert ownership_changes(created, patched[1:], ALLOWED) == [
        "OpenAPI-Generator would no longer own spec"]


def test_an_apply_entry_taking_over_the_field_or_vanishing_with_it_is_no_change() -> None:
    applied = [AFTER_MERGE_PATCH[0], entry("fivespot-capacity-controller",
                                           {"f:spec": {"f:warmReplicas": {}}}, operation="Apply")]
    assert ownership_changes(AFTER_MERGE_PATCH, applied, ALLOWED) == []
    assert ownership_changes(applied, AFTER_MERGE_PATCH[:1], ALLOWED) == []


def test_objects_without_tracked_ownership_stay_without_it() -> None:
    assert ownership_changes(None, None, ALLOWED) == []
    assert ownership_changes(None, [entry("fivespot-capacity-controller",
                                          {"f:spec": {"f:warmReplicas": {}}})], ALLOWED) == []


def test_the_first_apply_to_an_untracked_object_gives_its_fields_to_before_first_apply() -> None:
    applied = [entry("fivespot-capacity-controller", {"f:spec": {"f:warmReplicas": {}}},
                     operation="Apply"),
               entry("before-first-apply", {"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                                            "f:spec": {".": {}, "f:template": {".": {}}}})]
    assert ownership_changes(None, applied, ALLOWED) == []
    assert ownership_changes(CREATED, [*CREATED, applied[1]], ALLOWED) == [  # only if untracked
        "before-first-apply would own metadata.labels, metadata.labels.a, spec and 1 more"]


def test_wiping_ownership_names_every_manager_that_loses_fields() -> None:
    changes = ownership_changes(CREATED, None, ALLOWED)
    assert changes == ["kubectl-create would no longer own metadata.labels, metadata.labels.team, "
                       "spec and 2 more"]


def test_forging_ownership_of_another_field_is_a_change_even_for_the_controllers_own_entry() -> None:
    forged = [*AFTER_MERGE_PATCH[:1], entry("fivespot-capacity-controller", {
        "f:spec": {"f:warmReplicas": {}, "f:template": {}}})]
    assert ownership_changes(AFTER_MERGE_PATCH, forged, ALLOWED) == [
        "fivespot-capacity-controller would own spec.template"]


def test_moving_a_managers_fields_to_another_operation_or_subresource_is_a_change() -> None:
    moved = [{**AFTER_MERGE_PATCH[0], "operation": "Apply"}, AFTER_MERGE_PATCH[1]]
    changes = ownership_changes(AFTER_MERGE_PATCH, moved, ALLOWED)
    assert len(changes) == 2 and changes[0].startswith("kubectl-create (Apply) would own")
    assert changes[1].startswith("kubectl-create would no longer own")


def test_the_api_servers_compaction_into_ancient_changes_is_no_change() -> None:
    managers = [entry(f"m{i}", {"f:metadata": {"f:annotations": {f"f:a{i}": {}}}})
                for i in range(3)]
    before = [*CREATED, *managers]
    compacted = [
        entry("ancient-changes", {"f:metadata": {"f:annotations": {"f:a0": {}},
                                                 "f:labels": {".": {}, "f:team": {}}},
                                  "f:spec": {".": {}, "f:template": {".": {}, "f:image": {}},
                                             "f:warmReplicas": {}}}),
        *managers[1:]]
    assert ownership_changes(before, compacted, ALLOWED) == []
    padded = copy.deepcopy(compacted)
    padded[0]["fieldsV1"]["f:metadata"]["f:annotations"]["f:owned-by-nobody"] = {}
    assert ownership_changes(before, padded, ALLOWED) == [  # no compaction: every difference
        "ancient-changes would own metadata.annotations.a0, metadata.annotations.owned-by-nobody, "
        "metadata.labels and 4 more",
        "kubectl-create would no longer own metadata.labels, metadata.labels.team, spec and 2 more",
        "m0 would no longer own metadata.annotations.a0"]


@pytest.mark.parametrize("bad", ["wiped", [1, 2], [CREATED[0], CREATED[0]]])
def test_managed_fields_that_are_not_distinct_entries_are_a_change_unless_unchanged(bad: Any) -> None:
    assert ownership_changes(CREATED, bad, ALLOWED) == [
        "managedFields is not a list of distinct manager entries"]
    assert ownership_changes(bad, bad, ALLOWED) == []


def test_a_fields_tree_that_is_not_a_tree_is_compared_as_an_opaque_value() -> None:
    odd = [entry("kubectl-create", "not-a-tree")]  # type: ignore[arg-type]
    assert ownership_changes(odd, odd, ALLOWED) == []
    assert ownership_changes(odd, CREATED, ALLOWED) != []


def test_an_opaque_member_changing_type_is_a_change_though_python_calls_it_equal() -> None:
    one = [entry("kubectl-create", {"f:spec": {"f:template": 1}})]
    true = [entry("kubectl-create", {"f:spec": {"f:template": True}})]
    assert one == true
    assert ownership_changes(one, true, ALLOWED) != []


@pytest.mark.parametrize("a,b,same", [
    ({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]}, True),
    ({"a": 1}, {"a": 1.0}, False),
    ([0], [False], False),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),  # left to the caller's walk, which finds them equal
    ({"a": float("nan")}, {"a": float("nan")}, False),
])
def test_identical_is_strict_about_types_and_leaves_the_rest_to_a_walk(a: Any, b: Any, same: bool) -> None:
    assert identical(a, b) is same


def test_values_nested_too_deep_to_encode_are_not_called_identical() -> None:
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    assert identical(deep, deep) is False
