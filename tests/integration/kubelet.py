"""A test helper that plays the kubelet's part (and the scheduler's) for one node, so compiled
Deployments really run on the local control plane: kube-controller-manager's deployment,
replicaset and endpoint controllers make the pods and endpoints, and this node runs them.

For each pod it sees: bind it to the node (there is no scheduler), start its container from the
built image with tests/integration/pod_sandbox.py (the image's entrypoint, the pod's args, user,
read-only root, volumes and ServiceAccount token, in its own PID, mount and network namespace
with an address of its own), run its readiness probe as the kubelet does and report the pod's
status (IP, Ready) to the API server, which is what makes a Deployment Available and a Service's
endpoints point at it. A pod being deleted runs its preStop sleep (without blocking the node),
then gets SIGTERM, the rest of its grace period, then SIGKILL, and its deletion is finished. An image other than the built one is reported as not pullable, like a node
without a registry would: its pod stays Pending, as on a real node.

Pods reach the API server at 10.0.0.1, the `kubernetes` Service address the serving certificate
names, on the host end of their veth; the API server (bound to 0.0.0.0) reaches the webhook's
pods at their endpoints (`--enable-aggregator-routing`).
"""

from __future__ import annotations

import datetime
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from fivespot.runtime import kube
from tests.integration.pod_sandbox import (
    PodNetwork,
    SandboxedProcess,
    image_config,
    pod_process_spec,
    remove,
    scratch_dir,
)

NODE: Final = "fivespot-node"
GATEWAY: Final = "10.0.0.1"
POD_NET: Final = "10.213"
POLL_S: Final = 0.5


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RunningPod:
    namespace: str
    name: str
    uid: str
    ip: str
    process: SandboxedProcess
    scratch: Path
    probe: dict[str, Any] | None
    port_names: dict[str, int]
    ready: bool = False
    next_probe: float = 0.0


