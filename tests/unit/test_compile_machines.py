"""Compiling a MachineProvisioning: the machine controller's component, identity and exact RBAC,
and the full ScheduledMachine CRD; without one, nothing of it (the golden example proves the
CRD stays as it was)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.compiler.diagnostics import CompileError
from fivespot.compiler.pipeline import compile_repo

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trading-desk" / "config"
SANDBOX = ROOT / "examples" / "agent-sandbox" / "config"


def load(files: dict[str, bytes], path: str) -> Any:
    return yaml.safe_load(files[path])


def rules(files: dict[str, bytes], path: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    return [(r["apiGroups"][0], tuple(r["resources"]), tuple(r.get("resourceNames", ())),
             tuple(r["verbs"])) for r in load(files, path)["rules"]]


def test_the_trading_desk_example_compiles_a_machine_controller_and_no_capacity_side() -> None:
    files = compile_repo(EXAMPLE).files
    assert "workloads/fivespot-machine-controller.deployment.yaml" in files
    deployment = load(files, "workloads/fivespot-machine-controller.deployment.yaml")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["controller", "machine", "--bundle", "/etc/fivespot/bundle.json"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "fivespot-machine-controller"
    assert not any("capacity" in path or "webhook" in path for path in files)


def test_the_machine_identity_may_create_delete_and_hold_objects_only_in_the_clusters_namespace() -> None:
    files = compile_repo(EXAMPLE).files
    assert rules(files, "rbac/trading/fivespot-machine-controller-capi.role.yaml") == [
        ("", ("secrets",), ("desk-cluster-kubeconfig",), ("get",)),
        ("5spot.finos.org", ("scheduledmachines",), (), ("patch",)),
        ("bootstrap.cluster.x-k8s.io", ("kubeadmconfigs",), (), ("create", "delete", "get")),
        ("cluster.x-k8s.io", ("machines",), (), ("create", "delete", "get", "list", "watch")),
        ("infrastructure.cluster.x-k8s.io", ("devmachines",), (), ("create", "delete", "get")),
    ]
    # Its finalizer goes on ScheduledMachines in the clusters' namespaces only (above).
    assert rules(files, "rbac/fivespot-machine-controller.clusterrole.yaml") == [
        ("5spot.finos.org", ("scheduledmachines",), (), ("get", "list", "watch")),
        ("5spot.finos.org", ("scheduledmachines/status",), (), ("get", "patch", "update")),
        ("events.k8s.io", ("events",), (), ("create", "patch")),
        ("spotschedules.5spot.finos.org", ("manualschedules",), (), ("get", "list", "watch")),
    ]


def test_the_scheduled_machine_crd_is_the_full_one_with_the_allowed_kinds_pinned() -> None:
    files = compile_repo(EXAMPLE).files
    crd = load(files, "crds/scheduledmachines.5spot.finos.org.yaml")
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["required"]) == {"bootstrapSpec", "clusterName", "infrastructureSpec", "schedule"}
    rule = spec["properties"]["infrastructureSpec"]["x-kubernetes-validations"][0]
    assert rule["rule"] == ("(self.apiVersion.startsWith('infrastructure.cluster.x-k8s.io/') && "
                            "self.kind == 'DevMachine')")
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Phase", "Ready", "InSchedule", "Enabled", "Schedule", "KillSwitch", "Node", "Age"]
    assert "x-kubernetes-preserve-unknown-fields" not in spec


def test_with_both_patterns_the_capacity_identity_gets_no_capi_verb_and_the_machine_one_no_capacity_verb(
        tmp_path: Path) -> None:
    for source in SANDBOX.glob("*.yaml"):
        shutil.copy(source, tmp_path / source.name)
    shutil.copy(EXAMPLE / "machines.yaml", tmp_path / "machines.yaml")
    files = compile_repo(tmp_path).files
    capacity = rules(files, "rbac/fivespot-capacity-controller.clusterrole.yaml")
    assert not any("cluster.x-k8s.io" in group or resource == ("secrets",)
                   for group, resource, _, _ in capacity)
    machine = [r for path in files if "fivespot-machine-controller" in path and path.endswith("role.yaml")
               for r in rules(files, path)]
    assert not [res for _, res, _, _ in machine if "scheduledcapacities" in res]
    assert not any(g == "pools.agents.example.com" or "patch" in v and g != "5spot.finos.org"
                   and g != "events.k8s.io" for g, _, _, v in machine)


def test_a_second_machine_provisioning_is_refused_on_its_line(tmp_path: Path) -> None:
    for source in EXAMPLE.glob("*.yaml"):
        shutil.copy(source, tmp_path / source.name)
    shutil.copy(EXAMPLE / "machines.yaml", tmp_path / "more.yaml")
    (tmp_path / "more.yaml").write_text((tmp_path / "more.yaml").read_text().replace("name: capi", "name: other"))
    with pytest.raises(CompileError) as error:
        compile_repo(tmp_path)
    assert any("at most one MachineProvisioning" in d.message for d in error.value.diagnostics)
