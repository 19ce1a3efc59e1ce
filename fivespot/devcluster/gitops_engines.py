"""Run the real GitOps engines against a local control plane, as local processes: Argo CD
(redis, repo-server, application-controller) and Flux (source-controller, kustomize-controller).

The engines are the programs `fivespot.devcluster.engines` built; their CRDs and Argo CD's base config come
from the same module sources, installed the way their own install does it (`kubectl apply
--server-side --force-conflicts`, kubectl's default field manager, as Argo CD's getting-started
says), so a test of what fivespot's own apply does to argocd-cm meets what a real install left.
What a cluster runs for them and the local control plane does not is set here, each for a reason:

- Argo CD out of a cluster maps its in-cluster destination (`https://kubernetes.default.svc`,
  what the compiled Application names) to `$KUBECONFIG` with `ARGOCD_FAKE_IN_CLUSTER=true`, as
  Argo CD's own Procfile does; no argocd-server runs, so the `default` AppProject it would create
  is created here; `--persist-resource-health` puts each resource's health, as the controller
  computes it, in `Application.status.resources[].health` (off by default since 3.x).
- Argo CD prunes and deletes in the foreground: the control plane must run kube-controller-manager's
  garbage collector (`ENGINE_CONTROLLERS`), or pruned objects stay "Pending deletion" forever.
- The application-controller's environment holds what its StatefulSet in Argo CD's install maps
  from ConfigMap keys (`argocd-cmd-params-cm`'s `controller.*`, a few of `argocd-cm`), read from
  the pinned install manifest and the live ConfigMaps when it starts, as a pod gets them; like a
  pod, it sees a changed key only after a restart (`ArgoCD.restart_controller`, the local
  `kubectl rollout restart statefulset argocd-application-controller`).

Each process runs in its own process group, tied to this process (PR_SET_PDEATHSIG), with its log
in the state folder; `stop()` ends the groups it started, and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Sequence

import yaml

from fivespot.compiler.emit.gitops import ARGOCD_APPLICATION_CONTROLLER
from fivespot.devcluster.engines import Engines
from fivespot.devcluster.kubectl import kubectl
from fivespot.runtime.processes import die_with_parent

ENGINE_CONTROLLERS: Final = ("garbage-collector-controller",)
"""kube-controller-manager controllers the engines need beyond the devcluster's own: Argo CD
prunes and deletes with foreground propagation, which only the garbage collector completes."""
ARGOCD_NAMESPACE: Final = "argocd"
FLUX_NAMESPACE: Final = "flux-system"
INSTALL_MANAGER_ARGS: Final = ("apply", "--server-side", "--force-conflicts")
"""How Argo CD's and Flux's own installs apply (kubectl's default field manager, `kubectl`)."""
READY_TIMEOUT_S: Final = 90.0
APPLICATION_CONTROLLER: Final = ARGOCD_APPLICATION_CONTROLLER
"""The program, and the StatefulSet of Argo CD's install, the compiled output names."""


class EngineExited(RuntimeError):
    """An engine process stopped, or never listened; the message has the tail of its log."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Processes:
    """Engine processes, each in its own group and tied to this process, logs in `state_dir`."""

    state_dir: Path
    started: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        log_path = self.log(name)
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                ["nice", "-n", "10", *argv], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, cwd=self.state_dir,
                start_new_session=True, preexec_fn=die_with_parent)
        self.started.append((name, process))

    def log(self, name: str) -> Path:
        return self.state_dir / f"{name}.log"

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.log(name)
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def check(self) -> None:
        for name, process in self.started:
            if process.poll() is not None:
                raise EngineExited(f"{name} exited with {process.returncode}:\n{self.tail(name)}")

    def wait_listening(self, name: str, port: int) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            self.check()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise EngineExited(f"{name} did not listen on 127.0.0.1:{port} within "
                           f"{READY_TIMEOUT_S:.0f}s:\n{self.tail(name)}")

    def stop(self, name: str | None = None) -> None:
        """End the groups started (only `name`'s when given), asking first, then killing."""
        ending = [(n, p) for n, p in reversed(self.started) if name is None or n == name]
        for _, process in ending:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for _, process in ending:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(5)
        self.started = [(n, p) for n, p in self.started if (n, p) not in ending]


def config_map_refs(statefulset: dict[str, Any], container: str) -> list[tuple[str, dict[str, Any]]]:
    """`container`'s env entries set from a ConfigMap key: (variable, its `configMapKeyRef`)."""
    return [(entry["name"], entry["valueFrom"]["configMapKeyRef"])
            for spec in statefulset["spec"]["template"]["spec"]["containers"] if spec["name"] == container
            for entry in spec.get("env") or []
            if "configMapKeyRef" in (entry.get("valueFrom") or {})]


def config_map_env(statefulset: dict[str, Any], container: str,
                   config_maps: dict[str, dict[str, str]]) -> dict[str, str]:
    """The environment a pod of `statefulset` gives `container` from ConfigMaps (`config_maps`:
    each one's data by name): each env entry whose `configMapKeyRef` names a key they hold. A
    missing key leaves an optional entry unset (every one in Argo CD's install is optional) and
    keeps a pod from starting otherwise, here an error naming it."""
    env: dict[str, str] = {}
    for variable, ref in config_map_refs(statefulset, container):
        data = config_maps.get(ref["name"]) or {}
        if ref["key"] in data:
            env[variable] = data[ref["key"]]
        elif not ref.get("optional"):
            raise EngineExited(f"{container}: env {variable} needs key {ref['key']!r} of "
                               f"ConfigMap {ref['name']}, which has none")
    return env


def _namespace(kubeconfig: Path, name: str) -> None:
    manifest = yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    kubectl(kubeconfig, *INSTALL_MANAGER_ARGS, "-f", "-", stdin=manifest)


def _install_crds(kubeconfig: Path, folder: Path) -> None:
    flag = "-k" if (folder / "kustomization.yaml").is_file() else "-f"
    kubectl(kubeconfig, *INSTALL_MANAGER_ARGS, flag, str(folder))
    names = kubectl(kubeconfig, "get", flag, str(folder), "-o", "name").split()
    kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", *names)


class ArgoCD:
    """Argo CD's application-controller and repo-server (with redis) against `kubeconfig`."""

    def __init__(self, engines: Engines, kubeconfig: Path, state_dir: Path, *,
                 app_resync_s: int = 180) -> None:
        self.engines, self.kubeconfig = engines, kubeconfig
        self.state_dir = state_dir
        self.app_resync_s = app_resync_s
        self.processes = _Processes(state_dir)
        self.redis_port = self.repo_port = 0

    def install(self) -> None:
        """Argo CD's CRDs, namespace and base config (argocd-cm, argocd-secret, ...), applied as
        its install applies them, and the `default` AppProject argocd-server would create."""
        _install_crds(self.kubeconfig, self.engines.argocd_crds)
        _namespace(self.kubeconfig, ARGOCD_NAMESPACE)
        kubectl(self.kubeconfig, "-n", ARGOCD_NAMESPACE, *INSTALL_MANAGER_ARGS, "-k",
                str(self.engines.argocd_base_config))
        default = {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
                   "metadata": {"name": "default", "namespace": ARGOCD_NAMESPACE},
                   "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
                            "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}}
        kubectl(self.kubeconfig, *INSTALL_MANAGER_ARGS, "-f", "-", stdin=yaml.safe_dump(default))

    def start(self) -> "ArgoCD":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for folder in ("tmp", "tls", "ssh", "gpg", "plugins"):
            (self.state_dir / folder).mkdir(exist_ok=True)
        self.install()
        self.redis_port, self.repo_port = free_port(), free_port()
        redis_env = dict(os.environ, LD_LIBRARY_PATH=str(self.engines.redis_libs))
        self.processes.spawn("redis", [str(self.engines.redis_server), "--bind", "127.0.0.1",
                                       "--port", str(self.redis_port), "--save", "",
                                       "--appendonly", "no"], redis_env)
        self.processes.wait_listening("redis", self.redis_port)
        env = self._env()
        self.processes.spawn("argocd-repo-server", [
            str(self.engines.argocd_bin / "argocd-repo-server"),
            "--address", "127.0.0.1", "--port", str(self.repo_port),
            "--disable-tls", "--client-ca-path=",
            "--metrics-address", "127.0.0.1", "--metrics-port", str(free_port()),
            "--redis", f"127.0.0.1:{self.redis_port}", "--logformat", "text"], env)
        self.processes.wait_listening("argocd-repo-server", self.repo_port)
        self._start_controller()
        return self

    def _start_controller(self) -> None:
        self.processes.spawn(APPLICATION_CONTROLLER, [
            str(self.engines.argocd_bin / APPLICATION_CONTROLLER),
            "--kubeconfig", str(self.kubeconfig), "--namespace", ARGOCD_NAMESPACE,
            "--repo-server", f"127.0.0.1:{self.repo_port}", "--repo-server-plaintext",
            "--redis", f"127.0.0.1:{self.redis_port}", "--metrics-port", str(free_port()),
            "--logformat", "text", "--app-resync", str(self.app_resync_s),
            "--persist-resource-health"], {**self._env(), **self.controller_config_env()})

    def controller_config_env(self) -> dict[str, str]:
        """What Argo CD's install puts in the application-controller's environment from the
        live ConfigMaps (`config_map_env` of the pinned install's StatefulSet)."""
        statefulset = yaml.safe_load(self.engines.argocd_controller_statefulset.read_text())
        names = {ref["name"] for _, ref in config_map_refs(statefulset, APPLICATION_CONTROLLER)}
        config_maps = {}
        for name in sorted(names):
            found = kubectl(self.kubeconfig, "-n", ARGOCD_NAMESPACE, "get", "configmap", name,
                            "--ignore-not-found", "-o", "json")
            config_maps[name] = (json.loads(found).get("data") or {}) if found.strip() else {}
        return config_map_env(statefulset, APPLICATION_CONTROLLER, config_maps)

    def restart_controller(self) -> None:
        """As `kubectl rollout restart` does to the StatefulSet: the application-controller ends
        and starts again, with its environment read afresh."""
        self.processes.stop(APPLICATION_CONTROLLER)
        self._start_controller()

    def _env(self) -> dict[str, str]:
        state = self.state_dir
        return dict(
            os.environ, PATH=self.engines.path, TMPDIR=str(state / "tmp"),
            KUBECONFIG=str(self.kubeconfig), ARGOCD_FAKE_IN_CLUSTER="true",
            ARGOCD_GPG_ENABLED="false", ARGOCD_ASK_PASS_SOCK=str(state / "askpass.sock"),
            ARGOCD_TLS_DATA_PATH=str(state / "tls"), ARGOCD_SSH_DATA_PATH=str(state / "ssh"),
            ARGOCD_GNUPGHOME=str(state / "gpg"), ARGOCD_PLUGINSOCKFILEPATH=str(state / "plugins"),
            HOME=str(state))

    def check(self) -> None:
        self.processes.check()

    def stop(self) -> None:
        self.processes.stop()


class Flux:
    """Flux's source-controller and kustomize-controller against `kubeconfig`."""

    def __init__(self, engines: Engines, kubeconfig: Path, state_dir: Path, *,
                 requeue_dependency: str = "5s") -> None:
        self.engines, self.kubeconfig, self.state_dir = engines, kubeconfig, state_dir
        self.requeue_dependency = requeue_dependency
        self.processes = _Processes(state_dir)

    def install(self) -> None:
        for folder in self.engines.flux_crds:
            _install_crds(self.kubeconfig, folder)
        _namespace(self.kubeconfig, FLUX_NAMESPACE)

    def start(self) -> "Flux":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.install()
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), RUNTIME_NAMESPACE=FLUX_NAMESPACE,
                   HOME=str(self.state_dir), TMPDIR=str(self.state_dir))
        storage = free_port()
        (self.state_dir / "storage").mkdir(exist_ok=True)
        self.processes.spawn("source-controller", [
            str(self.engines.source_controller), "--enable-leader-election=false",
            f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{free_port()}",
            f"--storage-path={self.state_dir / 'storage'}",
            f"--storage-addr=127.0.0.1:{storage}", f"--storage-adv-addr=127.0.0.1:{storage}",
            "--log-encoding=console"], env)
        self.processes.spawn("kustomize-controller", [
            str(self.engines.kustomize_controller), "--enable-leader-election=false",
            f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{free_port()}",
            f"--requeue-dependency={self.requeue_dependency}", "--log-encoding=console"], env)
        self.processes.wait_listening("source-controller", storage)
        return self

    def check(self) -> None:
        self.processes.check()

    def stop(self) -> None:
        self.processes.stop()
