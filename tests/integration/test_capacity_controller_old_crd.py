"""The reconciler's own field-path check holds when the installed CRD is older than the
controller: a ScheduledCapacity CRD without the path pattern and CEL rule (and no admission
policies) admits `metadata.labels.owner`, and the controller refuses to write it and says why.

Runs on its own control plane: replacing the session's ScheduledCapacity CRD with a weaker one
would change what every other test relies on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster import localrun
from fivespot.devcluster.build import cached_binaries, ensure_binaries
from fivespot.devcluster.clients import admin_client
from fivespot.devcluster.controlplane import ControlPlane
from fivespot.devcluster.kubectl import apply, wait_established
from fivespot.runtime import kube
from tests.integration.capacity_world import ControllerProcess, World, eventually, unique

SCAP_CRD = "scheduledcapacities.5spot.finos.org"


def strip_path_rules(node: Any) -> Any:
    """The CRD as an older release might have had it: no pattern, no CEL on any `path` field."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ("path", "drainedPath") and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k not in ("pattern", "x-kubernetes-validations")}
            out[key] = strip_path_rules(value)
        return out
    if isinstance(node, list):
        return [strip_path_rules(v) for v in node]
    return node


@pytest.fixture
def old_cluster(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def test_an_old_crd_admits_a_metadata_path_and_the_controller_refuses_it_and_says_why(
    old_cluster: ControlPlane, tmp_path: Path
) -> None:
    kubeconfig = old_cluster.kubeconfig
    out = tmp_path / "out"
    write_tree(compile_repo(localrun.EXAMPLE / "config").files, out)
    crd_file = out / "crds" / f"{SCAP_CRD}.yaml"
    crd = yaml.safe_load(crd_file.read_text())
    weakened = strip_path_rules(crd)
    path_schema = weakened["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["capacity"]["properties"]["path"]
    assert "pattern" not in path_schema and "x-kubernetes-validations" not in path_schema
    crd_file.write_text(yaml.safe_dump(weakened))
    apply(kubeconfig, localrun.CONSUMER_CRD)
    apply(kubeconfig, out / "crds")
    wait_established(kubeconfig, [SCAP_CRD, "virtualmachinepools.pools.agents.example.com"])
    apply(kubeconfig, out / "rbac")  # the controller's identity; no admission policies (old cluster)
    localrun.ensure_namespaces(kubeconfig, {"agents"})

    admin = admin_client(kubeconfig)
    world = World(admin)
    schedule, pool, name = unique("ms"), unique("pool"), unique("cap")
    world.pool(pool, warm=0)
    world.schedule(schedule, True)
    world.scap(name, schedule, pool, 3, capacity_path="metadata.labels.owner")  # admitted: old CRD

    process = ControllerProcess(
        localrun.controller_kubeconfig(kubeconfig, tmp_path / "sa.kubeconfig"),
        out / "bundle.json", unique("old-crd"), tmp_path / "controller.log").start()
    try:
        status = world.wait_phase(name, "Error", timeout=60)
        ready = world.condition(name, "Ready")
        assert ready["status"] == "False"
        assert ready["reason"] == "CapacityPathRejected"
        assert "spec.capacity.path" in ready["message"] and "metadata" in ready["message"]
        assert "Nothing is written" in ready["message"]
        assert "writtenValue" not in status
        meta = world.get_pool(pool)["metadata"]
        assert "labels" not in meta
        assert not [f for f in meta["managedFields"] if f["manager"] == "fivespot-capacity-controller"]
        assert not process.writes()
        # The Events follow the status write: wait for the Warning itself, not for any Event.
        eventually(lambda: any(
            e["type"] == "Warning" and e["reason"] == "Error"
            for e in kube.request(admin, "GET", "/apis/events.k8s.io/v1/namespaces/agents/events")["items"]
            if e.get("regarding", {}).get("name") == name), 30, "the Warning Event on the object")
    finally:
        process.terminate()
        admin.close()
