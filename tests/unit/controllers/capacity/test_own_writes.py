"""The capacity shell between its own target write and that write's watch echo.

The reconcile runs for real (observe, decide, write, status) against a small in-memory API server
and caches fed by hand, so a test can hold an event back the way a loaded machine does: the
target watch delivers our own write of the active value late, while a ScheduledMachine event, or
the schedule closing, arrives first. The shell skips the echo of its own active write (nothing
new in it), so a decision made in that window must already rest on that write — the root cause
of the one-in-a-few-hundred host-race trial whose pool stayed at the active value.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from fivespot.api.kinds.scheduled_capacity import ScheduledCapacityStatus
from fivespot.compiler.emit.bundle import bundle
from fivespot.compiler.pipeline import load
from fivespot.controllers.capacity import observations
from fivespot.controllers.capacity.controller import CapacityReconciler, capacity_manager
from fivespot.runtime import kube
from fivespot.runtime.cache import ADDED, DELETED, MODIFIED
from fivespot.runtime.informer import Informer, handle_watch_event
from fivespot.runtime.kube import ApiClient, ResolvedKind
from fivespot.runtime.manager import Manager, Settings
from fivespot.runtime.partitions import Partitions
from tests.unit.fakeapi import FakeApiServer

ROOT = Path(__file__).resolve().parents[4]
NS = "agents"
POOL = f"/apis/pools.agents.example.com/v1alpha1/namespaces/{NS}/virtualmachinepools/pool"
SCHEDULE = f"/apis/spotschedules.5spot.finos.org/v1alpha1/namespaces/{NS}/manualschedules/desk"
SCAP = f"/apis/5spot.finos.org/v1alpha1/namespaces/{NS}/scheduledcapacities/cap"
MACHINES = f"/apis/5spot.finos.org/v1beta1/namespaces/{NS}/scheduledmachines"
KINDS = {
    "VirtualMachinePool": ResolvedKind("pools.agents.example.com", "v1alpha1", "VirtualMachinePool",
                                       "virtualmachinepools", True),
    "ManualSchedule": ResolvedKind("spotschedules.5spot.finos.org", "v1alpha1", "ManualSchedule",
                                   "manualschedules", True),
}


def target_writes(server: FakeApiServer) -> list[object]:
    """The values our patches of the pool left in its field, in order."""
    return [obj["spec"].get("warmReplicas") for path, obj in server.patched if path == POOL]


class World:
    """The controller, built as the CLI builds it, with its caches fed from `server` by hand."""

    def __init__(self, server: FakeApiServer, mgr: Manager, controller: CapacityReconciler):
        self.server, self.mgr, self.controller = server, mgr, controller

    def informer(self, which: str) -> Informer:
        if which == "scaps":
            return self.controller.scaps
        if which == "machines":
            return self.controller.machines
        watches = self.controller.targets if which == "VirtualMachinePool" else self.controller.providers
        watched = watches.get(KINDS[which].group, which)
        assert watched is not None and watched.informer is not None
        return watched.informer

    def deliver(self, which: str, obj: Mapping[str, Any], event: str = MODIFIED) -> None:
        """One watch event reaching the cache and the handlers (what the watch thread does)."""
        informer = self.informer(which)
        step = handle_watch_event(informer._cache, {"type": event, "object": copy.deepcopy(obj)})
        if step.delta is not None:
            informer._dispatch([step.delta])

    def create(self, which: str, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        stored = self.server.put(path, obj)
        self.deliver(which, stored, ADDED)
        return stored

    def reconcile(self) -> None:
        self.mgr.reconcile_key(f"{NS}/cap")

    def queued(self) -> list[str]:
        keys = []
        while len(self.mgr.queue):
            key = self.mgr.queue.get(timeout=0)
            if key is None:
                break
            keys.append(key)
            self.mgr.queue.done(key)
        return keys


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    server = FakeApiServer(collections=(MACHINES,))
    monkeypatch.setattr(kube, "request", server.request)
    monkeypatch.setattr(kube, "resolve_kind", lambda api, group, kind: KINDS.get(kind))
    monkeypatch.setattr(Informer, "start", lambda self: self._synced.set())  # fed by hand, never watches
    compiled = bundle(load(ROOT / "examples" / "agent-sandbox" / "config"))
    settings = Settings(bundle=compiled, identity="unit", namespace=compiled.namespace,
                        partitions=Partitions.from_bundle(compiled))
    mgr = capacity_manager(cast(ApiClient, None), settings)
    controller = mgr.reconciler
    assert isinstance(controller, CapacityReconciler)
    monkeypatch.setattr(mgr.elector, "is_leading", lambda partition: True)
    monkeypatch.setattr(mgr.elector, "holds", lambda partition: True)
    controller.providers.resolve_now()
    controller.targets.resolve_now()
    controller.in_force.params.resolve_now()  # not served here: the compiled params are the ones in force
    for informer in (controller.scaps, controller.machines, *(controller.in_force.live or ())):
        informer.start()  # no policy in the cluster here: the bundle's are in force
    world = World(server, mgr, controller)
    world.create("VirtualMachinePool", POOL, {
        "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
        "metadata": {"name": "pool", "namespace": NS, "generation": 1}, "spec": {"warmReplicas": 0}})
    world.create("ManualSchedule", SCHEDULE, {
        "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
        "metadata": {"name": "desk", "namespace": NS, "generation": 1}, "spec": {"enabled": True},
        "status": {"active": True, "observedGeneration": 1}})
    world.create("scaps", SCAP, {
        "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
        "metadata": {"name": "cap", "namespace": NS, "generation": 1,
                     "creationTimestamp": "2026-03-04T10:00:00Z"},
        "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                              "kind": "ManualSchedule", "name": "desk"},
                 "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                               "kind": "VirtualMachinePool", "name": "pool"},
                 "capacity": {"path": "spec.warmReplicas", "activeValue": 7},
                 "nodeName": "worker-3"}})
    yield world


def _land_machine(world: World) -> None:
    world.create("machines", f"{MACHINES}/m", {
        "apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
        "metadata": {"name": "m", "namespace": NS, "generation": 1}, "spec": {},
        "status": {"nodeRef": {"name": "worker-3"}}})


def _write_active_value_and_hold_its_echo(world: World) -> dict[str, Any]:
    world.reconcile()
    assert target_writes(world.server) == [7]
    world.deliver("scaps", world.server.objects[SCAP])  # our status write (Active) is seen
    world.queued()
    return copy.deepcopy(world.server.objects[POOL])  # what the target watch has not delivered yet


def test_a_machine_taking_the_node_before_our_active_writes_echo_arrives_is_still_driven_to_0(
        world: World) -> None:
    echo = _write_active_value_and_hold_its_echo(world)
    _land_machine(world)
    assert world.queued() == [f"{NS}/cap"], "the machine event re-queues the ScheduledCapacity"
    world.reconcile()  # the target cache still reads 0: the decision must rest on our write of 7
    assert target_writes(world.server) == [7, 0]
    world.deliver("VirtualMachinePool", echo)
    assert world.server.objects[POOL]["spec"]["warmReplicas"] == 0


def test_a_schedule_closing_before_our_active_writes_echo_arrives_is_still_handed_back(world: World) -> None:
    echo = _write_active_value_and_hold_its_echo(world)
    closed = world.server.objects[SCHEDULE]
    closed["status"]["active"] = False
    world.deliver("ManualSchedule", world.server.put(SCHEDULE, closed))
    world.reconcile()
    assert target_writes(world.server) == [7, 0]
    world.deliver("VirtualMachinePool", echo)
    assert world.server.objects[POOL]["spec"]["warmReplicas"] == 0


def test_the_echo_of_our_own_active_write_is_skipped_and_our_copy_dropped_once_the_watch_catches_up(
        world: World) -> None:
    echo = _write_active_value_and_hold_its_echo(world)
    world.deliver("VirtualMachinePool", echo)
    assert world.queued() == [], "our own active write coming back needs no reconcile"
    world.reconcile()
    assert target_writes(world.server) == [7], "an unchanged world writes nothing"
    someone = copy.deepcopy(echo)
    someone["spec"]["warmReplicas"] = 3
    world.deliver("VirtualMachinePool", world.server.put(POOL, someone))
    assert world.queued() == [f"{NS}/cap"], "anyone else's change is reconciled"
    world.reconcile()
    assert target_writes(world.server) == [7, 7]


def test_a_deleted_target_drops_our_copy_of_it(world: World) -> None:
    echo = _write_active_value_and_hold_its_echo(world)
    key = f"{NS}/pools.agents.example.com/VirtualMachinePool/pool"
    assert world.controller.target_writes.known(key, None) is not None
    world.deliver("VirtualMachinePool", echo, DELETED)
    assert world.controller.target_writes.known(key, None) is None


def test_a_target_writes_status_is_held_back_in_the_later_lane_and_sent_before_the_next_decision(
        world: World) -> None:
    world.queued()  # the creation's own add
    world.reconcile()
    assert target_writes(world.server) == [7]
    assert ("PATCH", SCAP + "/status") not in world.server.calls, "the status waits behind the burst"
    assert world.mgr.queue.later() == [f"{NS}/cap"]
    assert "status" not in world.server.objects[SCAP]
    closed = world.server.objects[SCHEDULE]
    closed["status"]["active"] = False
    world.deliver("ManualSchedule", world.server.put(SCHEDULE, closed))
    assert world.mgr.queue.later() == [], "the schedule's event promotes the key"
    world.server.calls.clear()
    world.reconcile()
    assert world.server.calls[0] == ("PATCH", SCAP + "/status"), "the held-back status goes first"
    assert target_writes(world.server) == [7, 0]
    # decided on the status that records the active write: the handback of what was given (the
    # zero write landed; no spec.handback), not "nothing was ever given"
    world.deliver("scaps", world.server.objects[SCAP])
    world.reconcile()
    status = world.server.objects[SCAP]["status"]
    complete = [c for c in status["conditions"] if c["type"] == "HandbackComplete"]
    assert status["phase"] == "Inactive" and complete[0]["reason"] == "ZeroWritten"


def test_no_write_reads_the_target_from_the_api_server(world: World) -> None:
    world.reconcile()
    closed = world.server.objects[SCHEDULE]
    closed["status"]["active"] = False
    world.deliver("ManualSchedule", world.server.put(SCHEDULE, closed))
    world.reconcile()
    assert target_writes(world.server) == [7, 0]
    assert ("GET", POOL) not in world.server.calls


def test_the_echo_of_our_own_zero_write_is_reconciled_in_the_later_lane(world: World) -> None:
    echo = _write_active_value_and_hold_its_echo(world)
    world.deliver("VirtualMachinePool", echo)
    world.reconcile()
    world.queued()
    closed = world.server.objects[SCHEDULE]
    closed["status"]["active"] = False
    world.deliver("ManualSchedule", world.server.put(SCHEDULE, closed))
    world.queued()
    world.reconcile()
    assert target_writes(world.server) == [7, 0]
    world.deliver("VirtualMachinePool", world.server.objects[POOL])
    assert world.mgr.queue.later() == [f"{NS}/cap"]
    assert len(world.mgr.queue) == 1


def test_the_status_written_after_a_boundary_is_parsed_then_so_the_next_boundary_parses_none(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    with_uid = copy.deepcopy(world.server.objects[SCAP])
    with_uid["metadata"]["uid"] = "0b5e"  # the memo keeps what it parsed per uid and version
    world.deliver("scaps", world.server.put(SCAP, with_uid))
    world.queued()
    world.reconcile()  # the open: the target write, its status held back
    assert target_writes(world.server) == [7]
    parsed: list[object] = []
    real = observations.parse_status

    def counted(raw: object) -> ScheduledCapacityStatus | None:
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(observations, "parse_status", counted)
    world.reconcile()  # the held-back status goes out, and its answer is parsed now
    assert parsed and world.server.objects[SCAP]["status"]["phase"] == "Active"
    world.deliver("scaps", world.server.objects[SCAP])
    parsed.clear()
    closed = world.server.objects[SCHEDULE]
    closed["status"]["active"] = False
    world.deliver("ManualSchedule", world.server.put(SCHEDULE, closed))
    world.reconcile()  # the close's target write decides on the written status, already parsed
    assert target_writes(world.server) == [7, 0]
    assert parsed == [], "the close parsed the status the open wrote again"


def test_the_schedules_published_next_flip_is_told_to_the_manager_as_a_write_due_then(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    told: list[tuple[str, object]] = []
    monkeypatch.setattr(world.mgr.elector, "expect_write", lambda partition, at: told.append((partition, at)))
    world.reconcile()
    assert told == [], "a schedule without nextTransitionTime tells nothing"
    published = world.server.objects[SCHEDULE]
    published["status"]["nextTransitionTime"] = "2126-03-04T17:30:00Z"
    world.deliver("ManualSchedule", world.server.put(SCHEDULE, published))
    world.queued()
    world.reconcile()
    assert told == [("agents", datetime(2126, 3, 4, 17, 30, tzinfo=timezone.utc))]
