"""fivespot's webhook stopped (failurePolicy Fail), on a real API server calling the real webhook
over TLS, with the capacity controller running: what is refused, what is not, what status says.

- a target write the API server refuses (its target guard cannot be called) reads as such within
  WRITE_FAILED_BOUND_S: `CapacityWritten=False/WriteFailed` with the server's message, Ready=False,
  Stalled=True, a Warning Event, a warning log line — and recovers once the webhook is back;
- the emergency controls are admitted: `enabled: false`, `killSwitch: true`, delete;
- nothing outside fivespot's kinds and identity is refused (another's write of a consumer's
  object, a ConfigMap, a Deployment), while an ordinary ScheduledCapacity edit is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster import localrun
from fivespot.devcluster.clients import admin_client
from fivespot.devcluster.controlplane import ControlPlane
from fivespot.devcluster.kubectl import install
from fivespot.runtime import kube
from tests.integration.capacity_world import (
    POOLS,
    SCAP,
    ControllerProcess,
    World,
    eventually,
    path,
    unique,
)
from tests.integration.test_webhook_admission import (
    CONFIGURATION,
    ROOT,
    Server,
    _rewrite_to_local_url,
    free_port,
    start_webhook,
)

pytestmark = pytest.mark.integration

EXAMPLE = ROOT / "examples" / "agent-sandbox"
NS = "agents"
WRITE_FAILED_BOUND_S = 10.0
"""From the decision to write to `WriteFailed` in status: the first refused write is reported
(a second on a loaded machine: the backoff's first retry is 5 ms later)."""
RECOVERY_BOUND_S = 30.0
"""From the webhook answering again to the write landing: the retry backoff's cap (workqueue)
plus a reconcile, on a loaded two-core machine."""


class Webhook:
    def __init__(self, kubeconfig: Path, out: Path, work: Path) -> None:
        self.kubeconfig, self.out, self.work = kubeconfig, out, work
        self.port = free_port()
        self.server: Server | None = None

    def start(self) -> None:
        self.server = start_webhook(self.kubeconfig, self.out, self.port,
                                    self.work / f"webhook-{time.monotonic_ns()}.log",
                                    ["--workers", "1"], ready_s=90)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@pytest.fixture(scope="module")
def plane(module_plane: ControlPlane) -> ControlPlane:
    return module_plane


@pytest.fixture(scope="module")
def stopped(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The example installed with its webhook running, the capacity controller running; then the
    webhook stopped."""
    work = tmp_path_factory.mktemp("webhook-down")
    out = work / "out"
    write_tree(compile_repo(EXAMPLE / "config").files, out)
    webhook = Webhook(plane.kubeconfig, out, work)
    _rewrite_to_local_url(out, webhook.port)
    localrun.ensure_namespaces(plane.kubeconfig, {NS, "agents-gpu"})
    admin = admin_client(plane.kubeconfig)
    controller: ControllerProcess | None = None
    try:
        install(plane.kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"],
                after_layer=lambda layer: webhook.start() if layer == "workloads" else None)
        eventually(lambda: all(h["clientConfig"].get("caBundle") for h in kube.request(
            admin, "GET", f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"
                          f"{CONFIGURATION}")["webhooks"]), 60, "the caBundle injected")
        sa = localrun.controller_kubeconfig(plane.kubeconfig, work / "controller.kubeconfig")
        controller = ControllerProcess(sa, out / "bundle.json", unique("wh"), work / "controller.log").start()
        controller.wait_leading("default", "agents")
        world = World(admin)
        world.schedule("window", False)
        for name in ("gated", "stopper", "killed", "doomed"):
            world.pool(name)
            world.scap(name, "window", name, 3)
        eventually(lambda: all(world.phase(n) == "Inactive" for n in ("gated", "stopper")), 60,
                   "Inactive")
        webhook.stop()
        yield {"world": world, "admin": admin, "webhook": webhook, "controller": controller}
    finally:
        webhook.stop()
        if controller is not None:
            controller.terminate()
        admin.close()


def test_a_refused_target_write_reads_write_failed_then_recovers_when_the_webhook_is_back(
        stopped: dict[str, Any]) -> None:
    world: World = stopped["world"]
    started = time.monotonic()
    world.set_active("window", True)
    failed = eventually(lambda: (c := world.condition("gated", "CapacityWritten")).get("reason")
                        == "WriteFailed" and c, WRITE_FAILED_BOUND_S, "WriteFailed")
    print(f"recovery: webhook-down-write-failed-reported {time.monotonic() - started:.3f}")
    assert "failed calling webhook" in failed["message"] or "target-guard" in failed["message"]
    assert world.condition("gated", "Stalled")["reason"] == "WriteFailed"
    assert world.condition("gated", "Ready")["status"] == "False"
    assert world.warm("gated") == 0, "nothing was written"
    events = kube.request(world.api, "GET", path(("events.k8s.io", "v1", "events"), ns=NS))["items"]
    assert any(e["reason"] == "WriteFailed" and e["type"] == "Warning"
               and e["regarding"]["name"] == "gated" for e in events)
    controller: ControllerProcess = stopped["controller"]
    assert any(e.get("msg") == "target write failed; retrying" and e.get("level") == "warning"
               for e in controller.entries())
    webhook = stopped["webhook"]
    webhook.start()
    back = time.monotonic()
    world.wait_phase("gated", "Active", RECOVERY_BOUND_S)
    print(f"recovery: webhook-down-write-lands-after-restart {time.monotonic() - back:.3f}")
    assert world.warm("gated") == 3
    assert world.condition("gated", "CapacityWritten")["status"] == "True"
    assert "Stalled" not in {c["type"] for c in world.status("gated").get("conditions", [])}
    for name in ("stopper", "killed"):  # what the next test stops holds capacity then
        world.wait_phase(name, "Active", RECOVERY_BOUND_S)
    webhook.stop()


def test_the_emergency_controls_are_admitted_and_nothing_outside_fivespot_is_refused(
        stopped: dict[str, Any]) -> None:
    world: World = stopped["world"]
    admin: client.ApiClient = stopped["admin"]
    assert stopped["webhook"].server.process.poll() is not None, "the webhook is down"
    kube.merge_patch(admin, path(SCAP, "stopper", ns=NS), {"spec": {"enabled": False}})
    kube.merge_patch(admin, path(SCAP, "killed", ns=NS), {"spec": {"killSwitch": True}})
    kube.request(admin, "DELETE", path(SCAP, "doomed", ns=NS))
    # Admitted and recorded; the handback's write of 0 itself is vetted by the target guard, so
    # it lands once the webhook answers again — and the status says it is waiting on that.
    eventually(lambda: world.condition("stopper", "CapacityWritten").get("reason") == "WriteFailed",
               WRITE_FAILED_BOUND_S, "the stop's write of 0 reported as refused")
    with pytest.raises(kube.ApiError) as refused:
        kube.merge_patch(admin, path(SCAP, "gated", ns=NS), {"spec": {"capacity": {"activeValue": 2}}})
    assert refused.value.status == 500 and "failed calling webhook" in refused.value.message
    # Outside fivespot's kinds and identity: nobody else waits on fivespot's webhook.
    kube.merge_patch(admin, path(POOLS, "stopper", ns=NS), {"spec": {"warmReplicas": 1}})
    kube.request(admin, "POST", path(("", "v1", "configmaps"), ns=NS),
                 body={"metadata": {"name": unique("cm")}, "data": {"a": "b"}})
    world.deployment(unique("web"))
