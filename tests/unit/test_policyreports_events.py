"""Which events of a ScheduledCapacity send the audit controller to judge its namespace again
(`fivespot.controllers.policyreports.controller.changes_the_report`): every one that can change
the report, and not the status writes the capacity controller makes of every object at each
boundary, which would otherwise make a boundary of a namespace of n objects cost n judgements
of n objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fivespot.controllers.policyreports.controller import changes_the_report
from fivespot.runtime.cache import ADDED, DELETED, MODIFIED, RESYNC

pytestmark = pytest.mark.unit

STORED: dict[str, Any] = {
    "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
    "metadata": {"name": "web", "namespace": "agents", "uid": "u-1", "resourceVersion": "10",
                 "generation": 1, "labels": {"team": "a"},
                 "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
    "spec": {"schedule": {"kind": "ManualSchedule", "name": "open"},
             "targetRef": {"kind": "Deployment", "name": "web"},
             "capacity": {"path": "spec.replicas", "activeValue": 2}},
    "status": {"phase": "Inactive"},
}


def changed(**edits: Any) -> dict[str, Any]:
    """STORED after a write: a new resourceVersion, and `edits` at their dotted paths."""
    obj = copy.deepcopy(STORED)
    obj["metadata"]["resourceVersion"] = "11"
    for dotted, value in edits.items():
        *parents, leaf = dotted.split("__")
        node = obj
        for part in parents:
            node = node[part]
        node[leaf] = value
    return obj


def test_a_status_write_does_not_send_the_namespace_to_be_judged_again() -> None:
    after = changed(status={"phase": "Active", "conditions": [{"type": "Ready"}]})
    after["metadata"]["managedFields"].append({"manager": "fivespot", "subresource": "status"})
    assert not changes_the_report(MODIFIED, after, STORED)


@pytest.mark.parametrize("edit", [
    {"spec__capacity": {"path": "spec.replicas", "activeValue": 9}},
    {"metadata__labels": {"team": "b"}},
    {"metadata__annotations": {"note": "x"}},
    {"metadata__generation": 2},
], ids=["spec", "labels", "annotations", "generation"])
def test_a_change_a_policy_can_read_sends_it(edit: dict[str, Any]) -> None:
    assert changes_the_report(MODIFIED, changed(**edit), STORED)


@pytest.mark.parametrize("event", [ADDED, DELETED, RESYNC])
def test_every_other_event_sends_it(event: str) -> None:
    assert changes_the_report(event, STORED, None)
    assert changes_the_report(event, STORED, STORED)


def test_a_modification_without_the_earlier_object_sends_it() -> None:
    assert changes_the_report(MODIFIED, STORED, None)
