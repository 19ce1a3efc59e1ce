"""The ScheduledMachine half of `make demo`: a CAPI Machine by schedule, drained and removed.

Beside the capacity story (a number changes, the node stays), this one shows the other pattern of
5-Spot (the node leaves; docs/design/contracts/scheduled-machine.md): a second local control plane
plays the workload cluster, reached only through the `desk-cluster-kubeconfig` Secret as CAPI
writes it, and its kube-controller-manager runs the disruption controller, so the
PodDisruptionBudget is real. The Cluster API CRDs are the real ones (the integration tests'
copies), installed by `fivespot dev` with the config repo, which also runs the machine controller
as a process. No CAPI controllers and no kubelet run, so the demo plays their parts in the open,
and says so at each step: it creates the Node and sets the Machine's status.nodeRef (CAPI), and
finishes pod deletions (the kubelet).
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import Any, Final

from fivespot.devcluster import localrun
from fivespot.devcluster.narration import say, wait
from fivespot.runtime import kube

NS: Final = "trading"
CLUSTER: Final = "desk-cluster"
SM_NAME: Final = "trading-desk-rack"
SCHEDULE: Final = "desk-override"
NODE: Final = "desk-node-1"
APPS: Final = "desk-apps"
CAPI_CRDS: Final = localrun.ROOT / "tests" / "integration" / "testdata" / "cluster-api"
MACHINES: Final = localrun.ROOT / "examples" / "trading-desk" / "config" / "machines.yaml"




class Kubelet:
    """The demo's stand-in for the kubelet: a pod marked for deletion is removed."""

    def __init__(self, api: Any):
        self.api = api
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                pods = kube.request(self.api, "GET", f"/api/v1/namespaces/{APPS}/pods")["items"]
                for pod in pods:
                    if pod["metadata"].get("deletionTimestamp"):
                        kube.request(self.api, "DELETE", kube.resource_path(
                            "", "v1", "pods", APPS, pod["metadata"]["name"]),
                            body={"gracePeriodSeconds": 0})
            except kube.ApiError:
                continue


