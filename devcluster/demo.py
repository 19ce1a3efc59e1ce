"""`make demo` (`python -m devcluster.demo`): the capacity controller doing its whole job on a
real local control plane, as separate processes with their compiled identities.

It starts the control plane (or uses `--kubeconfig`), compiles and installs the agent-sandbox
example, starts the admission webhook and the ManualSchedule provider when their modules are
present (and says so when they are not), starts the capacity controller, then flips a
ManualSchedule and prints `kubectl get scap` and the VirtualMachinePool's warmReplicas at every
step of the handback: Active -> HandingBack (0 written, counter still 3) -> Inactive.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import importlib.util
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devcluster import localrun
from runtime import kube

NS = "agents"
POOL, SCHEDULE, SCAP = "demo-pool", "demo-window", "demo-capacity"


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def wait(check: Callable[[], bool], timeout: float, what: str) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except kube.ApiError:
            pass
        time.sleep(0.1)
    print(f"   (still waiting for {what} after {timeout:.0f}s)")
    return False


class Demo:
    def __init__(self, kubeconfig: Path, work: Path):
        self.kubeconfig = kubeconfig
        self.work = work
        self.api = kube.load_client(kubeconfig)
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.provider_running = False

    # --- processes ------------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.work / f"{name}.log", "ab")
        process = subprocess.Popen([sys.executable, *argv], stdout=log, stderr=subprocess.STDOUT,
                                   cwd=localrun.ROOT, start_new_session=True)
        log.close()
        self.children.append((name, process))
        print(f"   started {name} (pid {process.pid}, log {self.work / f'{name}.log'})")
        return process

    def sa_kubeconfig(self, name: str) -> Path:
        from devcluster.clients import service_account_kubeconfig

        return service_account_kubeconfig(self.kubeconfig, localrun.INSTALL_NAMESPACE, name,
                                          self.work / f"{name}.kubeconfig")

    def start_webhook(self, bundle: Path) -> bool:
        if importlib.util.find_spec("webhook.cli") is None:
            print("   note: no webhook module in this checkout; admission runs on the VAPs alone")
            return False
        from api.identities import WEBHOOK, WEBHOOK_CONFIGURATION
        from webhook.tls import issue, new_ca

        now = datetime.datetime.now(datetime.timezone.utc)
        ca, ca_key = new_ca("fivespot-demo-ca", now)
        leaf = issue(ca, ca_key, "fivespot-webhook", now, ip_addresses=("127.0.0.1",),
                     dns_names=("localhost",), server=True)
        (self.work / "tls.crt").write_bytes(leaf.cert_pem)
        (self.work / "tls.key").write_bytes(leaf.key_pem)
        port = _free_port()
        self.spawn("webhook", ["-m", "webhook", "serve", "--bundle", str(bundle), "--port", str(port),
                               "--bind", "127.0.0.1", "--kubeconfig", str(self.sa_kubeconfig(WEBHOOK)),
                               "--certificate-mode", "files", "--tls-cert", str(self.work / "tls.crt"),
                               "--tls-key", str(self.work / "tls.key"), "--metrics-port", "0"])
        if not wait(lambda: _listening(port), 30, "the webhook's TLS port"):
            print("   note: the webhook did not come up; removing its configuration")
            return False
        path = f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK_CONFIGURATION}"
        config = kube.request(self.api, "GET", path)
        for hook in config.get("webhooks") or []:
            service = hook["clientConfig"].get("service") or {}
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{service.get('path', '/')}",
                                    "caBundle": base64.b64encode(ca.cert_pem).decode()}
        kube.request(self.api, "PUT", path, body=config)
        print(f"   webhook configuration now points at https://127.0.0.1:{port} (local process)")
        return True

    def start_provider(self, bundle: Path) -> None:
        if importlib.util.find_spec("controllers.providers.cli") is None:
            print("   note: no provider module in this checkout; the demo writes the "
                  "ManualSchedule's status itself, as its provider would")
            return
        from api.providers import MANUAL_SCHEDULE

        identity = MANUAL_SCHEDULE.identity
        self.spawn("provider-manual", ["-m", "controllers.providers", "manual", "--bundle", str(bundle),
                                       "--kubeconfig", str(self.sa_kubeconfig(identity)),
                                       "--metrics-port", "0", "--identity", "demo-provider"])
        self.provider_running = True

    def start_controller(self, bundle: Path) -> None:
        self.spawn("capacity-controller", [
            "-m", "controllers", "capacity", "--bundle", str(bundle),
            "--kubeconfig", str(localrun.controller_kubeconfig(self.kubeconfig, self.work / "capacity.kubeconfig")),
            "--metrics-port", "0", "--identity", "demo-capacity"])

    def stop(self) -> None:
        for name, process in reversed(self.children):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()

    # --- the story ------------------------------------------------------------------------------

    def show(self) -> None:
        from devcluster.kubectl import kubectl

        print(kubectl(self.kubeconfig, "-n", NS, "get", "scap", SCAP).rstrip())
        pool = kube.request(self.api, "GET", _path("pools.agents.example.com", "virtualmachinepools", POOL))
        print(f"   VirtualMachinePool {POOL}: spec.warmReplicas={pool['spec'].get('warmReplicas')} "
              f"status.inUse={(pool.get('status') or {}).get('inUse')}")

    def phase(self) -> Any:
        scap = kube.request(self.api, "GET", _path("5spot.finos.org", "scheduledcapacities", SCAP))
        return (scap.get("status") or {}).get("phase")

    def flip(self, enabled: bool) -> None:
        path = _path("spotschedules.5spot.finos.org", "manualschedules", SCHEDULE)
        kube.merge_patch(self.api, path, {"spec": {"enabled": enabled}})
        print(f"   kubectl -n {NS} patch manualschedule {SCHEDULE} --type=merge "
              f"-p '{{\"spec\":{{\"enabled\":{str(enabled).lower()}}}}}'")
        if not self.provider_running:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            kube.merge_patch(self.api, path + "/status", {"status": {
                "active": enabled, "observedGeneration": 1, "lastTransitionTime": stamp}})

    def in_use(self, count: int) -> None:
        path = _path("pools.agents.example.com", "virtualmachinepools", POOL, "status")
        kube.merge_patch(self.api, path, {"status": {"inUse": count}})
        print(f"   (the consumer reports status.inUse={count})")

    def run(self) -> int:
        say("compile and install examples/agent-sandbox")
        bundle = localrun.compile_and_install(self.kubeconfig, self.work / "out", webhook=True)
        say("start the components as local processes, each with its compiled identity")
        if not self.start_webhook(bundle):
            localrun.remove_webhook_configuration(self.kubeconfig)
        self.start_provider(bundle)
        self.start_controller(bundle)

        say("a tenant's objects in namespace agents")
        kube.request(self.api, "POST", _path("pools.agents.example.com", "virtualmachinepools"), body={
            "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": POOL}, "spec": {"warmReplicas": 0}})
        self.in_use(0)
        kube.request(self.api, "POST", _path("spotschedules.5spot.finos.org", "manualschedules"), body={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
            "metadata": {"name": SCHEDULE}, "spec": {"enabled": False}})
        self.flip(False)
        kube.request(self.api, "POST", _path("5spot.finos.org", "scheduledcapacities"), body={
            "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": SCAP},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": SCHEDULE},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": POOL},
                     "capacity": {"path": "spec.warmReplicas", "activeValue": 10},
                     "handback": {"drainedPath": "status.inUse", "timeout": "10m"}}})
        wait(lambda: self.phase() is not None, 30, "the first reconcile")
        self.show()

        say("the window opens")
        self.flip(True)
        wait(lambda: self.phase() == "Active", 20, "Active")
        self.show()
        self.in_use(3)

        say("the window closes: 0 is written first, then the drain is awaited")
        self.flip(False)
        wait(lambda: self.phase() == "HandingBack", 20, "HandingBack")
        self.show()

        say("the consumer drains its last sandboxes")
        self.in_use(0)
        wait(lambda: self.phase() == "Inactive", 20, "Inactive")
        self.show()

        say("reopening works at any time: the value is simply written again")
        self.flip(True)
        wait(lambda: self.phase() == "Active", 20, "Active")
        self.show()
        return 0


def _path(group: str, plural: str, name: str | None = None, sub: str | None = None) -> str:
    version = {"pools.agents.example.com": "v1alpha1", "5spot.finos.org": "v1alpha1",
               "spotschedules.5spot.finos.org": "v1alpha1"}[group]
    return kube.resource_path(group, version, plural, NS, name, sub)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", type=Path,
                        help="use this running cluster (e.g. .cluster/kubeconfig from `make cluster`)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder with the logs")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fivespot-demo-"))
    plane = None
    if args.kubeconfig is None:
        from devcluster.build import cached_binaries, ensure_binaries
        from devcluster.controlplane import ControlPlane

        say("start a local control plane (kube-apiserver + etcd)")
        plane = ControlPlane(cached_binaries() or ensure_binaries(), work / "cluster", owned=True)
        plane.start()
        print(f"   {plane.server}")
    demo = Demo(args.kubeconfig or (work / "cluster" / "kubeconfig"), work)
    try:
        return demo.run()
    finally:
        demo.stop()
        if plane is not None:
            plane.stop()
        if args.keep:
            print(f"\nlogs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
