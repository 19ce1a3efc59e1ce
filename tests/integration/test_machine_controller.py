"""The machine controller end to end against two real control planes.

- management: the real Cluster API CRDs (Machine v1beta2, Cluster, KubeadmConfig, DevMachine, from
  tests/integration/testdata/cluster-api), a config repo with both patterns compiled and
  installed (the agent-sandbox example plus a MachineProvisioning for cluster `trading/desk`),
  and the machine controller as a separate process running as its own ServiceAccount with the
  compiled RBAC;
- workload: a second control plane, reached only through the `desk-kubeconfig` Secret (CAPI's
  naming convention), whose kube-controller-manager runs the disruption controller, so
  PodDisruptionBudgets and the Eviction API are real.

No CAPI controllers and no kubelet run, so this test plays their parts, minimally: as CAPI, it
sets a Machine's status.nodeRef once it has created the Node; as the kubelet, it marks a pod
Ready and finishes the deletion of pods that an eviction marked for deletion. Provider status is
written directly, as a provider publishes it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.compiler.emit import health
from fivespot.devcluster import localrun
from fivespot.devcluster.clients import admin_client, service_account_kubeconfig
from fivespot.devcluster.kubectl import apply, kubectl, wait_established
from fivespot.runtime import kube
from tests.integration.capacity_world import FAST_LEASES, ControllerProcess, eventually, unique
from tests import kstatus
from tests.integration.conftest import own_control_plane
from tests.integration.machine_world import join_node, publish, schedule
from tests.unit.test_health_lua import ARGO_OF_KSTATUS, argo_health

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CAPI_CRDS = Path(__file__).parent / "testdata" / "cluster-api"
NS = "trading"
CLUSTER = "desk"
MACHINE_SA = "fivespot-machine-controller"
CAPACITY_SA = "fivespot-capacity-controller"
SM = ("5spot.finos.org", "v1beta1", "scheduledmachines")
MACHINES = ("cluster.x-k8s.io", "v1beta2", "machines")
KUBEADM = ("bootstrap.cluster.x-k8s.io", "v1beta2", "kubeadmconfigs")
DEVMACHINES = ("infrastructure.cluster.x-k8s.io", "v1beta2", "devmachines")
TAINT = "5spot.finos.org/shutting-down"
FINALIZER = "5spot.finos.org/scheduledmachine"

MACHINES_YAML = f"""
apiVersion: config.5spot.finos.org/v1alpha1
kind: MachineProvisioning
metadata:
  name: capi
spec:
  clusters:
    - {{namespace: {NS}, name: {CLUSTER}}}
  bootstrap:
    - {{group: bootstrap.cluster.x-k8s.io, version: v1beta2, kind: KubeadmConfig, resource: kubeadmconfigs}}
  infrastructure:
    - {{group: infrastructure.cluster.x-k8s.io, version: v1beta2, kind: DevMachine, resource: devmachines}}
---
apiVersion: config.5spot.finos.org/v1alpha1
kind: TenantPolicy
metadata:
  name: trading
spec:
  namespaces: [{NS}]
  consumers: [virtualmachinepools]
  maxActiveValue: 4
"""


def p(kind: tuple[str, str, str], name: str | None = None, sub: str | None = None,
      ns: str | None = NS) -> str:
    return kube.resource_path(*kind, namespace=ns, name=name, subresource=sub)


# --- the two clusters -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workload() -> Iterator[Any]:
    with own_control_plane(controllers=("disruption-controller",)) as plane:
        yield plane


@pytest.fixture(scope="module")
def management(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with own_control_plane() as plane:
        yield plane


@pytest.fixture(scope="module")
def mgmt(management: Any) -> Iterator[client.ApiClient]:
    api = admin_client(management.kubeconfig)
    yield api
    api.close()


@pytest.fixture(scope="module")
def wl(workload: Any) -> Iterator[client.ApiClient]:
    api = admin_client(workload.kubeconfig)
    yield api
    api.close()


@pytest.fixture(scope="module")
def installed(management: Any, workload: Any, mgmt: client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both patterns compiled and installed on the management plane; the bundle's path."""
    work = tmp_path_factory.mktemp("machines")
    config = work / "config"
    config.mkdir()
    for source in (localrun.EXAMPLE / "config").glob("*.yaml"):
        (config / source.name).write_text(source.read_text())
    (config / "machines.yaml").write_text(MACHINES_YAML)
    for crd in sorted(CAPI_CRDS.glob("*.yaml")):
        apply(management.kubeconfig, crd)
    wait_established(management.kubeconfig, [c.stem.split("_", 1)[1] + "." + c.stem.split("_", 1)[0]
                                             for c in sorted(CAPI_CRDS.glob("*.yaml"))])
    localrun.ensure_namespaces(management.kubeconfig, {NS})
    bundle = localrun.compile_and_install(management.kubeconfig, work / "out", config)
    # What CAPI does for every Cluster: its admin kubeconfig in <cluster>-kubeconfig, key value.
    kube.request(mgmt, "POST", p(("", "v1", "secrets")), body={
        "metadata": {"name": f"{CLUSTER}-kubeconfig", "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}},
        "type": "cluster.x-k8s.io/secret",
        "data": {"value": base64.b64encode(workload.kubeconfig.read_bytes()).decode()}})
    kube.request(mgmt, "POST", p(("", "v1", "secrets")), body={
        "metadata": {"name": "unrelated"}, "data": {"value": "c2VjcmV0"}})
    kube.request(mgmt, "POST", p(("cluster.x-k8s.io", "v1beta2", "clusters")), body={
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": CLUSTER}, "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}}}})
    return bundle


