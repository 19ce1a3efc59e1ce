"""`fivespot dev CONFIG_DIR`: any config repo, running on the project's own local control plane.

What it does, in order: start a local control plane (kube-apiserver + etcd, as the tests do);
compile CONFIG_DIR; create the tenant namespaces the config names; `fivespot install` the output
without what only a real cluster can run (the Deployments and the webhook configuration);
start every compiled component as a local process, with the arguments its Deployment gives it
and the token of its compiled ServiceAccount (so the compiled RBAC decides what it may do); then
point the webhook configuration at the local webhook by URL (`clientConfig.url`, a local CA) and
apply it. It prints how to point kubectl at the cluster and, while it runs, every change of a
ScheduledCapacity's phase and written value. Ctrl-C (or SIGTERM) stops the components, then the
control plane: nothing it started outlives it (each child also dies with it, PR_SET_PDEATHSIG).

The components are the compiled Deployments, read from the output, not a list kept here: a new
component or argument in the compiler is run by `dev` without a change to this file.
"""

from __future__ import annotations

import base64
import copy
import datetime
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from fivespot.runtime import kube
from fivespot.runtime.processes import die_with_parent
from fivespot.deploy.installer import InstallError, Installer
from fivespot.deploy.manifests import Manifest, load

BUNDLE_FLAG: Final = "--bundle"
WEBHOOK_KINDS: Final = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
READY_TIMEOUT_S: Final = 60.0


