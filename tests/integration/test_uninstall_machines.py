"""`fivespot uninstall` of an output that runs the machine controller, against a real API server:
with --delete-crds the ScheduledMachines are deleted first, while the controller still runs, so
each leaves through its finalizer (its machine drained out of the cluster) before the controller
and the CRD go; when they cannot leave in time nothing else is deleted and the error says why;
without --delete-crds they are kept, and the output says what that means for a later delete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fivespot.runtime import kube
from tests.integration.capacity_world import eventually
from tests.integration.machine_world import NS, SM, World, config_with, machine_world

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_uninstall_with_delete_crds_retires_the_scheduled_machines_before_their_controller(
        tmp_path: Path) -> None:
    with machine_world(tmp_path, config_with(tmp_path, "", keep_builtin=True)) as world:
        _a_scheduled_machine(world, "rack-1")
        world.controller.kill()  # no controller: the machines cannot leave
        refused = _uninstall(world, "--delete-crds", "--timeout", "3")
        assert refused.returncode == 1
        assert "1 ScheduledMachines are still leaving after 3s (trading/rack-1)" in refused.stderr
        assert "Nothing else was deleted" in refused.stderr
        assert _crd_served(world), "the CRD stays while a machine is still leaving"
        world.controller.start()
        world.controller.wait_leading("default")
        eventually(lambda: not _exists(world, "rack-1"), 60,
                   "the deletion completed once the controller is back")
        _a_scheduled_machine(world, "rack-2")
        done = _uninstall(world, "--delete-crds")
        assert done.returncode == 0, done.stderr
        assert "deleting 1 ScheduledMachines first, while the machine controller runs" in done.stdout
        eventually(lambda: not _crd_served(world), 60, "the CRD deleted")


def test_uninstall_without_delete_crds_keeps_the_scheduled_machines_and_says_what_that_means(
        tmp_path: Path) -> None:
    with machine_world(tmp_path, config_with(tmp_path, "", keep_builtin=True)) as world:
        _a_scheduled_machine(world, "rack-1")
        kept = _uninstall(world)
        assert kept.returncode == 0, kept.stderr
        assert "kept 1 ScheduledMachines: with the machine controller uninstalled" in kept.stdout
        assert world.status("rack-1"), "still there"


def _a_scheduled_machine(world: World, name: str) -> None:
    world.scheduled_machine(name, "no-such-schedule")
    eventually(lambda: "5spot.finos.org/scheduledmachine" in (kube.request(
        world.api, "GET", kube.resource_path(*SM, namespace=NS, name=name))["metadata"]
        .get("finalizers") or []), 60, "the finalizer")


def _uninstall(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fivespot", "uninstall", str(world.out),
                           "--kubeconfig", str(world.kubeconfig), *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def _crd_served(world: World) -> bool:
    try:
        kube.request(world.api, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                     "scheduledmachines.5spot.finos.org")
    except kube.ApiError as error:
        if error.not_found:
            return False
        raise
    return True


def _exists(world: World, name: str) -> bool:
    try:
        kube.request(world.api, "GET", kube.resource_path(*SM, namespace=NS, name=name))
    except kube.ApiError as error:
        if error.not_found:
            return False
        raise
    return True
