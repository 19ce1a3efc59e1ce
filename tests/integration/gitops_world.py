"""The world the GitOps end-to-end tests run in: a local control plane whose controller-manager
runs the controllers a Deployment needs (and the garbage collector Argo CD's foreground deletes
need), a node (tests/integration/kubelet.py) that runs the compiled Deployments' pods from the
built image — so the real webhook, controllers and providers run as the engine applied them, and
the webhook injects its own caBundle — a git server on loopback, and the real engines.

Also what the tests share to drive them: a working tree of the watched repository that commits
and pushes as a user would, the compiled output published into it, the engines' own objects read
back, and the triggers each engine offers instead of waiting for its poll (Argo CD's refresh
annotation, Flux's `reconcile.fluxcd.io/requestedAt`).
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import yaml

from fivespot.compiler.emit.gitops import ARGOCD_CM_APPLY
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster.controlplane import ControlPlane
from fivespot.devcluster.engines import Engines, cached_engines, ensure_engines
from fivespot.devcluster.gitops_engines import ENGINE_CONTROLLERS, ArgoCD, Flux
from fivespot.devcluster.gitserver import GitServer
from fivespot.devcluster.kubectl import kubectl
from fivespot.runtime import kube
from tests.integration.conftest import own_control_plane
from tests.integration.kubelet import LocalKubelet
from tests.integration.pod_sandbox import remove, scratch_dir, unpack

T = TypeVar("T")

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLE: Final = ROOT / "examples" / "agent-sandbox"
CONSUMER_CRD: Final = EXAMPLE / "consumer" / "virtualmachinepools.yaml"
OUT: Final = "clusters/prod/fivespot"
"""Where the compiled output lives in the watched repository (the CI templates' OUT_DIR)."""
INSTALL_NS: Final = "5spot-system"
TENANT: Final = "agents"
CONTROLLERS: Final = ("validatingadmissionpolicy-status-controller", "deployment-controller",
                      "replicaset-controller", "endpoints-controller", "endpointslice-controller",
                      "disruption-controller", "namespace-controller", *ENGINE_CONTROLLERS)
"""What kube-controller-manager runs here: Deployments made Available by real pods (the node
below), PodDisruptionBudgets with a status (Argo CD's health of a PDB reads it), namespaces
deleted, and the garbage collector."""
APPLICATIONS: Final = ("argoproj.io", "v1alpha1", "applications")
KUSTOMIZATIONS: Final = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
GIT_REPOSITORIES: Final = ("source.toolkit.fluxcd.io", "v1", "gitrepositories")
SCAP: Final = ("5spot.finos.org", "v1alpha1", "scheduledcapacities")
GIT_IDENTITY: Final = ("-c", "user.name=Platform Team", "-c", "user.email=platform@example.com")
GIT_IDENTITY_ENV: Final = {"GIT_AUTHOR_NAME": "Platform Team", "GIT_AUTHOR_EMAIL": "platform@example.com",
                           "GIT_COMMITTER_NAME": "Platform Team",
                           "GIT_COMMITTER_EMAIL": "platform@example.com"}
"""The same identity for a reader's shell (tests/integration/test_docs_gitops.py)."""


def eventually(probe: Callable[[], T | None | bool], timeout_s: float, what: str,
               on_timeout: Callable[[], str] = lambda: "", every_s: float = 0.5) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}\n{on_timeout()}")
        time.sleep(every_s)


def engines() -> Engines:
    return cached_engines() or ensure_engines()


@dataclass
class Node:
    """The control plane and the node running its pods."""

    plane: ControlPlane
    kubelet: LocalKubelet

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def api(self) -> Any:
        return self.kubelet.api


@contextmanager
def cluster(built_image: dict[str, Any]) -> Iterator[Node]:
    """A control plane (pods reach it on 10.0.0.1, it reaches the webhook's pods at their
    endpoints) and a node running the built image."""
    with ExitStack() as stack:
        plane = stack.enter_context(own_control_plane(
            bind_address="0.0.0.0", apiserver_args=["--enable-aggregator-routing=true"],
            controllers=CONTROLLERS))
        scratch = scratch_dir()
        stack.callback(remove, scratch)
        rootfs = unpack(built_image["layout"], built_image["tag"], scratch / "bundle")
        api = kube.load_cli_client(plane.kubeconfig)
        stack.callback(api.close)
        assert plane.certs is not None
        kubelet = LocalKubelet(api, built_image["reference"], built_image["layout"],
                               built_image["tag"], rootfs, int(plane.server.rsplit(":", 1)[1]),
                               plane.certs.serving_ca.read_bytes())
        kubelet.start()
        stack.callback(kubelet.stop)
        kubectl(plane.kubeconfig, "apply", "--server-side", "-f", str(CONSUMER_CRD))
        kubectl(plane.kubeconfig, "wait", "--for=condition=Established", "--timeout=60s",
                "-f", str(CONSUMER_CRD))
        yield Node(plane, kubelet)


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    done = subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                                            **(env or {})})
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