@dataclass
class LocalKubelet:
    api: Any
    image_reference: str
    image_layout: Path
    image_tag: str
    rootfs: Path
    api_port: int
    ca_pem: bytes
    pods: dict[str, RunningPod] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    stopping: dict[str, float] = field(default_factory=dict)
    """Pods being deleted: when their preStop sleep ends (monotonic seconds)."""
    errors: list[str] = field(default_factory=list)
    _next_ip: int = 2
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._register_node()
        self._thread = threading.Thread(target=self._loop, name="local-kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop every pod (SIGTERM, grace, SIGKILL) from the node's own thread, which started
        them: were the thread to end first, its pods would be killed outright (see
        `SandboxedProcess`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        self._stop_pods()

    def _stop_pods(self) -> None:
        for key in list(self.pods):
            pod = self.pods.pop(key)
            pod.process.stop()
            remove(pod.scratch)

    def _register_node(self) -> None:
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}
        try:
            kube.request(self.api, "POST", "/api/v1/nodes", body=node)
        except kube.ApiError as error:
            if not error.conflict:
                raise
        kube.request(self.api, "PATCH", f"/api/v1/nodes/{NODE}/status", content_type=kube.MERGE_PATCH,
                     body={"status": {"conditions": [{"type": "Ready", "status": "True",
                                                      "reason": "KubeletReady", "lastHeartbeatTime": _now(),
                                                      "lastTransitionTime": _now()}],
                                      "addresses": [{"type": "InternalIP", "address": GATEWAY}],
                                      "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                                      "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"}}})

    # --- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self._sync()
                except Exception as error:  # noqa: BLE001 - keep the node alive; the test reads errors
                    self.errors.append(f"{type(error).__name__}: {error}")
                self._stop.wait(POLL_S)
        finally:
            self._stop_pods()

    def _sync(self) -> None:
        listed = kube.request(self.api, "GET", "/api/v1/pods").get("items") or []
        seen = set()
        for pod in listed:
            key = kube.object_key(pod)
            seen.add(key)
            meta, spec = pod["metadata"], pod["spec"]
            if meta.get("deletionTimestamp"):
                if time.monotonic() >= self.stopping.setdefault(key, time.monotonic() + _pre_stop_s(pod)):
                    self._terminate(key, pod)
            elif not spec.get("nodeName"):
                self._bind(pod)
            elif spec["nodeName"] == NODE and key not in self.pods and key not in self.refused:
                self._run(key, pod)
        for key in [k for k in self.pods if k not in seen]:
            gone = self.pods.pop(key)
            gone.process.stop()
            remove(gone.scratch)
        for running in list(self.pods.values()):
            self._probe(running)

    def _bind(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        kube.request(self.api, "POST", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding",
                     body={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"]},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}})

    def _run(self, key: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        (container,) = spec["containers"]
        if container["image"] != self.image_reference:
            self.refused[key] = container["image"]
            self._status(pod, ip=None, ready=False, waiting=("ErrImageNeverPull",
                         f"image {container['image']} is not on this node and it has no registry"))
            return
        scratch = scratch_dir()
        ip = f"{POD_NET}.{self._next_ip // 250}.{self._next_ip % 250 + 2}"
        interface = f"fsp{self._next_ip}"
        self._next_ip += 1
        process_spec = pod_process_spec(
            image_config(self.image_layout, self.image_tag), meta["namespace"], spec, self.api,
            pod_name=meta["name"], api_host=GATEWAY, api_port=self.api_port, ca_pem=self.ca_pem,
            scratch=scratch)
        process = SandboxedProcess(self.rootfs, process_spec, scratch / "container.log",
                                   PodNetwork(ip, GATEWAY, interface))
        ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports") or [] if "name" in p}
        self.pods[key] = RunningPod(meta["namespace"], meta["name"], meta["uid"], ip, process, scratch,
                                    container.get("readinessProbe"), ports)
        self._status(pod, ip=ip, ready=False)

    def _probe(self, running: RunningPod) -> None:
        now = time.monotonic()
        if now < running.next_probe:
            return
        probe = running.probe or {}
        running.next_probe = now + float(probe.get("periodSeconds", 10)) / 5
        alive = running.process.alive()
        ready = alive and (not probe or _http_probe(running, probe))
        if ready != running.ready:
            running.ready = ready
            pod = kube.request(self.api, "GET", f"/api/v1/namespaces/{running.namespace}/pods/{running.name}")
            self._status(pod, ip=running.ip, ready=ready,
                         terminated=None if alive else running.process.output()[-500:])

    def _status(self, pod: dict[str, Any], *, ip: str | None, ready: bool,
                waiting: tuple[str, str] | None = None, terminated: str | None = None) -> None:
        meta = pod["metadata"]
        (container,) = pod["spec"]["containers"]
        flag = "True" if ready else "False"
        conditions = [{"type": t, "status": s, "lastTransitionTime": _now()} for t, s in
                      (("PodScheduled", "True"), ("Initialized", "True"),
                       ("ContainersReady", flag), ("Ready", flag))]
        if waiting is not None:
            state: dict[str, Any] = {"waiting": {"reason": waiting[0], "message": waiting[1]}}
        elif terminated is not None:
            state = {"terminated": {"exitCode": 1, "reason": "Error", "message": terminated}}
        else:
            state = {"running": {"startedAt": _now()}}
        status: dict[str, Any] = {
            "phase": "Pending" if waiting else ("Failed" if terminated else "Running"),
            "conditions": conditions, "hostIP": GATEWAY, "startTime": _now(),
            "containerStatuses": [{"name": container["name"], "image": container["image"],
                                   "imageID": "", "ready": ready, "started": waiting is None,
                                   "restartCount": 0, "state": state}],
        }
        if ip is not None:
            status["podIP"], status["podIPs"] = ip, [{"ip": ip}]
        kube.request(self.api, "PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                     content_type=kube.MERGE_PATCH, body={"status": status})

    def _terminate(self, key: str, pod: dict[str, Any]) -> None:
        running = self.pods.pop(key, None)
        self.refused.pop(key, None)
        self.stopping.pop(key, None)
        if running is not None:
            grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
            running.process.stop(max(grace - _pre_stop_s(pod), 1.0))  # the sleep counts, as in a kubelet
            remove(running.scratch)
        meta = pod["metadata"]
        try:
            kube.request(self.api, "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                         query={"gracePeriodSeconds": "0"})
        except kube.ApiError as error:
            if not error.not_found:
                raise


def _pre_stop_s(pod: dict[str, Any]) -> float:
    """The preStop sleep of the pod's container: the only preStop action fivespot's pods use."""
    hook = ((pod["spec"]["containers"][0].get("lifecycle") or {}).get("preStop") or {})
    return float((hook.get("sleep") or {}).get("seconds", 0))


def _http_probe(running: RunningPod, probe: dict[str, Any]) -> bool:
    get = probe.get("httpGet") or {}
    port = get.get("port")
    number = running.port_names.get(port, port) if isinstance(port, str) else port
    scheme = str(get.get("scheme", "HTTP")).lower()
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # as the kubelet probes
    url = f"{scheme}://{running.ip}:{number}{get.get('path', '/')}"
    try:
        with urllib.request.urlopen(url, timeout=float(probe.get("timeoutSeconds", 1)) + 1,
                                    context=context if scheme == "https" else None) as answer:
            return 200 <= int(answer.status) < 400
    except OSError:
        return False
