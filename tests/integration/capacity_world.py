"""Helpers for the capacity controller's integration tests: the objects a tenant and a consumer
would create (as the admin), the provider status a provider would publish, and polling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import yaml
from kubernetes import client

from fivespot.devcluster import localrun
from fivespot.runtime import kube
from fivespot.runtime.leaderelection import Timing

T = TypeVar("T")
NS = "agents"
POOLS = ("pools.agents.example.com", "v1alpha1", "virtualmachinepools")
MANUAL = ("spotschedules.5spot.finos.org", "v1alpha1", "manualschedules")
SCAP = ("5spot.finos.org", "v1alpha1", "scheduledcapacities")
MACHINES = ("5spot.finos.org", "v1beta1", "scheduledmachines")
FAST_TIMING = Timing(lease_duration_s=4.0, renew_deadline_s=3.0, retry_period_s=1.0,
                     solo_lease_duration_s=8.0)
"""Leases short enough for a test to wait out (the defaults are 15/10/2 s, and 120 s for a lone
holder's solo lease: here twice the short lease, as a test waits out a lone holder too)."""
FAST_LEASES = ("--lease-duration", f"{FAST_TIMING.lease_duration_s:g}",
               "--renew-deadline", f"{FAST_TIMING.renew_deadline_s:g}",
               "--retry-period", f"{FAST_TIMING.retry_period_s:g}",
               "--solo-lease-duration", f"{FAST_TIMING.solo_lease_duration_s:g}")
"""FAST_TIMING as a controller process's flags."""


DEPLOYMENTS: Final = ("apps", "v1", "deployments")
DEPLOYMENT_CONSUMER: Final = """\
apiVersion: config.5spot.finos.org/v1alpha1
kind: CapacityConsumer
metadata: {name: deployments}
spec:
  group: apps
  version: v1
  kind: Deployment
  resource: deployments
  capacityPaths: [spec.replicas]
  maxActiveValue: 10
"""


def allow_deployments(config: Path, tenant: str = NS) -> None:
    """A config repo with a CapacityConsumer for Deployments' `spec.replicas`, allowed to the
    TenantPolicy named `tenant`."""
    tenants = config / "tenants.yaml"
    documents = list(yaml.safe_load_all(tenants.read_text()))
    for document in documents:
        if (document or {}).get("metadata", {}).get("name") == tenant:
            document["spec"]["consumers"].append("deployments")
    tenants.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    (config / "deployments.yaml").write_text(DEPLOYMENT_CONSUMER)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def path(kind: tuple[str, str, str], name: str | None = None, sub: str | None = None,
         ns: str = NS) -> str:
    return kube.resource_path(*kind, namespace=ns, name=name, subresource=sub)


def eventually(probe: Callable[[], T | Literal[False] | None], timeout: float = 30.0,
               what: str = "condition") -> T:
    """`probe()` once it is truthy (a probe may say "not yet" with False or None, so
    `lambda: cond and value` is one). The timeouts are generous (a loaded two-core CI machine):
    they cost nothing when the condition holds."""
    deadline = time.monotonic() + timeout
    last: T | Literal[False] | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


class World:
    """One tenant's objects in namespace `agents`, created and changed as the admin."""

    def __init__(self, admin: client.ApiClient, ns: str = NS):
        self.api = admin
        self.ns = ns

    def pool(self, name: str, warm: int = 0, in_use: int | None = None) -> None:
        kube.request(self.api, "POST", path(POOLS, ns=self.ns), body={
            "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": name}, "spec": {"warmReplicas": warm}})
        if in_use is not None:
            self.set_in_use(name, in_use)

    def deployment(self, name: str) -> None:
        """A Deployment at 0 replicas (no pod runs here: only its spec.replicas matters)."""
        kube.request(self.api, "POST", path(("apps", "v1", "deployments"), ns=self.ns), body={
            "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}})

    def set_in_use(self, name: str, in_use: int) -> None:
        kube.merge_patch(self.api, path(POOLS, name, "status", ns=self.ns), {"status": {"inUse": in_use}})

    def warm(self, name: str) -> Any:
        return self.get_pool(name)["spec"].get("warmReplicas")

    def get_pool(self, name: str) -> dict[str, Any]:
        return kube.request(self.api, "GET", path(POOLS, name, ns=self.ns))

    def schedule(self, name: str, active: bool | None) -> None:
        kube.request(self.api, "POST", path(MANUAL, ns=self.ns), body={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
            "metadata": {"name": name}, "spec": {"enabled": bool(active)}})
        if active is not None:
            self.set_active(name, active)

    def set_active(self, name: str, active: bool) -> None:
        """What the ManualSchedule provider would publish (written directly, as the admin)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kube.merge_patch(self.api, path(MANUAL, name, "status", ns=self.ns), {"status": {
            "active": active, "observedGeneration": 1, "lastTransitionTime": stamp,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled",
                            "message": "test", "lastTransitionTime": stamp}]}})

    def scap(self, name: str, schedule: str, pool: str, active_value: int = 7, *,
             handback: dict[str, str] | None = None, node: str | None = None,
             capacity_path: str = "spec.warmReplicas",
             target: tuple[str, str] = ("pools.agents.example.com/v1alpha1", "VirtualMachinePool"),
             ) -> None:
        """A ScheduledCapacity on `pool` (a VirtualMachinePool, unless `target` names another
        apiVersion and kind)."""
        spec: dict[str, Any] = {
            "schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                         "kind": "ManualSchedule", "name": schedule},
            "targetRef": {"apiVersion": target[0], "kind": target[1], "name": pool},
            "capacity": {"path": capacity_path, "activeValue": active_value},
        }
        if handback is not None:
            spec["handback"] = handback
        if node is not None:
            spec["nodeName"] = node
        kube.request(self.api, "POST", path(SCAP, ns=self.ns), body={
            "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name}, "spec": spec})

    def get_scap(self, name: str) -> dict[str, Any]:
        return kube.request(self.api, "GET", path(SCAP, name, ns=self.ns))

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.get_scap(name).get("status") or {}
        return status

    def phase(self, name: str) -> Any:
        return self.status(name).get("phase")

    def condition(self, name: str, type_: str) -> dict[str, Any]:
        for c in self.status(name).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return {}

    def wait_phase(self, name: str, phase: str, timeout: float = 30.0) -> dict[str, Any]:
        return eventually(lambda: (s := self.status(name)).get("phase") == phase and s,
                          timeout, f"{name} phase {phase}")

    def machine(self, name: str, node: str, schedule: str) -> None:
        kube.request(self.api, "POST", path(MACHINES, ns=self.ns), body={
            "apiVersion": "5spot.finos.org/v1beta1", "kind": "ScheduledMachine",
            "metadata": {"name": name},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": schedule}}})
        kube.merge_patch(self.api, path(MACHINES, name, "status", ns=self.ns),
                         {"status": {"nodeRef": {"name": node}}})

    def delete_machine(self, name: str) -> None:
        kube.request(self.api, "DELETE", path(MACHINES, name, ns=self.ns))


@contextmanager
def flipping(world: World, schedule: str, every_s: float = 0.5) -> Iterator[None]:
    """The schedule flips every `every_s` on its own thread while the block runs."""
    stop = threading.Event()

    def flip() -> None:
        active = True
        while not stop.is_set():
            active = not active
            world.set_active(schedule, active)
            stop.wait(every_s)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        yield
    finally:
        stop.set()
        flipper.join(5)


class ControllerProcess:
    """One `python -m fivespot.controllers capacity` (or `machine`) child process, restartable, logging
    JSON to a file."""

    def __init__(self, kubeconfig: Path, bundle: Path, identity: str, log_file: Path,
                 partitions: tuple[str, ...] = (), extra: tuple[str, ...] = FAST_LEASES,
                 controller: str = "capacity"):
        self.kubeconfig, self.bundle, self.identity = kubeconfig, bundle, identity
        self.log_file, self.partitions, self.extra = log_file, partitions, extra
        self.controller = controller
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> "ControllerProcess":
        mark = self.log_file.stat().st_size if self.log_file.exists() else 0
        self.process = localrun.start_controller(self.kubeconfig, self.bundle, self.identity,
                                                 self.log_file, partitions=self.partitions,
                                                 extra=self.extra, controller=self.controller)
        self.port = eventually(lambda: self._start_port(mark), 60, "controller start line")
        return self

    def _start_port(self, mark: int) -> int | None:
        for entry in self.entries(since=mark):
            if entry.get("msg") == f"{self.controller} controller starting" and entry.get("pid") == self.pid:
                return int(entry["metrics_port"])
        return None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_leading(self, *partitions: str, timeout: float = 60.0) -> None:
        def leading() -> bool:
            status, body = localrun.http_get(self.port, "/metrics")
            return status == 200 and all(
                f'fivespot_is_leader{{controller="fivespot-{self.controller}-controller",'
                f'partition="{p}"}} 1.0' in body for p in partitions)
        eventually(leading, timeout, f"{self.identity} leading {partitions}")

    def metrics(self) -> str:
        return localrun.http_get(self.port, "/metrics")[1]

    def kill(self) -> None:
        """SIGKILL: no lease release, no goodbye."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def terminate(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def entries(self, since: int = 0) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        with open(self.log_file, "rb") as handle:
            handle.seek(since)
            data = handle.read().decode(errors="replace")
        found = []
        for line in data.splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
        return found

    def writes(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("msg") == "target written"]


class History:
    """Every revision of one kind's objects in one namespace, as the API server's watch delivers
    them from `since` on (a watch from a resourceVersion replays every later change, in etcd
    order): the independent record of what was written, and at which revision."""

    def __init__(self, admin: client.ApiClient, kind: tuple[str, str, str], since: str,
                 ns: str = NS, timeout_s: int = 600):
        import threading

        self.events: list[tuple[int, str, str, dict[str, Any]]] = []
        """(resourceVersion, event type, name, object), in the order delivered."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response = kube.stream(admin, path(kind, ns=ns), query={
            "watch": "1", "resourceVersion": since, "allowWatchBookmarks": "false",
            "timeoutSeconds": str(timeout_s)}, timeout=(5.0, timeout_s + 60.0))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buffer = b""
        try:
            for chunk in self._response.response.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        self._add(json.loads(line))
                if self._stop.is_set():
                    return
        except Exception:  # the stream closed under us at stop()
            return

    def _add(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        if event.get("type") == "ERROR" or "resourceVersion" not in meta:
            return
        with self._lock:
            self.events.append((int(meta["resourceVersion"]), str(event["type"]),
                                str(meta.get("name")), obj))

    def of(self, name: str) -> list[tuple[int, str, dict[str, Any]]]:
        with self._lock:
            return [(rv, kind, obj) for rv, kind, n, obj in self.events if n == name]

    def seen(self, name: str, kind: str) -> bool:
        with self._lock:
            return any(n == name and k == kind for _, k, n, _ in self.events)

    def stop(self) -> None:
        """End the watch. The socket is shut down, not closed: closing would wait for the
        buffered reader's lock, which the reading thread holds while it blocks in recv."""
        import socket

        self._stop.set()
        connection = getattr(self._response.response, "connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(10)


def current_revision(admin: client.ApiClient, kind: tuple[str, str, str], ns: str = NS) -> str:
    """The etcd revision now (a consistent list's resourceVersion)."""
    answer = kube.request(admin, "GET", path(kind, ns=ns), query={"limit": "1"})
    return str(answer["metadata"]["resourceVersion"])
