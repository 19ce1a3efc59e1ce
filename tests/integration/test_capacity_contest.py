"""Another writer of the governed field, against the real API server: a second field manager
rewrites it with a forced server-side apply (as Flux's kustomize-controller does at every
interval), and an HPA arrives on a governed object.

The counts come from the API server's own record — a watch of the pools from a known
resourceVersion — never from the controller's logs: every revision at which spec.warmReplicas
went back to the active value is a write of the controller (the only other writer here sets 1).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.controllers.capacity.contest import MAX_WRITES_PER_MINUTE
from fivespot.devcluster import localrun
from fivespot.runtime import kube
from tests.integration.capacity_world import (
    NS,
    POOLS,
    ControllerProcess,
    History,
    World,
    current_revision,
    eventually,
    path,
    unique,
)

pytestmark = pytest.mark.integration

OTHER = "kustomize-controller"
ACTIVE = 7


@pytest.fixture(scope="module")
def controller(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    work = tmp_path_factory.mktemp("contest")
    bundle = localrun.compile_and_install(kubeconfig, work / "out")
    sa = localrun.controller_kubeconfig(kubeconfig, work / "controller.kubeconfig")
    process = ControllerProcess(sa, bundle, unique("contest-it"), work / "controller.log").start()
    process.wait_leading("agents", "default", timeout=40)
    yield process
    process.terminate()


@pytest.fixture
def world(admin: client.ApiClient) -> World:
    return World(admin)


def apply_as_other(admin: client.ApiClient, pool: str, warm: int) -> None:
    """What kustomize-controller does with git's value: a forced server-side apply."""
    kube.request(admin, "PATCH", path(POOLS, pool), query={"fieldManager": OTHER, "force": "true"},
                 body={"apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
                       "metadata": {"name": pool}, "spec": {"warmReplicas": warm}},
                 content_type="application/apply-patch+yaml")


def restorations(history: History, pool: str) -> list[float]:
    """When (watch arrival order aside: the object's revision order) the field went back to the
    active value from another value: each is one write of the controller."""
    found: list[float] = []
    last: object = None
    for rv, kind, obj in history.of(pool):
        value = (obj.get("spec") or {}).get("warmReplicas")
        if kind != "DELETED" and value == ACTIVE and last not in (None, ACTIVE):
            found.append(float(rv))
        last = value
    return found


def _contested(world: World, name: str) -> dict[str, Any]:
    return world.condition(name, "FieldContested")


def _events(admin: client.ApiClient, name: str, reason: str) -> list[dict[str, Any]]:
    items = kube.request(admin, "GET", path(("events.k8s.io", "v1", "events")))["items"]
    return [e for e in items if (e.get("regarding") or {}).get("name") == name and e.get("reason") == reason]


def test_a_forced_rewrite_is_undone_at_once_then_reported_naming_the_manager_backed_off_and_forgotten(
        controller: ControllerProcess, world: World, admin: client.ApiClient) -> None:
    tag = unique("contest")
    pool, schedule, name = f"{tag}-pool", f"{tag}-open", f"{tag}-cap"
    history = History(admin, POOLS, current_revision(admin, POOLS))
    try:
        world.pool(pool)
        world.schedule(schedule, True)
        world.scap(name, schedule, pool, ACTIVE)
        world.wait_phase(name, "Active")
        eventually(lambda: world.warm(pool) == ACTIVE, 30, "the active value")

        # One rewrite, as one tenant sync: put back within a second, and reported.
        started = time.monotonic()
        apply_as_other(admin, pool, 1)
        eventually(lambda: world.warm(pool) == ACTIVE, 5, "the first repair")
        assert time.monotonic() - started < 1.0
        contested = eventually(lambda: _contested(world, name) or None, 10, "FieldContested")
        assert (contested["status"], contested["reason"]) == ("True", "RewrittenByAnotherFieldManager")
        assert contested["message"].startswith(f"field manager {OTHER} rewrote spec.warmReplicas of "
                                               f"VirtualMachinePool.pools.agents.example.com {NS}/{pool}")
        assert "Take the field out of the manifest in git" in contested["message"]
        eventually(lambda: _events(admin, name, "RewrittenByAnotherFieldManager"), 10, "the Warning event")

        # A writer that re-applies git's value five times a second for 25 s.
        stop = threading.Event()

        def fight() -> None:
            while not stop.is_set():
                apply_as_other(admin, pool, 1)
                stop.wait(0.2)

        fighter = threading.Thread(target=fight, daemon=True)
        before = len(restorations(history, pool))
        fighter.start()
        time.sleep(25)
        stop.set()
        fighter.join(10)
        during = len(restorations(history, pool)) - before
        # at most MAX_WRITES_PER_MINUTE in any minute (this fight is inside one minute of the
        # first repair, which counts too)
        assert 1 <= during <= MAX_WRITES_PER_MINUTE - 1, during
        status = world.status(name)
        assert status["contest"]["manager"] == OTHER and status["contest"]["repairs"] >= 3

        # The other writer stopped: the field is put back (the last repair within the cap of the
        # backoff), and once it stays put for the quiet time the contest is forgotten.
        eventually(lambda: world.warm(pool) == ACTIVE, 90, "the last repair")
        eventually(lambda: not _contested(world, name) and "contest" not in world.status(name), 150,
                   "FieldContested cleared")
        assert world.phase(name) == "Active"
    finally:
        history.stop()


def test_an_hpa_arriving_on_a_governed_object_makes_the_scheduled_capacity_write_nothing_and_say_so(
        controller: ControllerProcess, world: World, admin: client.ApiClient) -> None:
    from fivespot.api.fieldgovernance import autoscaled_message, claim_of, writer_of

    tag = unique("hpa")
    pool, schedule, name, hpa = f"{tag}-pool", f"{tag}-open", f"{tag}-cap", f"{tag}-hpa"
    world.pool(pool)
    world.schedule(schedule, True)
    world.scap(name, schedule, pool, ACTIVE)
    world.wait_phase(name, "Active")
    body = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": hpa, "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                        "kind": "VirtualMachinePool", "name": pool},
                     "minReplicas": 1, "maxReplicas": 4}}
    kube.request(admin, "POST", path(("autoscaling", "v2", "horizontalpodautoscalers")), body=body)
    world.wait_phase(name, "Error")
    conflict = world.condition(name, "FieldGovernanceConflict")
    writer = writer_of(body)
    claim = claim_of(world.get_scap(name))
    assert writer is not None and claim is not None
    assert (conflict["status"], conflict["reason"], conflict["message"]) == (
        "True", "FieldScaledByAutoscaler", autoscaled_message(claim, writer))
    # It writes nothing now: a rewrite stays.
    apply_as_other(admin, pool, 2)
    time.sleep(2)
    assert world.warm(pool) == 2
    # The autoscaler gone, the ScheduledCapacity governs again.
    kube.request(admin, "DELETE", path(("autoscaling", "v2", "horizontalpodautoscalers"), hpa))
    world.wait_phase(name, "Active")
    eventually(lambda: world.warm(pool) == ACTIVE, 30, "the active value again")