@pytest.fixture(scope="module")
def controller(installed: Path, management: Any, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[ControllerProcess]:
    work = tmp_path_factory.mktemp("machine-controller")
    sa = service_account_kubeconfig(management.kubeconfig, localrun.INSTALL_NAMESPACE, MACHINE_SA,
                                    work / "machine.kubeconfig")
    process = ControllerProcess(sa, installed, unique("machine-it"), work / "controller.log",
                                controller="machine").start()
    process.wait_leading("default")
    yield process
    process.terminate()


class Kubelet:
    """Plays the kubelet's one part the drain needs: a pod marked for deletion is removed."""

    def __init__(self, api: client.ApiClient):
        self.api = api
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Kubelet":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                pods = kube.request(self.api, "GET", "/api/v1/pods")["items"]
            except kube.ApiError:
                continue
            for pod in pods:
                meta = pod["metadata"]
                if meta.get("deletionTimestamp"):
                    try:
                        kube.request(self.api, "DELETE", p(("", "v1", "pods"), meta["name"],
                                                           ns=meta["namespace"]),
                                     body={"gracePeriodSeconds": 0})
                    except kube.ApiError:
                        pass


@pytest.fixture(scope="module")
def kubelet(wl: client.ApiClient) -> Iterator[Kubelet]:
    with Kubelet(wl) as running:
        yield running


# --- the world a test sets up ---------------------------------------------------------------


def scheduled_machine(mgmt: client.ApiClient, name: str, schedule_name: str, **spec: Any) -> None:
    kube.request(mgmt, "POST", p(SM), body={
        "apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
        "metadata": {"name": name},
        "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                              "kind": "ManualSchedule", "name": schedule_name},
                 "clusterName": CLUSTER,
                 "bootstrapSpec": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                                   "kind": "KubeadmConfig", "metadata": {"labels": {"desk": "fx"}},
                                   "spec": {"joinConfiguration": {"nodeRegistration": {"name": name}}}},
                 "infrastructureSpec": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                        "kind": "DevMachine", "spec": {"backend": {"docker": {}}}},
                 **spec}})


def status(mgmt: client.ApiClient, name: str) -> dict[str, Any]:
    return dict(kube.request(mgmt, "GET", p(SM, name)).get("status") or {})


def wait_phase(mgmt: client.ApiClient, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
    return eventually(lambda: (s := status(mgmt, name)).get("phase") == phase and s, timeout,
                      f"{name} phase {phase}")


def get(api: client.ApiClient, path: str) -> dict[str, Any] | None:
    try:
        return kube.request(api, "GET", path)
    except kube.ApiError as error:
        if error.not_found:
            return None
        raise


def pod(wl: client.ApiClient, ns: str, name: str, node: str, *, labels: dict[str, str] | None = None,
        ready: bool = False, **meta: Any) -> None:
    kube.request(wl, "POST", p(("", "v1", "pods"), ns=ns), body={
        "metadata": {"name": name, "labels": labels or {}, **meta},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    if ready:  # the kubelet's report: Running and Ready, so the disruption budget counts it healthy
        now = "2026-01-01T00:00:00Z"
        kube.merge_patch(wl, p(("", "v1", "pods"), name, "status", ns=ns), {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                "lastTransitionTime": now}]}})