class MachineStory:
    """Runs after the capacity story, in the same `fivespot dev` session (management plane)."""

    def __init__(self, session: Any, work: Path):
        self.session, self.work = session, work
        self.workload: Any = None
        self.wl: Any = None

    @property
    def api(self) -> Any:
        return self.session.api

    @property
    def kubeconfig(self) -> Path:
        path: Path = self.session.kubeconfig
        return path

    def start_workload(self) -> None:
        from fivespot.devcluster.build import cached_binaries, ensure_binaries
        from fivespot.devcluster.controlplane import ControlPlane

        say("a second control plane plays the workload cluster (disruption controller on)")
        self.workload = ControlPlane(cached_binaries() or ensure_binaries(), self.work / "workload",
                                     owned=True, controllers=("disruption-controller",))
        self.workload.start()
        self.wl = kube.load_client(self.workload.kubeconfig)
        print(f"   {self.workload.server}")

    def stop(self) -> None:
        if self.workload is not None:
            self.workload.stop()

    def sm(self) -> dict[str, Any]:
        return kube.request(self.api, "GET", kube.resource_path(
            "5spot.finos.org", "v1beta1", "scheduledmachines", NS, SM_NAME))

    def phase(self) -> Any:
        return (self.sm().get("status") or {}).get("phase")

    def show(self) -> None:
        from fivespot.devcluster.kubectl import kubectl

        print(kubectl(self.kubeconfig, "-n", NS, "get", "sm", SM_NAME).rstrip())
        machines = kubectl(self.kubeconfig, "-n", NS, "get", "machines.cluster.x-k8s.io",
                           "--ignore-not-found").rstrip()
        print(machines or "   (no CAPI Machine)")

    def flip(self, enabled: bool) -> None:
        path = kube.resource_path("spotschedules.5spot.finos.org", "v1alpha1", "manualschedules",
                                  NS, SCHEDULE)
        kube.merge_patch(self.api, path, {"spec": {"enabled": enabled}})
        print(f"   kubectl -n {NS} patch manualschedule {SCHEDULE} --type=merge "
              f"-p '{{\"spec\":{{\"enabled\":{str(enabled).lower()}}}}}'")

    def run(self) -> bool:
        """The story, step by step; True when every step reached its phase."""
        from fivespot.devcluster.kubectl import kubectl

        say("the other pattern: a ScheduledMachine (the node leaves the cluster, not a number)")
        self.start_workload()
        say("CAPI's side: a Cluster and its kubeconfig Secret (the CAPI CRDs came with dev)")
        kube.request(self.api, "POST", kube.resource_path("", "v1", "secrets", NS), body={
            "metadata": {"name": f"{CLUSTER}-kubeconfig",
                         "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
            "type": "cluster.x-k8s.io/secret",
            "data": {"value": base64.b64encode(self.workload.kubeconfig.read_bytes()).decode()}})
        kube.request(self.api, "POST", kube.resource_path("cluster.x-k8s.io", "v1beta2", "clusters", NS),
                     body={"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                           "metadata": {"name": CLUSTER},
                           "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}}}})

        say("a ScheduledMachine in namespace trading, following a ManualSchedule (off)")
        kubectl(self.kubeconfig, "apply", "-f", "-", stdin=f"""
apiVersion: spotschedules.5spot.finos.org/v1alpha1
kind: ManualSchedule
metadata: {{name: {SCHEDULE}, namespace: {NS}}}
spec: {{enabled: false}}
---
apiVersion: 5spot.finos.org/v1beta1
kind: ScheduledMachine
metadata: {{name: {SM_NAME}, namespace: {NS}}}
spec:
  schedule: {{apiVersion: spotschedules.5spot.finos.org/v1alpha1, kind: ManualSchedule, name: {SCHEDULE}}}
  clusterName: {CLUSTER}
  bootstrapSpec:
    apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
    kind: KubeadmConfig
    spec: {{joinConfiguration: {{nodeRegistration: {{name: {NODE}}}}}}}
  infrastructureSpec:
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: DevMachine
    spec: {{backend: {{docker: {{}}}}}}
  gracefulShutdownTimeout: 3s
  nodeDrainTimeout: 15s
""")
        reached = [wait(lambda: self.phase() == "Inactive", 30, "Inactive")]
        self.show()

        say("the schedule opens: the controller creates the KubeadmConfig, DevMachine and Machine")
        self.flip(True)
        machine = kube.resource_path("cluster.x-k8s.io", "v1beta2", "machines", NS, SM_NAME)
        wait(lambda: bool(kube.request(self.api, "GET", machine)), 20, "the Machine")
        self.show()
        print("   (playing CAPI: the Node joins the workload cluster and the Machine's "
              "status.nodeRef names it)")
        kube.request(self.wl, "POST", "/api/v1/nodes", body={"metadata": {"name": NODE}})
        kube.merge_patch(self.api, machine + "/status", {"status": {"nodeRef": {"name": NODE}}})
        reached.append(wait(lambda: self.phase() == "Active", 20, "Active"))
        self.show()

        say("workloads on the node: one free pod, one a PodDisruptionBudget protects")
        kube.request(self.wl, "POST", "/api/v1/namespaces", body={"metadata": {"name": APPS}})
        for name, labels in (("web", {}), ("db", {"app": "db"})):
            kube.request(self.wl, "POST", kube.resource_path("", "v1", "pods", APPS), body={
                "metadata": {"name": name, "labels": labels},
                "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "pause"}]}})
        kube.merge_patch(self.wl, kube.resource_path("", "v1", "pods", APPS, "db", "status"), {
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
        kube.request(self.wl, "POST", kube.resource_path("policy", "v1", "poddisruptionbudgets", APPS),
                     body={"metadata": {"name": "db"}, "spec": {
                         "minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
        print("   pods web, db on " + NODE + "; PDB db: minAvailable 1 (so db may not be evicted)")
        kubelet = Kubelet(self.wl)
        kubelet.thread.start()
        try:
            say("the schedule closes: grace period (3s), cordon + taint, evictions, then delete")
            self.flip(False)
            reached.append(wait(lambda: self.phase() == "ShuttingDown", 20, "ShuttingDown"))
            self.show()
            wait(lambda: bool(kube.request(self.wl, "GET", f"/api/v1/nodes/{NODE}")["spec"]
                              .get("unschedulable")), 20, "the cordon")
            print(kubectl(self.workload.kubeconfig, "get", "node", NODE).rstrip())
            time.sleep(2)
            print(kubectl(self.workload.kubeconfig, "-n", APPS, "get", "pods").rstrip())
            print("   (web was evicted; db stays: its budget refuses the eviction until "
                  "nodeDrainTimeout, 15s)")
            reached.append(wait(lambda: self.phase() == "Inactive", 40, "Inactive"))
            self.show()
            message = next((c["message"] for c in self.sm()["status"]["conditions"]
                            if c["type"] == "NodeDrained"), "")
            print(f"   NodeDrained: {message}")
        finally:
            kubelet.stop.set()
        return all(reached)