@dataclass
class WatchedRepo:
    """A clone of the repository an engine watches: `config/` and its compiled output at OUT,
    committed and pushed over HTTP as a user would."""

    server: GitServer
    name: str
    tree: Path

    @classmethod
    def create(cls, server: GitServer, name: str, work: Path) -> "WatchedRepo":
        server.create(name)
        tree = work / f"{name}-clone"
        tree.mkdir(parents=True)
        git(tree, "init", "-q", "-b", "main")
        git(tree, "remote", "add", "origin", server.url(name))
        return cls(server, name, tree)

    @property
    def url(self) -> str:
        return self.server.url(self.name)

    def write_config(self, config: Path) -> None:
        shutil.rmtree(self.tree / "config", ignore_errors=True)
        shutil.copytree(config, self.tree / "config")

    def compile(self) -> None:
        """`fivespot compile config --out OUT` in the working tree (the command a user runs)."""
        write_tree(compile_repo(self.tree / "config").files, self.tree / OUT)

    def commit(self, message: str) -> subprocess.CompletedProcess[str]:
        git(self.tree, "add", "-A")
        return git(self.tree, "commit", "-q", "-m", message, check=False)

    def push(self) -> str:
        git(self.tree, "push", "-q", "origin", "main")
        return self.head()

    def head(self) -> str:
        return git(self.tree, "rev-parse", "HEAD").stdout.strip()

    def remote_head(self) -> str:
        return git(self.tree, "ls-remote", self.url, "refs/heads/main").stdout.split()[0]

    def publish(self, config: Path, message: str) -> str:
        """Config and its output, committed and pushed; the commit."""
        self.write_config(config)
        self.compile()
        done = self.commit(message)
        assert done.returncode == 0, done.stdout + done.stderr
        return self.push()

    @property
    def out(self) -> Path:
        return self.tree / OUT


def copy_config(source: Path, into: Path, **platform: Any) -> Path:
    """A copy of a config repo with `platform` merged into its Platform spec (its own fields:
    never an edit of compiled output)."""
    shutil.copytree(source, into)
    path = into / "platform.yaml"
    document = yaml.safe_load(path.read_text())

    def merge(target: dict[str, Any], update: dict[str, Any]) -> None:
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                merge(target[key], value)
            else:
                target[key] = value

    merge(document["spec"], platform)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return into


def edit_platform(config: Path, **platform: Any) -> None:
    path = config / "platform.yaml"
    document = yaml.safe_load(path.read_text())
    for key, value in platform.items():
        document["spec"][key] = value
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def custom_path(kind: tuple[str, str, str], namespace: str | None, name: str | None = None) -> str:
    group, version, plural = kind
    base = f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    return f"{base}/{plural}" + (f"/{name}" if name else "")


