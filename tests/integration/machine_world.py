"""A management control plane for ScheduledMachine tests that need no workload cluster: the
Cluster API CRDs, a config repo (the trading-desk example, with what a test adds) compiled and
installed, and the machine controller running as its own ServiceAccount."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from fivespot.devcluster import localrun
from fivespot.devcluster.clients import admin_client, service_account_kubeconfig
from fivespot.devcluster.kubectl import apply, wait_established
from fivespot.runtime import kube
from tests.integration.capacity_world import ControllerProcess, eventually, unique
from tests.integration.conftest import own_control_plane

ROOT = Path(__file__).resolve().parents[2]
TRADING_DESK = ROOT / "examples" / "trading-desk" / "config"
CAPI_CRDS = Path(__file__).parent / "testdata" / "cluster-api"
NS = "trading"
SM = ("5spot.finos.org", "v1beta1", "scheduledmachines")
MACHINES = ("cluster.x-k8s.io", "v1beta2", "machines")
MANUAL = ("spotschedules.5spot.finos.org", "v1alpha1", "manualschedules")


@dataclass
class World:
    kubeconfig: Path
    api: client.ApiClient
    cluster: str
    out: Path
    controller: ControllerProcess
    identity: Path
    """The machine controller's ServiceAccount kubeconfig (for a test's own replicas)."""

    def scheduled_machine(self, name: str, schedule: str, cluster: str | None = None) -> None:
        """A ScheduledMachine in `NS` on `cluster` (else the desk cluster), following
        ManualSchedule `schedule`."""
        kube.request(self.api, "POST", kube.resource_path(*SM, namespace=NS), body={
            "apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": name},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": schedule},
                     "clusterName": cluster or self.cluster,
                     "bootstrapSpec": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                                       "kind": "KubeadmConfig", "spec": {"format": "cloud-config"}},
                     "infrastructureSpec": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                            "kind": "DevMachine",
                                            "spec": {"backend": {"docker": {}}}}}})

    def status(self, name: str) -> dict[str, Any]:
        return dict(kube.request(self.api, "GET", kube.resource_path(*SM, namespace=NS, name=name))
                    .get("status") or {})

    def wait_phase(self, name: str, phase: str) -> dict[str, Any]:
        return eventually(lambda: (s := self.status(name)).get("phase") == phase and s, 60,
                          f"{name} {phase}")

    def machine(self, name: str) -> dict[str, Any] | None:
        try:
            return kube.request(self.api, "GET", kube.resource_path(*MACHINES, namespace=NS,
                                                                    name=name))
        except kube.ApiError as error:
            if error.not_found:
                return None
            raise


def schedule(api: client.ApiClient, name: str, active: bool | None) -> None:
    """ManualSchedule `name` in `NS`, and (unless `active` is None) its provider's answer."""
    try:
        kube.request(api, "POST", kube.resource_path(*MANUAL, namespace=NS), body={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
            "metadata": {"name": name}, "spec": {"enabled": bool(active)}})
    except kube.ApiError as error:
        if not error.conflict:
            raise
    if active is not None:
        publish(api, name, active)


def publish(api: client.ApiClient, name: str, active: bool, ready: str = "True") -> None:
    """What the ManualSchedule provider would publish (written directly, as the admin)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kube.merge_patch(api, kube.resource_path(*MANUAL, namespace=NS, name=name, subresource="status"),
                     {"status": {"active": active, "observedGeneration": 1,
                                 "lastTransitionTime": stamp,
                                 "conditions": [{"type": "Ready", "status": ready,
                                                 "reason": "Reconciled" if ready == "True" else "Stale",
                                                 "message": "test", "lastTransitionTime": stamp}]}})


def join_node(mgmt: client.ApiClient, wl: client.ApiClient | None, machine: str, node: str) -> None:
    """CAPI's part: the Node exists in the workload cluster `wl` (None: a workload cluster the
    controller will not reach), and the Machine's nodeRef says so."""
    if wl is not None:
        kube.request(wl, "POST", "/api/v1/nodes", body={"metadata": {"name": node}})
    kube.merge_patch(mgmt, kube.resource_path(*MACHINES, namespace=NS, name=machine,
                                              subresource="status"),
                     {"status": {"nodeRef": {"name": node}}})


def config_with(tmp_path: Path, providers: str, *, keep_builtin: bool = False) -> Path:
    """The trading-desk example (Platform, MachineProvisioning for trading/desk-cluster), with
    these documents instead of, or beside, its ScheduleProvider (the built-in ManualSchedule)."""
    config = tmp_path / "config"
    shutil.copytree(TRADING_DESK, config)
    if not keep_builtin:
        (config / "providers.yaml").unlink()
    (config / "added.yaml").write_text(providers)
    return config


@contextmanager
def machine_world(work: Path, config: Path, *, leading: bool = True) -> Iterator[World]:
    """`leading`: wait until the controller leads (else the test starts its own replicas)."""
    with own_control_plane() as plane:
        kc = plane.kubeconfig
        for crd in sorted(CAPI_CRDS.glob("*.yaml")):
            apply(kc, crd)
        wait_established(kc, [c.stem.split("_", 1)[1] + "." + c.stem.split("_", 1)[0]
                              for c in sorted(CAPI_CRDS.glob("*.yaml"))])
        localrun.ensure_namespaces(kc, {NS})
        bundle = localrun.compile_and_install(kc, work / "out", config)
        sa = service_account_kubeconfig(kc, localrun.INSTALL_NAMESPACE,
                                        "fivespot-machine-controller", work / "machine.kubeconfig")
        controller = ControllerProcess(sa, bundle, unique("machines"), work / "machine.log",
                                       controller="machine")
        if leading:
            controller.start()
        api = admin_client(kc)
        try:
            if leading:
                controller.wait_leading("default")
            yield World(kc, api, "desk-cluster", work / "out", controller, sa)
        finally:
            controller.terminate()
            api.close()
