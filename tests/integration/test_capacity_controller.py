"""The capacity controller end to end against the real API server: the compiled example
installed, the controller running as its own ServiceAccount (compiled RBAC) in a separate
process, provider status written directly as a provider would publish it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.devcluster import localrun
from fivespot.runtime import kube
from tests.integration.capacity_world import (
    MANUAL,
    SCAP,
    ControllerProcess,
    History,
    World,
    current_revision,
    eventually,
    path,
    unique,
)


@pytest.fixture(scope="module")
def installed(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(bundle.json, the controller ServiceAccount's kubeconfig)."""
    work = tmp_path_factory.mktemp("capacity")
    bundle = localrun.compile_and_install(kubeconfig, work / "out")
    return bundle, localrun.controller_kubeconfig(kubeconfig, work / "controller.kubeconfig")


@pytest.fixture(scope="module")
def controller(installed: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[ControllerProcess]:
    bundle, sa_kubeconfig = installed
    log = tmp_path_factory.mktemp("capacity-log") / "controller.log"
    process = ControllerProcess(sa_kubeconfig, bundle, unique("capacity-it"), log).start()
    process.wait_leading("agents", "default")
    yield process
    process.terminate()


@pytest.fixture
def world(admin: client.ApiClient) -> World:
    return World(admin)


def activated(world: World, *, active_value: int = 7, handback: dict[str, str] | None = None,
              in_use: int | None = None, node: str | None = None) -> tuple[str, str, str]:
    """A pool, an active schedule and a ScheduledCapacity that is Active: (scap, schedule, pool)."""
    name, schedule, pool = unique("cap"), unique("ms"), unique("pool")
    world.pool(pool, in_use=in_use)
    world.schedule(schedule, True)
    world.scap(name, schedule, pool, active_value, handback=handback, node=node)
    world.wait_phase(name, "Active")
    assert world.warm(pool) == active_value
    return name, schedule, pool


def test_schedule_on_writes_the_active_value_and_reports_active(
    controller: ControllerProcess, world: World
) -> None:
    name, _, pool = activated(world, active_value=9)
    status = world.status(name)
    assert status["writtenValue"] == 9
    assert world.condition(name, "Ready")["status"] == "True"
    assert world.condition(name, "CapacityWritten")["status"] == "True"
    fields = world.get_pool(pool)["metadata"]["managedFields"]
    ours = [f for f in fields if f["manager"] == "fivespot-capacity-controller"]
    assert len(ours) == 1 and ours[0]["operation"] == "Update"
    assert ours[0]["fieldsV1"] == {"f:spec": {"f:warmReplicas": {}}}, "only the one field is ours"


def test_schedule_off_writes_zero_then_the_drained_counter_completes_the_handback_on_its_event(
    controller: ControllerProcess, world: World
) -> None:
    name, schedule, pool = activated(world, handback={"drainedPath": "status.inUse", "timeout": "5m"},
                                     in_use=3)
    world.set_active(schedule, False)
    status = world.wait_phase(name, "HandingBack")
    assert world.warm(pool) == 0
    assert status["observedDrainedValue"] == 3
    assert status["handbackDeadline"]
    assert world.condition(name, "HandbackComplete")["reason"] == "AwaitingDrain"
    drained_at = time.monotonic()
    world.set_in_use(pool, 0)
    world.wait_phase(name, "Inactive")
    # The only clocks that could complete it otherwise are the 5m handback deadline and the 300s
    # resync; 10s rules both out with room for a loaded machine (the latency itself is measured
    # in bench/capacity, on a quiet one).
    assert time.monotonic() - drained_at < 10.0, "drain counter 0 -> Inactive is event-driven"
    assert world.condition(name, "HandbackComplete")["status"] == "True"


def test_a_close_with_the_counter_already_at_zero_writes_the_status_once_straight_to_inactive(
    controller: ControllerProcess, world: World, admin: client.ApiClient
) -> None:
    name, schedule, pool = activated(world, handback={"drainedPath": "status.inUse", "timeout": "5m"},
                                     in_use=0)
    history = History(admin, SCAP, current_revision(admin, SCAP))
    try:
        world.set_active(schedule, False)
        world.wait_phase(name, "Inactive")
        time.sleep(2.0)  # room for a second status write, had one been sent
        revisions = history.of(name)
    finally:
        history.stop()
    assert world.warm(pool) == 0
    phases = [(obj.get("status") or {}).get("phase") for _, _, obj in revisions]
    assert phases == ["Inactive"], "one status patch per object per flip, not HandingBack first"
    assert world.condition(name, "HandbackComplete")["reason"] == "Drained"


def test_an_undrained_handback_times_out_and_holds_zero_without_escalating(
    controller: ControllerProcess, world: World
) -> None:
    name, schedule, pool = activated(world, handback={"drainedPath": "status.inUse", "timeout": "2s"},
                                     in_use=4)
    world.set_active(schedule, False)
    world.wait_phase(name, "HandingBack")
    status = world.wait_phase(name, "HandbackTimedOut")
    assert world.warm(pool) == 0
    assert world.get_pool(pool)["status"]["inUse"] == 4, "nothing is forced"
    assert status["writtenValue"] == 0
    assert world.condition(name, "HandbackComplete")["reason"] == "HandbackTimedOut"


def test_an_unreadable_counter_is_not_drained(controller: ControllerProcess, world: World) -> None:
    name, schedule, pool = activated(world, handback={"drainedPath": "status.inUse", "timeout": "5m"})
    world.set_active(schedule, False)
    world.wait_phase(name, "HandingBack")
    eventually(lambda: world.condition(name, "HandbackComplete").get("reason") == "DrainCounterUnreadable",
               what="HandbackComplete=False/DrainCounterUnreadable")
    time.sleep(1.0)
    assert world.phase(name) == "HandingBack"
    assert world.condition(name, "HandbackComplete")["reason"] == "DrainCounterUnreadable"


def test_reopening_mid_handback_writes_the_active_value_again(
    controller: ControllerProcess, world: World
) -> None:
    name, schedule, pool = activated(world, handback={"drainedPath": "status.inUse", "timeout": "5m"},
                                     in_use=2)
    world.set_active(schedule, False)
    world.wait_phase(name, "HandingBack")
    assert world.warm(pool) == 0
    world.set_active(schedule, True)
    world.wait_phase(name, "Active")
    assert world.warm(pool) == 7
    assert "handbackDeadline" not in world.status(name)


def test_a_scheduled_machine_on_the_node_forces_zero_and_its_removal_recovers(
    controller: ControllerProcess, world: World
) -> None:
    node = unique("worker")
    name, schedule, pool = activated(world, node=node)
    assert world.status(name)["governedNode"] == node
    machine = unique("sm")
    world.machine(machine, node, schedule)
    eventually(lambda: world.condition(name, "HostGovernanceConflict").get("status") == "True",
               30, "HostGovernanceConflict=True")
    eventually(lambda: world.warm(pool) == 0, 30, "capacity driven to 0")
    # No handback configured: complete once 0 landed (the status follows the write a moment later).
    world.wait_phase(name, "Inactive")
    world.delete_machine(machine)
    world.wait_phase(name, "Active")
    assert world.warm(pool) == 7
    assert world.condition(name, "HostGovernanceConflict")["status"] == "False"


def test_a_machine_that_exists_first_means_the_active_value_is_never_written(
    controller: ControllerProcess, world: World
) -> None:
    node, schedule, pool, name = unique("worker"), unique("ms"), unique("pool"), unique("cap")
    world.schedule(schedule, True)
    world.machine(unique("sm"), node, schedule)
    world.pool(pool, warm=0)
    world.scap(name, schedule, pool, 5, node=node)
    eventually(lambda: world.condition(name, "HostGovernanceConflict").get("status") == "True",
               30, "conflict")
    fields = world.get_pool(pool)["metadata"]["managedFields"]
    assert not [f for f in fields if f["manager"] == "fivespot-capacity-controller"], \
        "the field already read 0, so nothing at all was written"
    assert world.warm(pool) == 0


def test_a_missing_target_is_a_condition_and_is_never_created(
    controller: ControllerProcess, world: World
) -> None:
    name, schedule, pool = unique("cap"), unique("ms"), unique("pool")
    world.schedule(schedule, True)
    world.scap(name, schedule, pool)
    eventually(lambda: world.condition(name, "TargetResolved").get("reason") == "TargetNotFound",
               30, "TargetResolved=False/TargetNotFound")
    assert world.phase(name) == "Pending"
    with pytest.raises(kube.ApiError) as missing:
        world.get_pool(pool)
    assert missing.value.not_found
    world.pool(pool, warm=0)  # creating it later is picked up by the target watch
    world.wait_phase(name, "Active")
    assert world.warm(pool) == 7


def test_a_provider_that_is_not_ready_holds_the_last_known_state(
    controller: ControllerProcess, world: World, admin: client.ApiClient
) -> None:
    name, schedule, pool = activated(world)
    kube.merge_patch(admin, path(MANUAL, schedule, "status"), {"status": {
        "active": False, "conditions": [{"type": "Ready", "status": "False", "reason": "Stale",
                                         "message": "x", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    eventually(lambda: world.condition(name, "SpotScheduleResolved").get("reason") == "ScheduleNotReady",
               30, "SpotScheduleResolved=False/ScheduleNotReady")
    assert world.phase(name) == "Active" and world.warm(pool) == 7


PHASES = ("Active", "HandingBack", "HandbackTimedOut", "Inactive", "Pending")


def _in_phase(world: World, phase: str) -> tuple[str, str, str]:
    handback = {"drainedPath": "status.inUse", "timeout": "2s" if phase == "HandbackTimedOut" else "10m"}
    if phase == "Pending":
        name, schedule, pool = unique("cap"), unique("ms"), unique("pool")
        world.schedule(schedule, True)
        world.scap(name, schedule, pool, handback=handback)
        eventually(lambda: world.condition(name, "TargetResolved").get("reason") == "TargetNotFound", 30,
                   "Pending")
        return name, schedule, pool
    name, schedule, pool = activated(world, handback=handback, in_use=0 if phase == "Inactive" else 1)
    if phase != "Active":
        world.set_active(schedule, False)
        world.wait_phase(name, phase)
    return name, schedule, pool


def _snapshot(world: World, objects: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
    found = {}
    for phase, (name, _, pool) in objects.items():
        scap = world.get_scap(name)
        target: Any = None
        if phase != "Pending":
            meta = world.get_pool(pool)["metadata"]
            ours = [f["time"] for f in meta["managedFields"] if f["manager"] == "fivespot-capacity-controller"]
            target = (meta["generation"], ours)
        found[phase] = (scap["metadata"]["resourceVersion"], scap["status"], target)
    return found


def _settled(world: World, objects: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
    """The snapshot once nothing in it changed for 2s: a status write still in flight is waited
    for (a fixed pause is not enough on a loaded machine), and a late one is still compared."""
    last = _snapshot(world, objects)
    steady_since = time.monotonic()
    deadline = steady_since + 60
    while time.monotonic() - steady_since < 2.0:
        assert time.monotonic() < deadline, f"the objects never settled: {last!r}"
        time.sleep(0.25)
        now = _snapshot(world, objects)
        if now != last:
            last, steady_since = now, time.monotonic()
    return last


def test_a_restart_in_every_phase_replays_nothing_and_loses_nothing(
    controller: ControllerProcess, world: World
) -> None:
    objects = {phase: _in_phase(world, phase) for phase in PHASES}
    before = _settled(world, objects)

    controller.kill()
    # While the controller is down the world moves on in two places...
    _, active_schedule, active_pool = objects["Active"]
    world.set_active(active_schedule, False)
    _, _, draining_pool = objects["HandingBack"]
    world.set_in_use(draining_pool, 0)
    # ...and not at all everywhere else.
    controller.start()
    controller.wait_leading("agents")
    world.wait_phase(objects["Active"][0], "HandingBack")
    assert world.warm(active_pool) == 0, "the flip made while down is acted on"
    world.wait_phase(objects["HandingBack"][0], "Inactive")
    time.sleep(1.5)
    after = _settled(world, objects)
    for phase in ("HandbackTimedOut", "Inactive", "Pending"):
        assert after[phase] == before[phase], f"{phase}: a restart must not write anything"
    assert after["HandingBack"][1]["handbackStartTime"] == before["HandingBack"][1]["handbackStartTime"]
    assert after["HandingBack"][2] == before["HandingBack"][2], "0 was already there: no target write"
    assert after["Active"][2][0] == before["Active"][2][0] + 1, "exactly one write: the zero"


def test_probes_and_metrics_are_served(controller: ControllerProcess) -> None:
    assert localrun.http_get(controller.port, "/healthz") == (200, "ok\n")
    assert localrun.http_get(controller.port, "/readyz") == (200, "ok\n")
    status, body = localrun.http_get(controller.port, "/metrics")
    assert status == 200
    for name in ("fivespot_reconcile_duration_seconds", "fivespot_workqueue_depth", "fivespot_is_leader",
                 "fivespot_writes_total", "fivespot_handback_timeouts_total",
                 "fivespot_host_governance_conflicts_total", "fivespot_watch_restarts_total"):
        assert name in body, name