def get_or_none(api: Any, path: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kube.request(api, "GET", path)
        return found
    except kube.ApiError as error:
        if error.not_found:
            return None
        raise


# --- Argo CD -------------------------------------------------------------------------------------


def application(api: Any, name: str = "fivespot") -> dict[str, Any]:
    found = get_or_none(api, custom_path(APPLICATIONS, "argocd", name))
    assert found is not None, f"no Application {name}"
    return found


def refresh(api: Any, name: str = "fivespot", kind: str = "normal") -> None:
    """Argo CD's reconcile trigger: the refresh annotation (the controller removes it once done)."""
    kube.merge_patch(api, custom_path(APPLICATIONS, "argocd", name),
                     {"metadata": {"annotations": {"argocd.argoproj.io/refresh": kind}}})


class FetchRetry:
    """Argo CD's refresh again when its last one failed to fetch from the git server, as a user
    presses Refresh after a failed fetch: Argo CD itself retries only at its next resync, three
    minutes on. A refused manifest is left alone: only a fetch from `url` is retried, at most
    every `every_s`."""

    def __init__(self, api: Any, name: str, url: str, every_s: float = 15.0) -> None:
        self.api, self.name, self.url, self.every_s = api, name, url, every_s
        self.last = time.monotonic()

    def __call__(self, app: dict[str, Any]) -> None:
        if "argocd.argoproj.io/refresh" in (app["metadata"].get("annotations") or {}):
            return
        failed = [c for c in (app.get("status") or {}).get("conditions") or []
                  if c.get("type") == "ComparisonError" and self.url in (c.get("message") or "")]
        if failed and time.monotonic() - self.last >= self.every_s:
            refresh(self.api, self.name)
            self.last = time.monotonic()


def synced_at(app: dict[str, Any], revision: str) -> bool:
    """Synced and Healthy at `revision`, its last operation a success, nothing still running."""
    status = app.get("status") or {}
    operation = status.get("operationState") or {}
    return ((status.get("sync") or {}).get("status") == "Synced"
            and (status.get("sync") or {}).get("revision") == revision
            and (status.get("health") or {}).get("status") == "Healthy"
            and operation.get("phase") == "Succeeded"
            and (operation.get("syncResult") or {}).get("revision") == revision
            and "operation" not in app)


def describe_application(app: dict[str, Any]) -> str:
    status = app.get("status") or {}
    lines = [f"sync={status.get('sync')}", f"health={status.get('health')}",
             f"operationState.phase={(status.get('operationState') or {}).get('phase')} "
             f"message={(status.get('operationState') or {}).get('message')}",
             f"conditions={status.get('conditions')}"]
    for resource in status.get("resources") or []:
        if (resource.get("health") or {}).get("status") not in (None, "Healthy") \
                or resource.get("status") != "Synced":
            lines.append(f"  {resource.get('kind')} {resource.get('namespace', '')}/"
                         f"{resource.get('name')}: {resource.get('status')} {resource.get('health')}")
    return "\n".join(lines)


# --- Flux ----------------------------------------------------------------------------------------


def request_reconcile(api: Any, kind: tuple[str, str, str], name: str,
                      namespace: str = "flux-system") -> str:
    """Flux's reconcile trigger: `reconcile.fluxcd.io/requestedAt` (what `flux reconcile` sets)."""
    token = f"{now_rfc3339()}-{uuid.uuid4().hex[:6]}"
    kube.merge_patch(api, custom_path(kind, namespace, name),
                     {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}})
    return token


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for found in ((obj or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == type_:
            return dict(found)
    return {}


# --- writes that must never be refused ------------------------------------------------------------


def probe_scap(name: str) -> dict[str, Any]:
    """A ScheduledCapacity the example's tenant `agents` may create (dry run: nothing stored)."""
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name, "namespace": TENANT},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "window"},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": "sandboxes"},
                     "capacity": {"path": "spec.warmReplicas", "activeValue": 4}}}


@dataclass
class Writer:
    """Tries a ScheduledCapacity create (server-side dry run: admission and every webhook run,
    nothing is stored) every `period_s` once `start`ed, and keeps every refusal; `attempts`
    counts the creates that reached admission."""

    api: Any
    body: Callable[[str], dict[str, Any]] = probe_scap
    period_s: float = 0.1
    attempts: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def once(self) -> str | None:
        """None if admitted; the refusal otherwise. A 404 (no CRD or tenant namespace yet: no
        ScheduledCapacity can be made at all) is not an attempt."""
        obj = self.body(f"probe-{uuid.uuid4().hex[:8]}")
        try:
            kube.request(self.api, "POST", custom_path(SCAP, obj["metadata"]["namespace"]),
                         body=obj, query={"dryRun": "All"})
        except kube.ApiError as error:
            if error.not_found:
                return error.message
            self.attempts += 1
            self.refused.append((now_rfc3339(), error.message[:300]))
            return error.message
        self.attempts += 1
        return None

    def start(self) -> "Writer":
        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.once()
        self._thread = threading.Thread(target=loop, daemon=True, name="scap-writer")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def apply_argocd_objects(kubeconfig: Path, out: Path) -> None:
    """What the docs (docs/operations/gitops.md) say to apply for Argo CD, from the output folder: the health keys with
    its exact command, then the AppProject and the Application."""
    command = ARGOCD_CM_APPLY.split()
    assert command[0] == "kubectl"
    done = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *command[1:]], cwd=out,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in ("appproject.yaml", "application.yaml"):
        if (out / "argocd" / name).is_file():
            kubectl(kubeconfig, "apply", "--server-side", "-f", str(out / "argocd" / name))


def start_argocd(node: Node, work: Path) -> ArgoCD:
    return ArgoCD(engines(), node.kubeconfig, work / "argocd").start()


def start_flux(node: Node, work: Path) -> Flux:
    return Flux(engines(), node.kubeconfig, work / "flux").start()


class Engine(Protocol):
    def stop(self) -> None: ...


E = TypeVar("E", bound=Engine)


@contextmanager
def engine_world(built_image: dict[str, Any], work: Path,
                 start: Callable[[Node, Path], E]) -> Iterator[tuple[Node, GitServer, E]]:
    """A cluster running the built image's pods, a git server on loopback, and the engine `start`
    runs against them (`start_argocd`, `start_flux`); each stopped on the way out."""
    with ExitStack() as stack:
        node = stack.enter_context(cluster(built_image))
        server = GitServer(work / "git").start()
        stack.callback(server.stop)
        engine = start(node, work)
        stack.callback(engine.stop)
        yield node, server, engine
