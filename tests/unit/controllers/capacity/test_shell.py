"""The capacity shell's own pure parts: how events map back to ScheduledCapacities (reference
keys), the last-line write guard against the bundle, picking the newest copy of an object, and
the command line."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from fivespot.api.bundle import Consumer
from fivespot.api.kinds.scheduled_capacity import ScheduledCapacityStatus
from fivespot.controllers.capacity.controller import (
    BY_NODE,
    BY_SCHEDULE,
    BY_TARGET,
    guard_write,
    machine_node,
    object_ref_key,
    scap_references,
)
from fivespot.controllers.capacity.decide import Decision
from fivespot.controllers.capacity.observations import parse_spec
from fivespot.controllers.cli import register
from fivespot.runtime.ownwrites import newer

ENTRY = Consumer(name="pools", group="pools.example.com", version="v1", kind="Pool",
                 resource="pools", capacity_paths=("spec.warmReplicas",), drained_path="status.inUse",
                 max_active_value=16)


def scap(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
                     "name": "desk"},
        "targetRef": {"apiVersion": "pools.example.com/v1", "kind": "Pool", "name": "agents"},
        "capacity": {"path": "spec.warmReplicas", "activeValue": 10},
    }
    base.update(spec)
    return {"metadata": {"name": "cap", "namespace": "team"}, "spec": base}


def decision(write: int | None, path: str | None = "spec.warmReplicas") -> Decision:
    return Decision(write=write, write_path=path if write is not None else None,
                    status=ScheduledCapacityStatus(), requeue_at=None, events=())


def test_a_scheduled_capacity_is_indexed_by_what_it_references_group_and_kind_not_version() -> None:
    refs = scap_references(scap(nodeName="worker-3"))
    assert refs[BY_SCHEDULE] == ["team/spotschedules.5spot.finos.org/ManualSchedule/desk"]
    assert refs[BY_TARGET] == ["team/pools.example.com/Pool/agents"]
    assert refs[BY_NODE] == ["team/worker-3"]
    provider = {"apiVersion": "spotschedules.5spot.finos.org/v1beta9", "kind": "ManualSchedule",
                "metadata": {"name": "desk", "namespace": "team"}}
    assert object_ref_key(provider) == refs[BY_SCHEDULE][0], "any served version maps to the same key"


def test_an_invalid_spec_is_still_indexed_as_far_as_it_can_be_read() -> None:
    refs = scap_references({"metadata": {"name": "x", "namespace": "team"}, "spec": {"nodeName": 3}})
    assert refs == {BY_SCHEDULE: [], BY_TARGET: [], BY_NODE: []}


def test_a_machine_maps_to_the_node_its_status_names() -> None:
    assert machine_node({"status": {"nodeRef": {"name": "worker-3"}}}) == "worker-3"
    assert machine_node({"status": {}}) is None
    assert machine_node(None) is None


def test_the_newer_copy_of_an_object_wins_by_resource_version() -> None:
    cached = {"metadata": {"resourceVersion": "9"}}
    written = {"metadata": {"resourceVersion": "12"}}
    assert newer(cached, written) is written
    assert newer(written, cached) is written
    assert newer(cached, None) is cached
    same = {"metadata": {"resourceVersion": "9"}}
    assert newer(cached, same) is same, "on a tie the second (our own write) is kept"


def test_the_write_guard_allows_only_an_allowlisted_path_and_zero_or_the_active_value() -> None:
    spec = parse_spec(scap()["spec"])
    assert guard_write(spec, ENTRY, decision(10)) is None
    assert guard_write(spec, ENTRY, decision(0)) is None
    assert guard_write(spec, ENTRY, decision(None)) is None
    assert "neither 0 nor" in str(guard_write(spec, ENTRY, decision(7)))
    assert "not spec.capacity.path" in str(guard_write(spec, ENTRY, decision(10, "spec.other")))
    other_consumer = Consumer(name="pools", group="pools.example.com", version="v1", kind="Pool",
                              resource="pools", capacity_paths=("spec.size",), drained_path=None,
                              max_active_value=16)
    assert "not a capacity path" in str(guard_write(spec, other_consumer, decision(10)))
    assert "no CapacityConsumer" in str(guard_write(spec, None, decision(0)))


def test_the_write_guard_refuses_a_metadata_path_that_an_old_crd_let_through() -> None:
    spec = parse_spec(scap(capacity={"path": "metadata.labels.owner", "activeValue": 1})["spec"])
    assert guard_write(spec, ENTRY, decision(0, "metadata.labels.owner")) is not None


def test_the_controller_command_takes_the_documented_flags() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["controller", "capacity", "--bundle", "/etc/fivespot/bundle.json",
                              "--kubeconfig", "/k", "--identity", "pod-1", "--metrics-port", "9090",
                              "--partitions", "agents,default"])
    assert (args.controller, str(args.bundle), args.identity, args.metrics_port, args.partitions) == (
        "capacity", "/etc/fivespot/bundle.json", "pod-1", 9090, "agents,default")
    assert callable(args.handler)
    with pytest.raises(SystemExit):
        parser.parse_args(["controller", "capacity"])  # --bundle is required


def test_the_compiled_deployment_arguments_parse() -> None:
    from fivespot.compiler.emit.components import BUNDLE_PATH

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["controller", "capacity", "--bundle", BUNDLE_PATH])
    assert args.metrics_port == 8080 and args.partitions is None
