"""Build kube-apiserver, kube-controller-manager and etcd from Go modules, once per version, into
a cache outside the repo.

Each supported Kubernetes minor (fivespot/policies/kubeversions.py) has a wrapper module,
`tools/controlplane/kubernetes-MINOR/`, pinning its release; `tools/controlplane/etcd/` pins etcd,
which every minor shares. They are the one place those versions live, and the cache folder is
named after them, so bumping a pin builds afresh and an unchanged pin reuses what is there.
KUBERNETES_VERSION (e.g. `1.34`) selects the minor; unset, it is kubeversions.DEFAULT. A cold
build takes minutes on two cores, so progress is printed as packages compile, and an exclusive
lock keeps parallel callers from building twice. etcd is built once and copied into each
version's folder.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator
from contextlib import contextmanager

from fivespot.policies import kubeversions
from fivespot.policies.kubeversions import KubernetesVersion

REPO_ROOT = Path(__file__).resolve().parents[2]
WRAPPERS = REPO_ROOT / "tools" / "controlplane"
ETCD_MODULE = WRAPPERS / "etcd"
KUBERNETES_PROGRAMS = ("kube-apiserver", "kube-controller-manager")
BUILD_TAGS = "selinux,notest,grpcnotrace"


def kubernetes_module(version: KubernetesVersion | None = None) -> Path:
    """The wrapper module of `version` (default: the selected one)."""
    return WRAPPERS / f"kubernetes-{(version or selected_version()).minor}"


def selected_version() -> KubernetesVersion:
    """The minor KUBERNETES_VERSION names, else the default; BuildError when unsupported."""
    try:
        return kubeversions.selected()
    except kubeversions.UnsupportedVersion as error:
        raise BuildError(f"{kubeversions.ENVIRONMENT_VARIABLE}: {error}") from None


@dataclass(frozen=True)
class Binaries:
    """Where the built control-plane programs are."""

    kube_apiserver: Path
    kube_controller_manager: Path
    etcd: Path

    def all(self) -> tuple[Path, ...]:
        return (self.kube_apiserver, self.kube_controller_manager, self.etcd)


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str

    @property
    def cache_key(self) -> str:
        return f"k8s-{self.kubernetes}_etcd-{self.etcd}"


class BuildError(RuntimeError):
    """The control plane cannot be built here: no Go toolchain, or `go build` failed."""


def pinned_versions(version: KubernetesVersion | None = None) -> Versions:
    """The versions the wrapper modules of `version` (default: the selected one) require."""
    return Versions(
        kubernetes=_required_version(kubernetes_module(version) / "go.mod", "k8s.io/kubernetes"),
        etcd=_required_version(ETCD_MODULE / "go.mod", "go.etcd.io/etcd/server/v3"),
    )


def _required_version(go_mod: Path, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod.read_text(), re.M)
    if match is None:
        raise BuildError(f"{go_mod}: no `require {module} vX.Y.Z` line")
    return match.group(1)


def cache_root() -> Path:
    base = os.environ.get("FIVESPOT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fivespot"
    )
    return Path(base)


def binaries_dir(versions: Versions | None = None) -> Path:
    return cache_root() / "controlplane" / (versions or pinned_versions()).cache_key


def cached_binaries(version: KubernetesVersion | None = None) -> Binaries | None:
    """The cached binaries of `version` (default: the selected one) if all are present, without
    building."""
    found = _binaries(binaries_dir(pinned_versions(version)))
    return found if all(p.is_file() for p in found.all()) else None


def _binaries(folder: Path) -> Binaries:
    return Binaries(folder / "kube-apiserver", folder / "kube-controller-manager", folder / "etcd")


def ensure_binaries(out: IO[str] = sys.stderr, version: KubernetesVersion | None = None
                    ) -> Binaries:
    """Return the cached binaries of `version` (default: the selected one), building whichever
    is missing first."""
    version = version or selected_version()
    module = kubernetes_module(version)
    versions = pinned_versions(version)
    folder = binaries_dir(versions)
    folder.mkdir(parents=True, exist_ok=True)
    found = _binaries(folder)
    with exclusive(folder / ".lock", out, "the control plane"):
        for program, target in zip(KUBERNETES_PROGRAMS,
                                   (found.kube_apiserver, found.kube_controller_manager)):
            if not target.is_file():
                _go_build(f"{program} {versions.kubernetes}", module,
                          f"k8s.io/kubernetes/cmd/{program}", target,
                          _kubernetes_ldflags(versions.kubernetes), out)
        if not found.etcd.is_file() and not _copy_shared_etcd(versions, found.etcd, out):
            _go_build("etcd " + versions.etcd, ETCD_MODULE, ".", found.etcd, "-s -w", out)
    return found


def _copy_shared_etcd(versions: Versions, target: Path, out: IO[str]) -> bool:
    """Copy etcd from another Kubernetes version's folder with the same etcd pin, if one has
    it: every minor runs the same etcd, so it is built once."""
    for other in sorted((cache_root() / "controlplane").glob(f"k8s-*_etcd-{versions.etcd}/etcd")):
        if other.is_file() and other != target:
            temporary = target.with_name(".etcd.copy")
            shutil.copy2(other, temporary)
            os.replace(temporary, target)
            print(f"[controlplane] etcd {versions.etcd}: copied from {other.parent}", file=out,
                  flush=True)
            return True
    return False


@contextmanager
def exclusive(lock_path: Path, out: IO[str], what: str) -> Iterator[None]:
    """The build lock of `what`; says so when another process holds it, instead of waiting in
    silence."""
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process building {what} (it holds {lock_path}); "
                  "this one continues when that build is done", file=out, flush=True)
            started = time.monotonic()
            fcntl.flock(lock, fcntl.LOCK_EX)
            print(f"the other build finished after {time.monotonic() - started:.0f}s", file=out,
                  flush=True)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _kubernetes_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(flags)


def _go_build(
    label: str, module: Path, package: str, target: Path, ldflags: str, out: IO[str]
) -> None:
    go = shutil.which("go")
    if go is None:
        raise BuildError("building the control plane needs the Go toolchain (`go`) on PATH")
    env = go_env(module)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent)) / target.name
    command = [
        go, "build", "-v", "-trimpath", "-tags", BUILD_TAGS,
        "-ldflags", ldflags, "-o", str(tmp), package,
    ]
    print(f"[controlplane] building {label} (cold builds take minutes; cached in {target.parent})",
          file=out, flush=True)
    started = time.monotonic()
    try:
        _run_with_progress(command, module, env, label, started, out)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)
    print(f"[controlplane] built {label} in {time.monotonic() - started:.0f}s", file=out, flush=True)


def go_env(module: Path) -> dict[str, str]:
    """The environment `go` builds a wrapper module in. `-mod=readonly`: go.mod and go.sum are the
    pins, checked, never rewritten; a module whose hash is missing from go.sum (or differs from
    it) fails the build instead of being added from whatever the proxy serves. (tools/controlplane/
    pin.py is what writes them, with `go mod tidy`.)"""
    return dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN=_toolchain(module), GOWORK="off",
                GOFLAGS="-mod=readonly")


def _toolchain(module: Path) -> str:
    """The Go toolchain a wrapper names (`toolchain go1.27.4`; the go command downloads it from
    the module proxy once), else the local one."""
    found = re.search(r"^toolchain\s+(go\S+)", (module / "go.mod").read_text(), re.M)
    return found.group(1) if found else "local"


def _run_with_progress(
    command: list[str], cwd: Path, env: dict[str, str], label: str, started: float, out: IO[str]
) -> None:
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    packages, last_report = 0, started
    tail: list[str] = []
    for line in process.stdout:
        tail = (tail + [line.rstrip()])[-40:]
        packages += 1
        now = time.monotonic()
        if now - last_report >= 20:
            print(f"[controlplane]   {label}: {packages} packages compiled, {now - started:.0f}s",
                  file=out, flush=True)
            last_report = now
    if process.wait() != 0:
        raise BuildError(f"go build of {label} failed:\n" + "\n".join(tail))
