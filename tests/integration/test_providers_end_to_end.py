"""End to end with the capacity controller: an operator toggles a ManualSchedule's spec, the
manual provider (its own process and ServiceAccount) publishes status.active, and the capacity
controller (its own process and ServiceAccount) writes the target's capacity field. Nobody
writes a provider status by hand here."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from fivespot.devcluster import localrun
from fivespot.devcluster.clients import service_account_kubeconfig
from fivespot.runtime import kube
from tests.integration.capacity_world import MANUAL, ControllerProcess, World, eventually, path, unique

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundle(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return localrun.compile_and_install(kubeconfig, tmp_path_factory.mktemp("e2e") / "out")


@pytest.fixture(scope="module")
def capacity(kubeconfig: Path, bundle: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[ControllerProcess]:
    work = tmp_path_factory.mktemp("e2e-capacity")
    sa = localrun.controller_kubeconfig(kubeconfig, work / "capacity.kubeconfig")
    process = ControllerProcess(sa, bundle, unique("capacity-e2e"), work / "capacity.log").start()
    process.wait_leading("agents", "default")
    yield process
    process.terminate()


@pytest.fixture(scope="module")
def manual_provider(kubeconfig: Path, bundle: Path, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[subprocess.Popen[bytes]]:
    work = tmp_path_factory.mktemp("e2e-manual")
    sa = service_account_kubeconfig(kubeconfig, localrun.INSTALL_NAMESPACE,
                                    "fivespot-provider-manual", work / "manual.kubeconfig")
    with open(work / "manual.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "fivespot.controllers.spotschedules", "manual", "--bundle", str(bundle),
             "--kubeconfig", str(sa), "--identity", unique("manual-e2e"),
             "--lease-namespace", localrun.INSTALL_NAMESPACE, "--metrics-port", "0"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    yield process
    process.terminate()
    process.wait(30)


def test_toggling_a_manual_schedule_makes_the_capacity_controller_write_and_hand_back(
    capacity: ControllerProcess, manual_provider: subprocess.Popen[bytes], admin: client.ApiClient
) -> None:
    world = World(admin)
    schedule, pool, name = unique("desk"), unique("pool"), unique("cap")
    world.pool(pool)
    kube.request(admin, "POST", path(MANUAL), body={
        "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
        "metadata": {"name": schedule}, "spec": {"enabled": False}})
    world.scap(name, schedule, pool, active_value=6)
    world.wait_phase(name, "Inactive", timeout=90)  # the provider's first status came through
    assert world.warm(pool) == 0

    kube.merge_patch(admin, path(MANUAL, schedule), {"spec": {"enabled": True}})
    eventually(lambda: world.warm(pool) == 6, 60, "warmReplicas 6 after enabling")
    world.wait_phase(name, "Active")

    kube.merge_patch(admin, path(MANUAL, schedule), {"spec": {"enabled": False}})
    eventually(lambda: world.warm(pool) == 0, 60, "warmReplicas 0 after disabling")
    world.wait_phase(name, "Inactive")
    published = kube.request(admin, "GET", path(MANUAL, schedule))["status"]
    assert published["active"] is False and published["observedGeneration"] == 3
    assert manual_provider.poll() is None, "the provider kept running"