def guarded(wl: client.ApiClient, apps: str, node: str) -> None:
    """A Ready pod `guarded` on the node and a budget that allows no disruption of it, once the
    disruption controller has computed that budget (an eviction before then is refused too)."""
    pod(wl, apps, "guarded", node, labels={"app": "db"}, ready=True)
    kube.request(wl, "POST", p(("policy", "v1", "poddisruptionbudgets"), ns=apps), body={
        "metadata": {"name": "db"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    eventually(lambda: (get(wl, p(("policy", "v1", "poddisruptionbudgets"), "db", ns=apps)) or {})
               .get("status", {}).get("observedGeneration") == 1, 60, "the disruption controller")


def workload_namespace(wl: client.ApiClient) -> str:
    name = unique("apps")
    kube.request(wl, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    return name


def active_machine(mgmt: client.ApiClient, wl: client.ApiClient, **spec: Any) -> tuple[str, str, str]:
    """A ScheduledMachine whose schedule is on and whose Machine joined as a node."""
    name, sched, node = unique("rack"), unique("ms"), unique("node")
    schedule(mgmt, sched, True)
    scheduled_machine(mgmt, name, sched, **spec)
    eventually(lambda: get(mgmt, p(MACHINES, name)), 60, "the Machine")
    join_node(mgmt, wl, name, node)
    wait_phase(mgmt, name, "Active")
    return name, sched, node


# --- the tests ------------------------------------------------------------------------------


def test_schedule_on_creates_the_machine_and_its_objects_owned_by_the_scheduled_machine(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        management: Any) -> None:
    name, sched, node = unique("rack"), unique("ms"), unique("node")
    schedule(mgmt, sched, True)
    scheduled_machine(mgmt, name, sched, nodeTaints=[{"key": "desk", "value": "fx", "effect": "NoSchedule"}],
                      priority=7)
    machine = eventually(lambda: get(mgmt, p(MACHINES, name)), 60, "the Machine")
    uid = kube.request(mgmt, "GET", p(SM, name))["metadata"]["uid"]
    boot = get(mgmt, p(KUBEADM, f"{name}-bootstrap"))
    infra = get(mgmt, p(DEVMACHINES, f"{name}-infra"))
    assert boot is not None and infra is not None
    for obj in (machine, boot, infra):
        refs = obj["metadata"]["ownerReferences"]
        assert [(r["kind"], r["name"], r["uid"], r["controller"]) for r in refs] == [
            ("ScheduledMachine", name, uid, True)]
        assert obj["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == CLUSTER
    assert machine["spec"]["clusterName"] == CLUSTER
    assert machine["spec"]["bootstrap"]["configRef"] == {
        "apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": f"{name}-bootstrap"}
    assert machine["spec"]["infrastructureRef"] == {
        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachine", "name": f"{name}-infra"}
    assert machine["spec"]["taints"] == [{"key": "desk", "value": "fx", "effect": "NoSchedule",
                                          "propagation": "Always"}]
    assert machine["metadata"]["labels"]["5spot.finos.org/priority"] == "7"
    assert boot["metadata"]["labels"]["desk"] == "fx"
    assert boot["spec"]["joinConfiguration"]["nodeRegistration"]["name"] == name
    pending = eventually(lambda: (s := status(mgmt, name)).get("machineRef") and s, 60, "machineRef")
    assert pending["phase"] == "Pending"
    assert pending["bootstrapRef"]["name"] == f"{name}-bootstrap"
    assert pending["infrastructureRef"]["kind"] == "DevMachine"
    assert pending["machineRef"]["uid"] == machine["metadata"]["uid"]
    join_node(mgmt, wl, name, node)
    active = wait_phase(mgmt, name, "Active")
    assert active["nodeRef"] == {"name": node}
    assert active["inSchedule"] is True
    # The provider guide's Verify step (docs/design/contracts/schedule-provider.md), as written.
    spot = json.loads(kubectl(management.kubeconfig, "-n", NS, "get", "scheduledmachine", name,
                              "-o", "jsonpath={.status.spotSchedule}"))
    assert spot["resolved"] is True and spot["active"] is True and spot["reason"] == "Resolved"
    printed = kubectl(management.kubeconfig, "-n", NS, "get", "sm", name)
    assert printed.split("\n")[0].split() == ["NAME", "PHASE", "READY", "INSCHEDULE", "ENABLED",
                                              "SCHEDULE", "KILLSWITCH", "NODE", "AGE"]
    assert printed.split("\n")[1].split()[:8] == [name, "Active", "True", "true", "true", sched,
                                                  "false", node]


def test_schedule_off_drains_through_the_grace_period_cordon_evictions_and_budget_then_deletes(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        kubelet: Kubelet) -> None:
    # Margins for a loaded machine: the node is checked within the 5s grace period, and the
    # budget's hold well before the 20s nodeDrainTimeout.
    name, sched, node = active_machine(mgmt, wl, gracefulShutdownTimeout="5s", nodeDrainTimeout="20s")
    apps = workload_namespace(wl)
    pod(wl, apps, "free", node)
    pod(wl, apps, "ds-pod", node, ownerReferences=[{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                    "name": "agent", "uid": "0f0f", "controller": True}])
    pod(wl, apps, "static", node, annotations={"kubernetes.io/config.mirror": "hash"})
    guarded(wl, apps, node)
    machine_uid = kube.request(mgmt, "GET", p(MACHINES, name))["metadata"]["uid"]

    schedule(mgmt, sched, False)
    shutting = wait_phase(mgmt, name, "ShuttingDown", 30)
    assert shutting["shutdownStartedAt"]
    assert not (get(wl, f"/api/v1/nodes/{node}") or {}).get("spec", {}).get("unschedulable"), \
        "the node is left alone during the graceful shutdown period"
    cordoned = eventually(lambda: (n := get(wl, f"/api/v1/nodes/{node}")) and
                          n["spec"].get("unschedulable") and n, 30, "the cordon")
    assert {"key": TAINT, "effect": "NoSchedule"} in [
        {k: t[k] for k in ("key", "effect")} for t in cordoned["spec"]["taints"]]
    eventually(lambda: get(wl, p(("", "v1", "pods"), "free", ns=apps)) is None, 30, "free evicted")
    time.sleep(3)
    assert get(wl, p(("", "v1", "pods"), "guarded", ns=apps)) is not None, "the budget keeps it"
    assert get(mgmt, p(MACHINES, name)) is not None, "the Machine stays until nodeDrainTimeout"
    # The status follows the cordon and the evictions of the same reconcile.
    eventually(lambda: "NodeDrained" in {c["type"] for c in status(mgmt, name)["conditions"]}, 30,
               "the NodeDrained condition")
    eventually(lambda: get(mgmt, p(MACHINES, name)) is None, 60, "the Machine deleted at the timeout")
    inactive = wait_phase(mgmt, name, "Inactive", 60)
    assert get(mgmt, p(KUBEADM, f"{name}-bootstrap")) is None
    assert get(mgmt, p(DEVMACHINES, f"{name}-infra")) is None
    assert "nodeRef" not in inactive and "machineRef" not in inactive
    drained = {c["type"]: c for c in inactive["conditions"]}["NodeDrained"]
    assert drained["reason"] == "DrainTimedOut" and f"{apps}/guarded" in drained["message"]
    for left in ("ds-pod", "static"):
        assert get(wl, p(("", "v1", "pods"), left, ns=apps)) is not None, f"{left} is not evicted"
    deleted = [e for e in controller.entries() if e.get("msg") == "deleted" and e.get("part") == "machine"
               and e.get("key") == f"{NS}/{name}"]
    assert [e["uid"] for e in deleted] == [machine_uid]


def test_a_drained_node_gets_its_machine_deleted_without_waiting_for_the_timeout(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        kubelet: Kubelet) -> None:
    name, sched, node = active_machine(mgmt, wl, nodeDrainTimeout="5m")
    apps = workload_namespace(wl)
    pod(wl, apps, "web", node)
    schedule(mgmt, sched, False)
    wait_phase(mgmt, name, "Inactive", 60)
    assert get(wl, p(("", "v1", "pods"), "web", ns=apps)) is None


def test_the_kill_switch_removes_the_machine_at_once_without_draining(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient) -> None:
    name, _, node = active_machine(mgmt, wl, gracefulShutdownTimeout="1h")
    apps = workload_namespace(wl)
    pod(wl, apps, "web", node)
    kube.merge_patch(mgmt, p(SM, name), {"spec": {"killSwitch": True}})
    eventually(lambda: get(mgmt, p(MACHINES, name)) is None, 30, "the Machine deleted")
    terminated = wait_phase(mgmt, name, "Terminated")
    assert not (get(wl, f"/api/v1/nodes/{node}") or {}).get("spec", {}).get("unschedulable")
    assert get(wl, p(("", "v1", "pods"), "web", ns=apps)) is not None, "no eviction"
    assert {c["type"]: c["reason"] for c in terminated["conditions"]}["Ready"] == "KillSwitch"
    # The Events follow the status write, so the phase can be seen before its Event.
    eventually(lambda: any(e["reason"] == "KillSwitch" and e["type"] == "Warning"
                           and e["regarding"]["name"] == name
                           for e in kube.request(mgmt, "GET", p(("events.k8s.io", "v1", "events")))["items"]),
               30, "the KillSwitch Warning event")


def test_disabled_takes_the_safe_path_and_ends_disabled(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        kubelet: Kubelet) -> None:
    name, _, node = active_machine(mgmt, wl)
    kube.merge_patch(mgmt, p(SM, name), {"spec": {"enabled": False}})
    wait_phase(mgmt, name, "Disabled", 60)
    assert (get(wl, f"/api/v1/nodes/{node}") or {})["spec"].get("unschedulable"), "drained first"
    assert get(mgmt, p(MACHINES, name)) is None


def test_a_schedule_that_never_resolved_creates_nothing_and_is_counted(
        controller: ControllerProcess, mgmt: client.ApiClient) -> None:
    name = unique("rack")
    scheduled_machine(mgmt, name, "no-such-schedule")
    inactive = wait_phase(mgmt, name, "Inactive")
    assert inactive["spotSchedule"]["resolved"] is False
    assert inactive["spotSchedule"]["reason"] == "ScheduleNotFound"
    conditions = {c["type"]: c for c in inactive["conditions"]}
    assert conditions["SpotScheduleResolved"]["status"] == "False"
    assert get(mgmt, p(MACHINES, name)) is None
    assert ('fivespot_spot_schedule_resolution_errors_total{controller="fivespot-machine-controller",'
            'reason="ScheduleNotFound"}') in controller.metrics()


def test_an_unresolved_provider_holds_the_last_state(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient) -> None:
    name, sched, _ = active_machine(mgmt, wl)
    publish(mgmt, sched, False, ready="False")
    eventually(lambda: status(mgmt, name)["spotSchedule"]["resolved"] is False, 30, "unresolved")
    time.sleep(2)
    held = status(mgmt, name)
    assert held["phase"] == "Active" and held["spotSchedule"]["active"] is True
    assert held["spotSchedule"]["reason"] == "ScheduleNotReady"
    assert get(mgmt, p(MACHINES, name)) is not None


def created(controller: ControllerProcess, name: str) -> list[str]:
    return [e["part"] for e in controller.entries()
            if e.get("msg") == "created" and e.get("key") == f"{NS}/{name}"]


def restart(controller: ControllerProcess) -> None:
    """SIGKILL (no lease release, no goodbye), then a new process."""
    controller.kill()
    controller.start()
    controller.wait_leading("default")


def test_sigkill_while_pending_creates_each_object_once(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient) -> None:
    name, sched = unique("rack"), unique("ms")
    schedule(mgmt, sched, True)
    scheduled_machine(mgmt, name, sched)
    eventually(lambda: created(controller, name), 60, "the first create")
    restart(controller)
    machine = eventually(lambda: get(mgmt, p(MACHINES, name)), 60, "the Machine")
    eventually(lambda: status(mgmt, name).get("machineRef"), 60, "machineRef")
    # The kill may land between a create and its log line; what matters is that no part is
    # created twice (a second create is an AlreadyExists, not logged) and one Machine exists.
    parts = created(controller, name)
    assert len(parts) == len(set(parts)) and set(parts) <= {"bootstrap", "infrastructure", "machine"}
    assert len([m for m in kube.request(mgmt, "GET", p(MACHINES))["items"]
                if m["metadata"]["labels"].get("5spot.finos.org/scheduled-machine") == name]) == 1
    join_node(mgmt, wl, name, unique("node"))
    wait_phase(mgmt, name, "Active")
    current = get(mgmt, p(MACHINES, name))
    assert current is not None
    assert current["metadata"]["uid"] == machine["metadata"]["uid"]


def test_sigkill_while_active_and_in_the_grace_period_loses_nothing(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        kubelet: Kubelet) -> None:
    name, sched, node = active_machine(mgmt, wl, gracefulShutdownTimeout="4s", nodeDrainTimeout="5m")
    uid = kube.request(mgmt, "GET", p(MACHINES, name))["metadata"]["uid"]
    restart(controller)
    time.sleep(1)
    assert kube.request(mgmt, "GET", p(MACHINES, name))["metadata"]["uid"] == uid, "same Machine"
    assert status(mgmt, name)["phase"] == "Active"
    schedule(mgmt, sched, False)
    started = wait_phase(mgmt, name, "ShuttingDown", 30)["shutdownStartedAt"]
    restart(controller)
    assert status(mgmt, name)["shutdownStartedAt"] == started, "the grace clock survives"
    wait_phase(mgmt, name, "Inactive", 60)
    assert (get(wl, f"/api/v1/nodes/{node}") or {})["spec"].get("unschedulable")
    assert created(controller, name) == ["bootstrap", "infrastructure", "machine"]


def test_sigkill_while_draining_keeps_the_drain_deadline(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        kubelet: Kubelet) -> None:
    # 25s: the restart (a new process, its caches, its lease) fits well inside the drain on a
    # loaded machine, so the Machine is still there when the new process has started.
    name, sched, node = active_machine(mgmt, wl, nodeDrainTimeout="25s")
    apps = workload_namespace(wl)
    guarded(wl, apps, node)
    schedule(mgmt, sched, False)
    drain = eventually(lambda: status(mgmt, name).get("drainStartedAt"), 30, "the drain")
    restart(controller)
    assert status(mgmt, name)["drainStartedAt"] == drain
    assert get(mgmt, p(MACHINES, name)) is not None
    eventually(lambda: get(mgmt, p(MACHINES, name)) is None, 60, "the Machine deleted at the deadline")
    done = wait_phase(mgmt, name, "Inactive", 60)
    assert {c["type"]: c for c in done["conditions"]}["NodeDrained"]["reason"] == "DrainTimedOut"
    deletes = [e for e in controller.entries() if e.get("msg") == "deleted"
               and e.get("key") == f"{NS}/{name}" and e.get("part") == "machine"]
    assert len(deletes) == 1
    deleted_at = datetime.fromisoformat(deletes[0]["ts"])
    waited = (deleted_at - datetime.fromisoformat(drain.replace("Z", "+00:00"))).total_seconds()
    assert waited >= 24.5, f"deleted {waited:.1f}s after the drain began, before nodeDrainTimeout 25s"


def test_sigkill_after_removal_recreates_nothing(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        kubelet: Kubelet) -> None:
    name, sched, _ = active_machine(mgmt, wl)
    schedule(mgmt, sched, False)
    wait_phase(mgmt, name, "Inactive", 60)
    restart(controller)
    time.sleep(2)
    assert status(mgmt, name)["phase"] == "Inactive"
    assert get(mgmt, p(MACHINES, name)) is None
    assert created(controller, name) == ["bootstrap", "infrastructure", "machine"]


def test_a_reopen_during_the_grace_period_keeps_the_machine(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient) -> None:
    name, sched, node = active_machine(mgmt, wl, gracefulShutdownTimeout="1h")
    uid = kube.request(mgmt, "GET", p(MACHINES, name))["metadata"]["uid"]
    schedule(mgmt, sched, False)
    wait_phase(mgmt, name, "ShuttingDown", 30)
    publish(mgmt, sched, True)
    back = wait_phase(mgmt, name, "Active", 30)
    assert "shutdownStartedAt" not in back
    assert kube.request(mgmt, "GET", p(MACHINES, name))["metadata"]["uid"] == uid
    assert not (get(wl, f"/api/v1/nodes/{node}") or {})["spec"].get("unschedulable")


def test_a_reopen_after_the_drain_began_finishes_the_removal_then_creates_a_new_machine(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        kubelet: Kubelet) -> None:
    # 15s: the drain must still be under way when the reopen is checked, on a loaded machine too.
    name, sched, node = active_machine(mgmt, wl, nodeDrainTimeout="15s")
    apps = workload_namespace(wl)
    guarded(wl, apps, node)
    old = kube.request(mgmt, "GET", p(MACHINES, name))["metadata"]["uid"]
    schedule(mgmt, sched, False)
    eventually(lambda: status(mgmt, name).get("drainStartedAt"), 30, "the drain")
    publish(mgmt, sched, True)
    time.sleep(1)
    assert status(mgmt, name)["phase"] == "ShuttingDown", "a drain is not reversed"
    new = eventually(lambda: (m := get(mgmt, p(MACHINES, name))) and m["metadata"]["uid"] != old and m,
                     60, "a new Machine")
    assert new["metadata"]["ownerReferences"][0]["name"] == name
    pending = wait_phase(mgmt, name, "Pending", 30)
    assert "drainStartedAt" not in pending and pending["inSchedule"] is True


def test_rbac_the_machine_identity_holds_capi_verbs_only_where_declared_and_never_capacity(
        controller: ControllerProcess, management: Any) -> None:
    def can(sa: str, *args: str) -> bool:
        answer = subprocess.run(
            ["kubectl", "--kubeconfig", str(management.kubeconfig), "auth", "can-i", *args,
             f"--as=system:serviceaccount:{localrun.INSTALL_NAMESPACE}:{sa}"],
            capture_output=True, text=True, timeout=30)
        return answer.stdout.strip() == "yes"

    machine = MACHINE_SA
    assert can(machine, "create", "machines.cluster.x-k8s.io", "-n", NS)
    assert can(machine, "delete", "kubeadmconfigs.bootstrap.cluster.x-k8s.io", "-n", NS)
    assert can(machine, "create", "devmachines.infrastructure.cluster.x-k8s.io", "-n", NS)
    assert can(machine, "get", "secret/desk-kubeconfig", "-n", NS)
    assert not can(machine, "get", "secret/unrelated", "-n", NS)
    assert not can(machine, "list", "secrets", "-n", NS)
    assert not can(machine, "create", "machines.cluster.x-k8s.io", "-n", "agents")
    assert not can(machine, "patch", "machines.cluster.x-k8s.io", "-n", NS)
    assert not can(machine, "create", "clusters.cluster.x-k8s.io", "-n", NS)
    assert can(machine, "patch", "scheduledmachines.5spot.finos.org", "--subresource=status", "-n", NS)
    assert can(machine, "patch", "scheduledmachines.5spot.finos.org", "-n", NS), "its finalizer"
    assert not can(machine, "patch", "scheduledmachines.5spot.finos.org", "-n", "agents"), \
        "its finalizer only where it may create machines"
    assert not can(machine, "update", "scheduledmachines.5spot.finos.org", "-n", NS)
    assert not can(machine, "delete", "scheduledmachines.5spot.finos.org", "-n", NS)
    for verb in ("get", "list", "watch", "patch", "update", "create", "delete"):
        assert not can(machine, verb, "virtualmachinepools.pools.agents.example.com", "-n", "agents")
        assert not can(machine, verb, "scheduledcapacities.5spot.finos.org", "-n", "agents")
    capacity = CAPACITY_SA
    for verb in ("get", "list", "create", "delete", "patch"):
        for resource in ("machines.cluster.x-k8s.io", "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
                         "devmachines.infrastructure.cluster.x-k8s.io"):
            assert not can(capacity, verb, resource, "-n", NS)
    assert not can(capacity, "get", "secret/desk-kubeconfig", "-n", NS)
    assert can(capacity, "patch", "virtualmachinepools.pools.agents.example.com", "-n", "agents")
    assert not can(capacity, "patch", "virtualmachinepools.pools.agents.example.com", "-n",
                   localrun.INSTALL_NAMESPACE), "consumers only in tenant namespaces"


def test_admission_refuses_a_kind_the_platform_does_not_allow_and_a_chosen_name(
        installed: Path, mgmt: client.ApiClient) -> None:
    def refused(**changes: Any) -> str:
        name = unique("rack")
        body: dict[str, Any] = {
            "apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": name},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "x"},
                     "clusterName": CLUSTER,
                     "bootstrapSpec": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                                       "kind": "KubeadmConfig", "spec": {}},
                     "infrastructureSpec": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                            "kind": "DevMachine", "spec": {}}}}
        body["spec"].update(changes)
        with pytest.raises(kube.ApiError) as error:
            kube.request(mgmt, "POST", p(SM), body=body)
        return error.value.message

    message = refused(infrastructureSpec={"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                          "kind": "AWSMachine", "spec": {}})
    assert "spec.infrastructureSpec must be one of the kinds the platform allows: DevMachine" in message
    message = refused(bootstrapSpec={"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                                     "kind": "KubeadmConfig", "metadata": {"name": "mine"}, "spec": {}})
    assert "metadata.name, metadata.generateName and metadata.namespace are chosen" in message
    message = refused(schedule={"apiVersion": "example.com/v1", "kind": "ManualSchedule", "name": "x"})
    assert "spotschedules.5spot.finos.org" in message
    assert "nodeDrainTimeout" in refused(nodeDrainTimeout="forever")


def test_seed_001_guide_step_5_and_6_with_the_manual_provider_running(
        controller: ControllerProcess, installed: Path, management: Any,
        mgmt: client.ApiClient, wl: client.ApiClient, tmp_path: Path) -> None:
    """The guide's ManualSchedule is fivespot's built-in one (same CRD shape, same one-line
    reconcile: spec.enabled -> status.active), so its steps 1-4 are `fivespot compile` and the
    provider's Deployment; steps 5 and 6 are followed here as written, with kubectl."""
    sa = service_account_kubeconfig(management.kubeconfig, localrun.INSTALL_NAMESPACE,
                                    "fivespot-provider-manual", tmp_path / "provider.kubeconfig")
    log = open(tmp_path / "provider.log", "ab")
    provider = subprocess.Popen(
        [sys.executable, "-m", "fivespot.controllers.spotschedules", "manual", "--bundle", str(installed),
         "--kubeconfig", str(sa), "--metrics-port", "0", *FAST_LEASES],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True)
    log.close()
    kc = str(management.kubeconfig)
    try:
        # 5. Reference it from a ScheduledMachine (provider object in the same namespace).
        kubectl(management.kubeconfig, "apply", "-f", "-", stdin=f"""
apiVersion: spotschedules.5spot.finos.org/v1alpha1
kind: ManualSchedule
metadata: {{name: desk-override, namespace: {NS}}}
spec: {{enabled: false}}
---
apiVersion: 5spot.finos.org/v1beta1
kind: ScheduledMachine
metadata: {{name: trading-desk-rack, namespace: {NS}}}
spec:
  schedule:
    apiVersion: spotschedules.5spot.finos.org/v1alpha1
    kind: ManualSchedule
    name: desk-override
  clusterName: {CLUSTER}
  bootstrapSpec:
    apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
    kind: KubeadmConfig
    spec: {{joinConfiguration: {{nodeRegistration: {{name: trading-desk-rack}}}}}}
  infrastructureSpec:
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: DevMachine
    spec: {{backend: {{docker: {{}}}}}}
""")
        wait_phase(mgmt, "trading-desk-rack", "Inactive", 60)
        assert get(mgmt, p(MACHINES, "trading-desk-rack")) is None
        # Then flip the toggle.
        kubectl(management.kubeconfig, "-n", NS, "patch", "manualschedule", "desk-override",
                "--type=merge", "-p", '{"spec":{"enabled":true}}')
        eventually(lambda: get(mgmt, p(MACHINES, "trading-desk-rack")), 60, "the Machine")
        # 6. Verify: the provider published its decision ...
        active = eventually(lambda: subprocess.run(
            ["kubectl", "--kubeconfig", kc, "-n", NS, "get", "manualschedule", "desk-override",
             "-o", "jsonpath={.status.active}{\"\\n\"}"], capture_output=True, text=True).stdout
            .strip() == "true", 60, "status.active true")
        assert active
        # ... and 5-Spot resolved it: the SM carries a SpotScheduleResolved condition (written
        # after the Machine's create, so the Machine can be seen before it).
        def resolved() -> bool:
            spot = json.loads(kubectl(management.kubeconfig, "-n", NS, "get", "scheduledmachine",
                                      "trading-desk-rack", "-o",
                                      "jsonpath={.status.spotSchedule}{\"\\n\"}"))
            return (spot["resolved"], spot["active"], spot["reason"]) == (True, True, "Resolved")
        eventually(resolved, 60, "the ScheduledMachine's spotSchedule resolved and active")
        conditions = {c["type"]: c for c in status(mgmt, "trading-desk-rack")["conditions"]}
        assert conditions["SpotScheduleResolved"]["status"] == "True"
        # If the reference can't be resolved: SpotScheduleResolved=False, last state held, counted.
        kubectl(management.kubeconfig, "-n", NS, "delete", "manualschedule", "desk-override")
        held = eventually(lambda: (s := status(mgmt, "trading-desk-rack"))["spotSchedule"]["resolved"]
                          is False and s, 60, "unresolved")
        assert held["spotSchedule"]["reason"] == "ScheduleNotFound" and held["inSchedule"] is True
        assert get(mgmt, p(MACHINES, "trading-desk-rack")) is not None, "last state held"
        assert 'reason="ScheduleNotFound"' in controller.metrics()
    finally:
        os.killpg(provider.pid, signal.SIGTERM)
        provider.wait(15)


def test_an_embedded_spec_the_capi_schema_refuses_is_reported_on_the_scheduled_machine(
        controller: ControllerProcess, mgmt: client.ApiClient) -> None:
    name, sched = unique("rack"), unique("ms")
    schedule(mgmt, sched, True)
    scheduled_machine(mgmt, name, sched, bootstrapSpec={
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig", "spec": {}})
    name2 = name
    error = wait_phase(mgmt, name2, "Error", 60)
    ready = {c["type"]: c for c in error["conditions"]}["Ready"]
    assert ready["reason"] == "CreateRejected"
    assert "KubeadmConfig" in ready["message"] and "at least 1 properties" in ready["message"]
    assert "fix spec.bootstrapSpec" in ready["message"]
    assert get(mgmt, p(MACHINES, name2)) is None, "no Machine without its bootstrap object"


@pytest.fixture(scope="module")
def capacity(installed: Path, management: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[ControllerProcess]:
    work = tmp_path_factory.mktemp("capacity-controller")
    sa = service_account_kubeconfig(management.kubeconfig, localrun.INSTALL_NAMESPACE, CAPACITY_SA,
                                    work / "capacity.kubeconfig")
    process = ControllerProcess(sa, installed, unique("capacity-it"), work / "controller.log").start()
    process.wait_leading("default")
    yield process
    process.terminate()


def test_a_scheduled_capacity_naming_the_machines_node_is_told_to_the_machine_by_the_capacity_side(
        controller: ControllerProcess, capacity: ControllerProcess, mgmt: client.ApiClient,
        wl: client.ApiClient) -> None:
    """One host, one governor: the capacity side, whose identity reads ScheduledMachines, holds
    its value at 0 and records the conflict on both objects; the machine identity reads no
    ScheduledCapacity, and the machine keeps following its schedule."""
    name, sched, node = active_machine(mgmt, wl)
    gate = unique("gate")
    kube.request(mgmt, "POST", p(("5spot.finos.org", "v1alpha1", "scheduledcapacities")), body={
        "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
        "metadata": {"name": gate},
        "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                              "kind": "ManualSchedule", "name": sched},
                 "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                               "kind": "VirtualMachinePool", "name": "pool"},
                 "capacity": {"path": "spec.warmReplicas", "activeValue": 2}, "nodeName": node}})

    def told() -> dict[str, Any] | None:
        return next((e for e in kube.request(mgmt, "GET", p(("events.k8s.io", "v1", "events")))["items"]
                     if e["reason"] == "NodeGovernedByScheduledMachine" and e["type"] == "Warning"
                     and e["regarding"]["kind"] == "ScheduledMachine"
                     and e["regarding"]["name"] == name), None)
    event = eventually(told, 60, "the Warning event on the ScheduledMachine")
    assert gate in event["note"] and node in event["note"]
    assert event["reportingController"] == "5spot.finos.org/capacity-controller"
    uid = kube.request(mgmt, "GET", p(SM, name))["metadata"]["uid"]
    assert event["regarding"]["uid"] == uid
    gated = kube.request(mgmt, "GET", p(("5spot.finos.org", "v1alpha1", "scheduledcapacities"), gate))
    conflict = {c["type"]: c for c in gated["status"]["conditions"]}["HostGovernanceConflict"]
    assert conflict["status"] == "True" and name in conflict["message"]
    mine = status(mgmt, name)
    assert mine["phase"] == "Active", "the machine side keeps following its schedule"
    assert "HostGovernanceConflict" not in {c["type"] for c in mine["conditions"]}
    kube.request(mgmt, "DELETE", p(("5spot.finos.org", "v1alpha1", "scheduledcapacities"), gate))


# --- deleting a ScheduledMachine: its finalizer, and the way out -------------------------------


def gone(mgmt: client.ApiClient, name: str) -> bool:
    return get(mgmt, p(SM, name)) is None


def finalizers(mgmt: client.ApiClient, name: str) -> list[str]:
    return list(kube.request(mgmt, "GET", p(SM, name))["metadata"].get("finalizers") or [])


def cordoned(wl: client.ApiClient, node: str) -> bool:
    return bool((get(wl, f"/api/v1/nodes/{node}") or {}).get("spec", {}).get("unschedulable"))


def test_deleting_an_active_scheduled_machine_drains_past_a_budget_before_the_machine_goes(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        management: Any, kubelet: Kubelet) -> None:
    name, _, node = active_machine(mgmt, wl, gracefulShutdownTimeout="2s", nodeDrainTimeout="5m")
    assert finalizers(mgmt, name) == [FINALIZER]
    apps = workload_namespace(wl)
    pod(wl, apps, "free", node)
    guarded(wl, apps, node)
    kubectl(management.kubeconfig, "-n", NS, "delete", "scheduledmachine", name, "--wait=false")
    eventually(lambda: cordoned(wl, node), 30, "the cordon")
    eventually(lambda: get(wl, p(("", "v1", "pods"), "free", ns=apps)) is None, 30, "free evicted")
    time.sleep(3)
    assert get(wl, p(("", "v1", "pods"), "guarded", ns=apps)) is not None, "the budget keeps it"
    assert get(mgmt, p(MACHINES, name)) is not None, "the Machine stays while the drain waits"
    waiting = kube.request(mgmt, "GET", p(SM, name))
    assert waiting["metadata"]["deletionTimestamp"] and waiting["status"]["phase"] == "ShuttingDown"
    assert {c["type"]: c["reason"] for c in waiting["status"]["conditions"]}["Ready"] == "Deleting"
    # The budget relaxed, the eviction goes through, then the Machine, its objects, the object.
    kube.request(wl, "DELETE", p(("policy", "v1", "poddisruptionbudgets"), "db", ns=apps))
    eventually(lambda: get(wl, p(("", "v1", "pods"), "guarded", ns=apps)) is None, 60, "guarded evicted")
    eventually(lambda: gone(mgmt, name), 60, "the ScheduledMachine gone")
    assert get(mgmt, p(MACHINES, name)) is None
    assert get(mgmt, p(KUBEADM, f"{name}-bootstrap")) is None
    assert get(mgmt, p(DEVMACHINES, f"{name}-infra")) is None
    evicted_first = [e for e in controller.entries() if e.get("key") == f"{NS}/{name}"
                     and e.get("msg") in ("evicted", "deleted")]
    assert [e["msg"] for e in evicted_first][:2] == ["evicted", "evicted"], evicted_first


def test_a_scheduled_machine_deleted_while_its_controller_is_down_drains_once_it_is_back(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        management: Any, kubelet: Kubelet) -> None:
    name, _, node = active_machine(mgmt, wl, gracefulShutdownTimeout="0s")
    apps = workload_namespace(wl)
    pod(wl, apps, "web", node)
    controller.kill()
    try:
        kubectl(management.kubeconfig, "-n", NS, "delete", "scheduledmachine", name, "--wait=false")
        time.sleep(3)
        assert finalizers(mgmt, name) == [FINALIZER], "held by the finalizer"
        assert get(mgmt, p(MACHINES, name)) is not None and not cordoned(wl, node)
    finally:
        controller.start()
        controller.wait_leading("default")
    eventually(lambda: gone(mgmt, name), 60, "the ScheduledMachine gone")
    assert cordoned(wl, node), "drained on the way out"
    assert get(wl, p(("", "v1", "pods"), "web", ns=apps)) is None
    assert get(mgmt, p(MACHINES, name)) is None


def test_deleting_under_the_kill_switch_skips_the_drain(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        management: Any) -> None:
    name, _, node = active_machine(mgmt, wl, gracefulShutdownTimeout="1h")
    apps = workload_namespace(wl)
    pod(wl, apps, "web", node)
    kube.merge_patch(mgmt, p(SM, name), {"spec": {"killSwitch": True}})
    kubectl(management.kubeconfig, "-n", NS, "delete", "scheduledmachine", name, "--wait=false")
    eventually(lambda: gone(mgmt, name), 60, "the ScheduledMachine gone")
    assert get(mgmt, p(MACHINES, name)) is None
    assert not cordoned(wl, node) and get(wl, p(("", "v1", "pods"), "web", ns=apps)) is not None


def test_with_the_controller_gone_for_good_removing_the_finalizer_lets_the_object_go(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        management: Any) -> None:
    """The way out the docs give (docs/explanation/machine-controller.md), for a controller stopped for good (or its RBAC or CRD
    gone): remove the finalizer by hand. The Machine stays, owned by an object that no longer
    exists, for the garbage collector (or a person) to delete."""
    name, _, _ = active_machine(mgmt, wl)
    controller.kill()
    try:
        kubectl(management.kubeconfig, "-n", NS, "delete", "scheduledmachine", name, "--wait=false")
        time.sleep(2)
        assert not gone(mgmt, name)
        kubectl(management.kubeconfig, "-n", NS, "patch", "scheduledmachine", name, "--type=json",
                "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
        eventually(lambda: gone(mgmt, name), 30, "the ScheduledMachine gone")
        orphan = get(mgmt, p(MACHINES, name))
        assert orphan is not None and orphan["metadata"]["ownerReferences"][0]["name"] == name
    finally:
        controller.start()
        controller.wait_leading("default")


# --- health: kstatus (Flux `wait`, `kubectl wait`) and the Argo CD Lua on live objects ------------


KSTATUS_TYPES = ("Ready", "Reconciling", "Stalled")


def observed(mgmt: client.ApiClient, name: str, phase: str, ready: tuple[str, str],
             timeout: float = 60) -> dict[str, Any]:
    """The whole object once the controller reported `phase` with Ready (status, reason) for the
    generation it has now."""
    def seen() -> dict[str, Any] | None:
        obj = kube.request(mgmt, "GET", p(SM, name))
        st = obj.get("status") or {}
        conditions = {c["type"]: (c["status"], c["reason"]) for c in st.get("conditions", [])}
        return obj if (st.get("phase") == phase and conditions.get("Ready") == ready
                       and st.get("observedGeneration") == obj["metadata"]["generation"]) else None
    return eventually(seen, timeout, f"{name} {phase} with Ready={ready}")


def test_kstatus_and_argo_cd_read_every_live_machine_phase_as_the_readme_says(
        controller: ControllerProcess, mgmt: client.ApiClient, wl: client.ApiClient,
        management: Any, kubelet: Kubelet) -> None:
    """Settled — Active, Inactive, Disabled, Terminated — is Current / Healthy (Ready=True, the
    reason naming the state); on its way — Pending, ShuttingDown, a schedule never resolved — is
    InProgress / Progressing (Reconciling=True); Error is Failed / Degraded (Stalled=True)."""
    rack, sched = unique("rack"), unique("ms")
    closed, closed_sched = unique("rack"), unique("ms")
    off, never, broken = unique("rack"), unique("rack"), unique("rack")
    schedule(mgmt, sched, True)
    schedule(mgmt, closed_sched, True)
    scheduled_machine(mgmt, rack, sched, gracefulShutdownTimeout="1h")
    scheduled_machine(mgmt, off, sched, enabled=False)
    scheduled_machine(mgmt, never, unique("no-such-schedule"))
    broken_sched = unique("ms")
    schedule(mgmt, broken_sched, True)
    scheduled_machine(mgmt, broken, broken_sched, bootstrapSpec={
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig", "spec": {}})
    scheduled_machine(mgmt, closed, closed_sched)
    eventually(lambda: get(mgmt, p(MACHINES, closed)), 60, "the Machine")
    join_node(mgmt, wl, closed, unique("node"))
    wait_phase(mgmt, closed, "Active")
    schedule(mgmt, closed_sched, False)  # a real shutdown: drained (no pods), deleted, Inactive

    seen: dict[str, tuple[dict[str, Any], str, set[str]]] = {}  # state: (object, kstatus, types)
    eventually(lambda: get(mgmt, p(MACHINES, rack)), 60, "the Machine")
    seen["Pending"] = (observed(mgmt, rack, "Pending", ("False", "AwaitingNode")), "InProgress",
                       {"Ready", "Reconciling"})
    join_node(mgmt, wl, rack, unique("node"))
    seen["Active"] = (observed(mgmt, rack, "Active", ("True", "InSchedule")), "Current", {"Ready"})
    schedule(mgmt, sched, False)
    seen["ShuttingDown"] = (observed(mgmt, rack, "ShuttingDown", ("False", "ScheduleInactive")),
                            "InProgress", {"Ready", "Reconciling"})
    kube.merge_patch(mgmt, p(SM, rack), {"spec": {"killSwitch": True}})
    seen["Terminated"] = (observed(mgmt, rack, "Terminated", ("True", "KillSwitch")), "Current", {"Ready"})
    seen["Inactive"] = (observed(mgmt, closed, "Inactive", ("True", "ScheduleInactive")), "Current",
                        {"Ready"})
    seen["Disabled"] = (observed(mgmt, off, "Disabled", ("True", "Disabled")), "Current", {"Ready"})
    seen["never resolved"] = (observed(mgmt, never, "Inactive", ("False", "ScheduleNeverResolved")),
                              "InProgress", {"Ready", "Reconciling"})
    seen["Error"] = (observed(mgmt, broken, "Error", ("False", "CreateRejected")), "Failed",
                     {"Ready", "Stalled"})

    verdicts = dict(zip(seen, kstatus.verdicts([obj for obj, _, _ in seen.values()]), strict=True))
    for state, (obj, expected, types) in seen.items():
        conditions = obj["status"]["conditions"]
        present = {c["type"] for c in conditions if c["type"] in KSTATUS_TYPES}
        assert present == types, (state, conditions)
        assert all(c["status"] == "True" for c in conditions if c["type"] in ("Reconciling", "Stalled"))
        assert all(c["observedGeneration"] == obj["metadata"]["generation"] for c in conditions)
        argo, message = argo_health(health.KSTATUS_LUA, obj)
        assert (verdicts[state], argo) == (expected, ARGO_OF_KSTATUS[expected]), (state, message, conditions)
    # What a user runs: `kubectl wait` returns for a closed-window machine, as for an active one.
    kubectl(management.kubeconfig, "-n", NS, "wait", "--for=condition=Ready", "--timeout=30s",
            f"scheduledmachine/{closed}", f"scheduledmachine/{off}")
