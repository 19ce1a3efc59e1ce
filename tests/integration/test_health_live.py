"""Health of live objects: the capacity controller (its own process and ServiceAccount) drives
ScheduledCapacities on the real API server into each phase, and each object as the API server
returns it is judged by the real kstatus library (tools/kstatus, what Flux `wait` runs) and by
the emitted Argo CD health Lua under Lua 5.1 — both as the docs' table says (docs/operations/health.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.compiler.emit import health
from fivespot.devcluster import localrun
from fivespot.runtime import kube
from tests import kstatus
from tests.integration.capacity_world import SCAP, ControllerProcess, World, eventually, path, unique
from tests.integration.test_capacity_controller import _in_phase
from tests.unit.test_health_lua import ARGO_OF_KSTATUS, argo_health

pytestmark = pytest.mark.integration

EXPECTED = {
    # phase: (kstatus, Argo CD)
    "Active": ("Current", "Healthy"),
    "Inactive": ("Current", "Healthy"),  # a closed window is the normal, settled state
    "HandingBack": ("InProgress", "Progressing"),
    "Pending": ("InProgress", "Progressing"),
    "HandbackTimedOut": ("Failed", "Degraded"),
    "Disabled": ("Current", "Healthy"),
    "Terminated": ("Current", "Healthy"),
}


@pytest.fixture(scope="module")
def controller(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    work = tmp_path_factory.mktemp("health-live")
    bundle = localrun.compile_and_install(kubeconfig, work / "out")
    sa = localrun.controller_kubeconfig(kubeconfig, work / "controller.kubeconfig")
    process = ControllerProcess(sa, bundle, unique("health-it"), work / "controller.log").start()
    process.wait_leading("agents", "default")
    yield process
    process.terminate()


def _switched_off(world: World, admin: client.ApiClient, field: str, value: bool, phase: str) -> str:
    name, _, _ = _in_phase(world, "Inactive")
    kube.merge_patch(admin, path(SCAP, name), {"spec": {field: value}})
    world.wait_phase(name, phase)
    return name


def test_kstatus_and_argo_cd_read_every_live_phase_as_the_readme_says(
        controller: ControllerProcess, admin: client.ApiClient) -> None:
    world = World(admin)
    names = {phase: _in_phase(world, phase)[0]
             for phase in ("Active", "HandingBack", "HandbackTimedOut", "Inactive", "Pending")}
    names["Disabled"] = _switched_off(world, admin, "enabled", False, "Disabled")
    names["Terminated"] = _switched_off(world, admin, "killSwitch", True, "Terminated")

    def settled() -> dict[str, dict[str, Any]] | None:
        objects = {phase: world.get_scap(name) for phase, name in names.items()}
        generations_seen = all(o.get("status", {}).get("observedGeneration") == o["metadata"]["generation"]
                               for o in objects.values())
        return objects if generations_seen else None

    time.sleep(1.0)
    objects = eventually(settled, 30, "every status at its generation")
    phases = {phase: obj["status"]["phase"] for phase, obj in objects.items()}
    assert phases == {phase: phase for phase in names}
    verdicts = dict(zip(objects, kstatus.verdicts(list(objects.values())), strict=True))
    for phase, obj in objects.items():
        argo, message = argo_health(health.KSTATUS_LUA, obj)
        assert (verdicts[phase], argo) == EXPECTED[phase], (phase, message, obj["status"]["conditions"])
        assert ARGO_OF_KSTATUS[verdicts[phase]] == argo


def test_a_spec_edit_reads_in_progress_until_the_controller_observes_it(
        controller: ControllerProcess, admin: client.ApiClient) -> None:
    world = World(admin)
    name, _, _ = _in_phase(world, "Active")
    edited = kube.merge_patch(admin, path(SCAP, name), {"spec": {"capacity": {"activeValue": 5}}})
    if edited.get("status", {}).get("observedGeneration") != edited["metadata"]["generation"]:
        assert kstatus.verdicts([edited]) == ["InProgress"]
        assert argo_health(health.KSTATUS_LUA, edited)[0] == "Progressing"
    caught_up = eventually(lambda: (o := world.get_scap(name))["status"].get("observedGeneration")
                           == o["metadata"]["generation"] and o, 30, "the edit observed")
    assert kstatus.verdicts([caught_up]) == ["Current"]