class ComponentExited(Exception):
    """A component process stopped (or never came up) while dev ran; the message has its log."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Component:
    """A compiled Deployment, as a local process runs it."""

    name: str
    namespace: str
    service_account: str
    args: tuple[str, ...]
    serves_admission: bool


def components(manifests: Sequence[Manifest]) -> list[Component]:
    found = []
    for manifest in manifests:
        if manifest.kind != "Deployment":
            continue
        pod = manifest.obj["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        args = tuple(container.get("args") or ())
        found.append(Component(manifest.name, manifest.namespace or "default",
                               pod["serviceAccountName"], args,
                               serves_admission=args[:2] == ("webhook", "serve")))
    return sorted(found, key=lambda c: c.name)


LOCAL_ONLY_FLAGS: Final = ("--cert-dir", "--client-ca-path", "--client-subject-names")
"""Deployment flags naming what only the cluster has: the mounted serving pair (a local CA
serves instead), and the client CA of `webhook.clientAuthentication` (the local API server
presents no client certificate, so dev's webhook does not ask for one)."""


def local_args(component: Component, bundle: Path, kubeconfig: Path, *, webhook_port: int,
               tls: tuple[Path, Path] | None, metrics_port: int) -> list[str]:
    """The Deployment's arguments for a local process: the bundle file of the output, the
    component's own kubeconfig, free ports; the webhook serves the files of a local CA."""
    args = list(component.args)
    if BUNDLE_FLAG in args:
        args[args.index(BUNDLE_FLAG) + 1] = str(bundle)
    for flag in LOCAL_ONLY_FLAGS:
        if flag in args:
            del args[args.index(flag):args.index(flag) + 2]
    if component.serves_admission:
        if "--port" in args:
            args[args.index("--port") + 1] = str(webhook_port)
        assert tls is not None
        args += ["--bind", "127.0.0.1", "--certificate-mode", "files",
                 "--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
    return [*args, "--kubeconfig", str(kubeconfig), "--metrics-port", str(metrics_port)]


def local_webhook_configuration(manifest: Manifest, port: int, ca_pem: bytes) -> Manifest:
    """The compiled webhook configuration, calling the local webhook by URL."""
    obj = copy.deepcopy(manifest.obj)
    for hook in obj.get("webhooks") or []:
        service = hook["clientConfig"].get("service") or {}
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{service.get('path', '/')}",
                                "caBundle": base64.b64encode(ca_pem).decode()}
    annotations = obj["metadata"].get("annotations") or {}
    annotations.pop("cert-manager.io/inject-ca-from", None)
    return Manifest(obj, manifest.source, manifest.wave)


def tenant_namespaces(manifests: Sequence[Manifest], install_namespace: str) -> list[str]:
    """Namespaces the output writes into or grants to tenants, other than fivespot's own."""
    found = {m.namespace for m in manifests if m.namespace and m.namespace != install_namespace}
    for manifest in manifests:
        if manifest.kind == "ValidatingAdmissionPolicyBinding":
            selector = ((manifest.obj["spec"].get("matchResources") or {})
                        .get("namespaceSelector") or {})
            for expression in selector.get("matchExpressions") or []:
                if expression.get("key") == "kubernetes.io/metadata.name":
                    found.update(expression.get("values") or [])
    found.discard(None)
    return sorted(n for n in found if isinstance(n, str))


@dataclass
class DevSession:
    """One `fivespot dev` run: its control plane, its output, its processes."""

    config_dir: Path
    state_dir: Path
    crds: Sequence[Path] = ()
    report: Callable[[str], None] = print
    apiserver_args: Sequence[str] = ()
    """More kube-apiserver flags (the peers' benchmark turns the audit log on)."""
    processes: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    metrics_ports: dict[str, int] = field(default_factory=dict)
    """Each component's /metrics (and, for controllers, /healthz and /readyz) port."""
    components: dict[str, Component] = field(default_factory=dict)
    _launch: Any = None
    plane: Any = None
    api: Any = None
    kubeconfig: Path | None = None

    def start(self) -> None:
        from fivespot.compiler.output import write_tree
        from fivespot.compiler.pipeline import compile_repo
        from fivespot.devcluster.build import ensure_binaries, selected_version
        from fivespot.devcluster.controlplane import ControlPlane

        self.state_dir.mkdir(parents=True, exist_ok=True)
        out = self.state_dir / "out"
        self.report(f"compiling {self.config_dir} into {out}")
        compiled = compile_repo(self.config_dir)
        write_tree(compiled.files, out)
        if compiled.repo.platform.spec.webhook.client_authentication is not None:
            self.report("webhook.clientAuthentication is off here: the local API server presents "
                        "no client certificate, so the local webhook asks for none")
        version = selected_version()
        self.report(f"starting a local control plane (kube-apiserver {version.release} + etcd; "
                    "KUBERNETES_VERSION picks another minor)")
        self.plane = ControlPlane(ensure_binaries(version=version), self.state_dir / "cluster",
                                  owned=True, apiserver_args=self.apiserver_args)
        self.plane.start()
        self.kubeconfig = self.plane.kubeconfig
        self.api = kube.load_cli_client(self.kubeconfig)
        manifests = load(out)
        install_namespace = compiled.repo.namespace
        self._apply_crds()
        self._namespaces(tenant_namespaces(manifests, install_namespace))
        runnable = [m for m in manifests if m.kind != "Deployment" and m.kind not in WEBHOOK_KINDS]
        self.report("installing the output (its Deployments run as local processes instead)")
        Installer(self.api, report=self._quiet).install(runnable)
        port = free_port()
        tls = self._webhook_certificate()
        self._launch = (out / "bundle.json", port, tls)
        self.components = {component.name: component for component in components(manifests)}
        for component in self.components.values():
            self._start_component(component, out / "bundle.json", port, tls)
        for manifest in (m for m in manifests if m.kind in WEBHOOK_KINDS):
            self._wait_listening(port, "the local webhook")
            local = local_webhook_configuration(manifest, port, tls[2].read_bytes())
            Installer(self.api, report=self._quiet).install([local])
            self.report(f"webhook configuration {manifest.name} calls https://127.0.0.1:{port}")

    def stop_component(self, name: str) -> None:
        """Kill one component's process (an outage, for the peers' benchmark); `restart_component`
        starts it again as `start` did."""
        for index, (running, process) in enumerate(self.processes):
            if running == name:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
                del self.processes[index]
                return
        raise KeyError(name)

    def restart_component(self, name: str) -> None:
        self._start_component(self.components[name], *self._launch)

    def _quiet(self, line: str) -> None:
        if line.startswith("wave"):
            self.report(f"  {line}")

    def _apply_crds(self) -> None:
        from fivespot.devcluster.kubectl import KubectlFailed, apply, kubectl, wait_established

        assert self.kubeconfig is not None
        for crd in self.crds:
            try:
                apply(self.kubeconfig, crd)
                name = kubectl(self.kubeconfig, "get", "-f", str(crd), "-o", "name").strip().split("/")[-1]
                wait_established(self.kubeconfig, [name])
            except KubectlFailed as error:  # the user's file, refused: bad input, not a fivespot bug
                raise InstallError(f"--crd {crd}: {error.stderr or 'kubectl could not apply it'}") from error
            self.report(f"applied {crd}")

    def _namespaces(self, names: list[str]) -> None:
        for name in names:
            try:
                kube.request(self.api, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
            except kube.ApiError as error:
                if not error.conflict:
                    raise
        if names:
            self.report(f"tenant namespaces: {', '.join(names)}")

    def _webhook_certificate(self) -> tuple[Path, Path, Path]:
        from fivespot.webhook.tls import issue, new_ca

        now = datetime.datetime.now(datetime.timezone.utc)
        ca, ca_key = new_ca("fivespot-dev-ca", now)
        leaf = issue(ca, ca_key, "fivespot-webhook", now, ip_addresses=("127.0.0.1",),
                     dns_names=("localhost",), server=True)
        folder = self.state_dir / "tls"
        folder.mkdir(exist_ok=True)
        paths = folder / "tls.crt", folder / "tls.key", folder / "ca.crt"
        paths[0].write_bytes(leaf.cert_pem)
        paths[1].write_bytes(leaf.key_pem)
        paths[1].chmod(0o600)
        paths[2].write_bytes(ca.cert_pem)
        return paths

    def _start_component(self, component: Component, bundle: Path, port: int,
                         tls: tuple[Path, Path, Path]) -> None:
        from fivespot.devcluster.clients import service_account_kubeconfig

        assert self.kubeconfig is not None
        identity = service_account_kubeconfig(self.kubeconfig, component.namespace,
                                              component.service_account,
                                              self.state_dir / f"{component.name}.kubeconfig")
        metrics_port = free_port()
        self.metrics_ports[component.name] = metrics_port
        argv = [sys.executable, "-m", "fivespot",
                *local_args(component, bundle, identity, webhook_port=port, tls=tls[:2],
                            metrics_port=metrics_port)]
        env = {**os.environ, "POD_NAMESPACE": component.namespace,
               "POD_NAME": f"{component.name}-dev"}
        log_path = self.state_dir / f"{component.name}.log"
        log = open(log_path, "ab")
        try:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                       preexec_fn=die_with_parent)
        finally:
            log.close()
        self.processes.append((component.name, process))
        self.report(f"started {component.name} (pid {process.pid}; log {log_path}; "
                    f"metrics http://127.0.0.1:{metrics_port}/metrics)")

    def _wait_listening(self, port: int, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            self.check_processes()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise ComponentExited(f"{what} did not listen on 127.0.0.1:{port} within {READY_TIMEOUT_S:.0f}s")

    def check_processes(self) -> None:
        for name, process in self.processes:
            if process.poll() is not None:
                log = self.state_dir / f"{name}.log"
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                raise ComponentExited(f"{name} exited with {process.returncode}:\n{tail}")

    def stop(self) -> None:
        for _, process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for _, process in reversed(self.processes):
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                pass
            try:  # the component's own children too (its group: each started a session)
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(5)
        self.processes.clear()
        if self.api is not None:
            self.api.close()
        if self.plane is not None:
            self.plane.stop()


class CapacityWatch:
    """Prints each change of a ScheduledCapacity's phase or written value, as `dev` runs.

    Fed by a watch (the runtime's Informer), not a poll: every phase the API server stores is
    printed, in order, however short (a handback that completes in milliseconds), and so is a
    change made just before Ctrl-C."""

    def __init__(self, api: Any, report: Callable[[str], None]) -> None:
        self.api, self.report = api, report
        self.seen: dict[str, tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        self._informer: Any = None

    def start(self) -> None:
        from fivespot.runtime.informer import Informer

        informer = Informer(self.api, "5spot.finos.org", "v1alpha1", "scheduledcapacities",
                            resync_s=0)
        informer.add_handler(lambda event, obj, old: None if event == "DELETED" else self.see(obj))
        informer.start()
        self._informer = informer

    def stop(self) -> None:
        if self._informer is not None:
            self._informer.stop()
            self._informer = None

    def see(self, item: Mapping[str, Any]) -> None:
        """Report `item` if its phase or written value is not the one last reported."""
        key = kube.object_key(item)
        status = item.get("status") or {}
        now = (status.get("phase"), status.get("writtenValue"))
        with self._lock:
            if self.seen.get(key) == now:
                return
            self.seen[key] = now
            target = item["spec"]["targetRef"]
            written = "" if now[1] is None else (
                f", {item['spec']['capacity']['path']}={now[1]} written to "
                f"{target['kind']} {target['name']}")
            self.report(f"scheduledcapacity {key}: {now[0] or 'Pending'}{written}")


class Stopped(Exception):
    """Ctrl-C or SIGTERM: stop what was started, whatever `dev` was doing."""


def _stop_now(signum: int, frame: Any) -> None:
    raise Stopped(signal.Signals(signum).name)


def run(config_dir: Path, state_dir: Path, crds: Sequence[Path]) -> int:
    """The `fivespot dev` command: until Ctrl-C or SIGTERM, which may come at any point, also
    while the cluster is still starting."""
    previous = {s: signal.signal(s, _stop_now) for s in (signal.SIGINT, signal.SIGTERM)}
    session = DevSession(config_dir, state_dir.resolve(), crds,
                         report=lambda line: print(line, flush=True))
    watch: CapacityWatch | None = None
    try:
        try:
            session.start()
            print(f"\nready. In another terminal:\n  export KUBECONFIG={session.kubeconfig}\n"
                  f"  kubectl get scap,ms,tbss -A\nCtrl-C stops everything.", flush=True)
            watch = CapacityWatch(session.api, lambda line: print(line, flush=True))
            watch.start()
            while True:
                time.sleep(0.5)
                session.check_processes()
        except Stopped:
            pass
    finally:
        for signum in previous:  # a second Ctrl-C must not cut the stop short
            signal.signal(signum, signal.SIG_IGN)
        if watch is not None:
            watch.stop()
        print("stopping", flush=True)
        session.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


def register(subparsers: Any) -> None:
    """Add `fivespot dev` to the `fivespot` command line."""
    parser = subparsers.add_parser(
        "dev", help="run a config repo on a local control plane, its components as local processes",
        description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    parser.add_argument("config_dir", type=Path, metavar="CONFIG_DIR", help="the config repo to run")
    parser.add_argument("--state-dir", type=Path, default=Path(".fivespot-dev"), metavar="DIR",
                        help="where the output, the cluster's state, kubeconfigs and logs go "
                             "(default .fivespot-dev)")
    parser.add_argument("--crd", type=Path, action="append", default=[], metavar="FILE",
                        help="a CRD to apply first, e.g. your consumer kind's (repeatable)")
    parser.set_defaults(handler=_handler)


def _handler(args: Any) -> int:
    """Exit 0 after a clean stop; 2 when the cluster or the install could not be set up; 1 when
    a component died while running (its log's tail is printed)."""
    from fivespot.commandline import exitcodes
    from fivespot.compiler.diagnostics import CompileError
    from fivespot.compiler.ownership import OutputRefused
    from fivespot.devcluster.controlplane import ControlPlaneError

    for crd in args.crd:
        if not crd.is_file():
            print(f"fivespot dev: --crd {crd}: no such file; nothing was started", file=sys.stderr)
            return exitcodes.BAD_INPUT
    try:
        return run(args.config_dir, args.state_dir, args.crd)
    except CompileError as error:
        for diagnostic in error.diagnostics:
            print(diagnostic, file=sys.stderr)
        count = len(error.diagnostics)
        print(f"{count} error{'s' if count != 1 else ''} in {args.config_dir}; nothing was started",
              file=sys.stderr)
        return exitcodes.BAD_INPUT
    except OutputRefused as error:
        print(f"fivespot dev: --state-dir: {error}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except (ControlPlaneError, InstallError, kube.ApiError) as error:
        print(f"fivespot dev: {error}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except ComponentExited as error:
        print(f"fivespot dev: {error}", file=sys.stderr)
        return exitcodes.NEGATIVE
