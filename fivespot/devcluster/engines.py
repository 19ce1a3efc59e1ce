"""Build the real GitOps engines once, pinned, into a cache outside the repo: Argo CD's
application-controller and repo-server (one `argocd` binary), Flux's source-controller and
kustomize-controller, kustomize (the repo-server runs it), and Debian's redis-server (Argo CD's
cache).

Why build at all: the GitOps output is what fivespot's users receive, and only the real engines
show whether it syncs (the health Lua under lupa and the CRD validation cannot: Argo CD's sync
hung at wave 2 on a health check lupa ran happily). Nothing can be downloaded here but modules,
so they come from the Go module proxy, as the control plane does (`fivespot.devcluster.build`).

The versions live in one place, `tools/engines/versions`; each program's cache folder is named
after its line there, so a bumped pin builds afresh and an unchanged one is reused. The Go
programs are built from a writable copy of their module (a module's nested `./api` modules are
not in its zip, so those relative `replace` lines are dropped; the modules themselves are on the
proxy), with the extra `go.mod` edits the pins file names. Their upstream CRDs and Argo CD's base
configuration are copied from that same module source into the cache, so nothing in the repo
names a file outside it. A cold build takes about 25 minutes on two cores; progress is printed,
and an exclusive lock keeps parallel callers from building twice. A missing program is built,
never skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from fivespot.devcluster import debian
from fivespot.devcluster.build import BuildError, REPO_ROOT, cache_root, exclusive

PINS: Final = REPO_ROOT / "tools" / "engines" / "versions"
NAMES: Final = ("argocd", "source-controller", "kustomize-controller", "kustomize", "redis")
PROGRESS_EVERY_S: Final = 30.0

ARGOCD_EMPTY_EMBED: Final = "ui/dist/app/assets/images/resources/.keep"
"""Argo CD embeds this folder (go:embed), which its module zip has empty, so absent: without a
file in it the build fails."""
ARGOCD_WRAPPERS: Final = ("hack/git-verify-wrapper.sh", "hack/gpg-wrapper.sh")
"""Scripts the repo-server execs from PATH (a missing one fails manifest generation with a bare
`permission denied`); the module's copies are not executable."""
ARGOCD_PROGRAMS: Final = ("argocd-application-controller", "argocd-repo-server")
"""The one `argocd` binary picks what to run by the name it was started with."""
ARGOCD_CONTROLLER_STATEFULSET: Final = (
    "manifests/base/application-controller/argocd-application-controller-statefulset.yaml")
"""The application-controller's StatefulSet in Argo CD's own install: its env says which
argocd-cmd-params-cm key sets which variable (`fivespot.devcluster.gitops_engines` reads it)."""
REDIS_PACKAGES: Final = ("redis-server", "redis-tools", "libjemalloc2", "liblzf1")


class EngineBuildError(BuildError):
    """An engine cannot be built here, or the pins file is wrong; the message says which and why."""


@dataclass(frozen=True)
class Pin:
    """One line of tools/engines/versions."""

    name: str
    module: str
    version: str
    toolchain: str
    replaces: tuple[str, ...] = ()

    @property
    def folder_name(self) -> str:
        key = f"{self.name}-{self.version}"
        if self.toolchain not in ("local", "-"):
            key += f"_{self.toolchain}"
        if self.replaces:
            key += "_" + hashlib.sha256("\n".join(self.replaces).encode()).hexdigest()[:8]
        return key


@dataclass(frozen=True)
class Engines:
    """Where the built engines and their upstream manifests are."""

    argocd_bin: Path
    """Holds argocd, argocd-application-controller, argocd-repo-server and the wrapper scripts:
    put it first on the repo-server's PATH."""
    argocd_crds: Path
    argocd_base_config: Path
    argocd_controller_statefulset: Path
    source_controller: Path
    kustomize_controller: Path
    flux_crds: tuple[Path, Path]
    kustomize: Path
    redis_server: Path
    redis_libs: Path

    def programs(self) -> tuple[Path, ...]:
        return (self.argocd_bin / "argocd", self.source_controller, self.kustomize_controller,
                self.kustomize, self.redis_server)

    @property
    def path(self) -> str:
        """A PATH for the repo-server: argocd's folder, kustomize's, then the caller's."""
        return os.pathsep.join([str(self.argocd_bin), str(self.kustomize.parent),
                                os.environ.get("PATH", "/usr/bin:/bin")])


def read_pins(path: Path = PINS, names: tuple[str, ...] = NAMES) -> dict[str, Pin]:
    """Every pin, by name; a line that cannot be read is an error naming its line, and each of
    `names` must have one (the peers' registry, `fivespot.devcluster.peers`, reads its own file here too)."""
    pins: dict[str, Pin] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) < 3:
            raise EngineBuildError(f"{path}:{number}: expected `name module@version go [edits]`, "
                                   f"got {raw.strip()!r}")
        name, target, toolchain, *edits = fields
        module, at, version = target.partition("@")
        if name == "redis":
            module, version = target, ""
        elif not at or not version.startswith("v"):
            raise EngineBuildError(f"{path}:{number}: {target!r} is not module@vX.Y.Z")
        if toolchain not in ("local", "-") and not re.fullmatch(r"go\d+\.\d+(\.\d+)?", toolchain):
            raise EngineBuildError(f"{path}:{number}: the go column is `local` or a version such "
                                   f"as go1.27.4, not {toolchain!r}")
        replaces = []
        for edit in edits:
            kind, _, value = edit.partition("=")
            if kind != "replace" or "=" not in value:
                raise EngineBuildError(f"{path}:{number}: an edit is replace=OLD=NEW, not {edit!r}")
            replaces.append(value)
        pins[name] = Pin(name, module, version, toolchain, tuple(replaces))
    missing = [name for name in names if name not in pins]
    if missing:
        raise EngineBuildError(f"{path}: no line for {', '.join(missing)}")
    return pins


def engines_root() -> Path:
    return cache_root() / "engines"


def _layout(pins: dict[str, Pin]) -> Engines:
    root = engines_root()
    argocd = root / pins["argocd"].folder_name
    source = root / pins["source-controller"].folder_name
    kustomize_controller = root / pins["kustomize-controller"].folder_name
    redis = root / f"redis-debian-{_debian_codename()}"
    return Engines(
        argocd_bin=argocd / "bin", argocd_crds=argocd / "manifests" / "crds",
        argocd_base_config=argocd / "manifests" / "base-config",
        argocd_controller_statefulset=argocd / "manifests" / Path(ARGOCD_CONTROLLER_STATEFULSET).name,
        source_controller=source / "source-controller",
        kustomize_controller=kustomize_controller / "kustomize-controller",
        flux_crds=(source / "crds", kustomize_controller / "crds"),
        kustomize=root / pins["kustomize"].folder_name / "kustomize",
        redis_server=redis / "usr" / "bin" / "redis-server",
        redis_libs=redis / "usr" / "lib" / "x86_64-linux-gnu",
    )


def _debian_codename() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return "unknown"
    match = re.search(r"^VERSION_CODENAME=\"?([^\"\n]*)", text, re.M)
    return match.group(1) if match and match.group(1) else "unknown"


def _complete(engines: Engines) -> bool:
    return (all(p.is_file() for p in engines.programs())
            and all((engines.argocd_bin / name).exists() for name in ARGOCD_PROGRAMS)
            and (engines.argocd_crds / "kustomization.yaml").is_file()
            and (engines.argocd_base_config / "kustomization.yaml").is_file()
            and engines.argocd_controller_statefulset.is_file()
            and all(folder.is_dir() for folder in engines.flux_crds))


def cached_engines() -> Engines | None:
    """The cached engines if every one is there, without building."""
    engines = _layout(read_pins())
    return engines if _complete(engines) else None


def ensure_engines(out: IO[str] = sys.stderr) -> Engines:
    """The cached engines, building whichever is missing first."""
    pins = read_pins()
    engines = _layout(pins)
    root = engines_root()
    root.mkdir(parents=True, exist_ok=True)
    with exclusive(root / ".lock", out, "the GitOps engines"):
        if not engines.redis_server.is_file():
            _unpack_redis(engines.redis_server.parents[2], out)
        if not engines.kustomize.is_file():
            _install_kustomize(pins["kustomize"], engines.kustomize, out)
        for name, binary, crds in (
                ("source-controller", engines.source_controller, engines.flux_crds[0]),
                ("kustomize-controller", engines.kustomize_controller, engines.flux_crds[1])):
            if not binary.is_file() or not crds.is_dir():
                _build_flux(pins[name], binary, crds, out)
        if not _argocd_done(engines):
            _build_argocd(pins["argocd"], engines, out)
        if not engines.argocd_controller_statefulset.is_file():
            _copy_argocd_controller_statefulset(pins["argocd"], engines, out)
    if not _complete(engines):
        raise EngineBuildError(f"the engines' cache {root} is incomplete after building")
    return engines


def _argocd_done(engines: Engines) -> bool:
    return ((engines.argocd_bin / "argocd").is_file()
            and all((engines.argocd_bin / name).exists() for name in ARGOCD_PROGRAMS)
            and all((engines.argocd_bin / Path(w).name).is_file() for w in ARGOCD_WRAPPERS)
            and (engines.argocd_crds / "kustomization.yaml").is_file()
            and (engines.argocd_base_config / "kustomization.yaml").is_file())


# --- Go ------------------------------------------------------------------------------------------


def go_env(toolchain: str) -> dict[str, str]:
    """`-mod=mod`, unlike the control plane's wrappers (fivespot/devcluster/build.py, `-mod=readonly`): an
    engine builds in a copy of its own module whose go.mod `module_copy` edits (the nested
    modules' relative replaces dropped, so those come from the proxy; the pins file's replaces
    added), so go must add those modules' hashes to the copy's go.sum. The go command checks each
    against the checksum database (GONOSUMDB is not set) before writing it."""
    if shutil.which("go") is None:
        raise EngineBuildError("building the GitOps engines and the peers needs the Go toolchain "
                               "(`go`) on PATH")
    return dict(os.environ, CGO_ENABLED="0", GOWORK="off", GOFLAGS="-mod=mod -buildvcs=false",
                GOTOOLCHAIN="local" if toolchain in ("local", "-") else toolchain)


def _go(args: list[str], cwd: Path, env: dict[str, str], what: str) -> str:
    done = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineBuildError(f"{what} failed (go {' '.join(args)}):\n{done.stderr.strip()[-3000:]}")
    return done.stdout


def module_dir(pin: Pin, work: Path, env: dict[str, str], out: IO[str]) -> Path:
    """The pinned module's source in the Go module cache (read-only), downloaded from the module
    proxy (its hash checked against the checksum database) unless already there."""
    say(out, f"downloading {pin.module}@{pin.version} from the module proxy")
    info = json.loads(_go(["mod", "download", "-json", f"{pin.module}@{pin.version}"], work, env,
                          f"downloading {pin.module}@{pin.version}"))
    if info.get("Error") or not info.get("Dir"):
        raise EngineBuildError(f"downloading {pin.module}@{pin.version}: {info.get('Error')}")
    return Path(info["Dir"])


def module_copy(pin: Pin, work: Path, env: dict[str, str], out: IO[str]) -> Path:
    """A writable copy of the pinned module's source, its go.mod edited to build on its own."""
    source = work / "src"
    shutil.copytree(module_dir(pin, work, env, out), source, symlinks=True)
    for folder, dirs, files in os.walk(source):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o200)
    Path(source).chmod(0o755)
    module = json.loads(_go(["mod", "edit", "-json"], source, env, "reading go.mod"))
    for replace in module.get("Replace") or []:
        new = replace["New"]["Path"]
        if new.startswith("./") or new.startswith("../"):
            _go(["mod", "edit", f"-dropreplace={replace['Old']['Path']}"], source, env,
                f"dropping the nested-module replace of {replace['Old']['Path']}")
    for value in pin.replaces:
        _go(["mod", "edit", f"-replace={value}"], source, env, f"replace {value}")
    return source


def go_build(label: str, source: Path, package: str, target: Path, ldflags: str,
           env: dict[str, str], out: IO[str]) -> None:
    tmp = target.parent / f".{target.name}.building"
    command = ["nice", "-n", "19", "go", "build", "-v", "-trimpath", "-ldflags", ldflags,
               "-o", str(tmp), package]
    started = time.monotonic()
    say(out, f"building {label} (cold builds take many minutes on two cores; cached in "
              f"{target.parent})")
    try:
        _run_with_progress(command, source, env, label, out)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    say(out, f"built {label} in {time.monotonic() - started:.0f}s")


def _run_with_progress(command: list[str], cwd: Path, env: dict[str, str], label: str,
                       out: IO[str]) -> None:
    """Run a build, printing how far it is every PROGRESS_EVERY_S (also while modules download,
    when `go build -v` prints nothing)."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    started = time.monotonic()
    lines: list[str] = []
    done = threading.Event()

    def report() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            say(out, f"  {label}: {len(lines)} packages compiled, "
                      f"{time.monotonic() - started:.0f}s")

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        for line in process.stdout:
            lines.append(line.rstrip())
    finally:
        done.set()
        reporter.join()
    if process.wait() != 0:
        raise EngineBuildError(f"go build of {label} failed:\n" + "\n".join(lines[-40:]))


def say(out: IO[str], line: str) -> None:
    print(f"[engines] {line}", file=out, flush=True)


def fresh_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".work-", dir=folder))


def _build_argocd(pin: Pin, engines: Engines, out: IO[str]) -> None:
    folder = engines.argocd_bin.parent
    env = go_env(pin.toolchain)
    work = fresh_folder(folder)
    try:
        source = module_copy(pin, work, env, out)
        (source / ARGOCD_EMPTY_EMBED).parent.mkdir(parents=True, exist_ok=True)
        (source / ARGOCD_EMPTY_EMBED).touch()
        engines.argocd_bin.mkdir(parents=True, exist_ok=True)
        version = pin.version.lstrip("v")
        go_build(f"argocd {pin.version}", source, "./cmd", engines.argocd_bin / "argocd",
               f"-s -w -X {pin.module}/common.version={version}", env, out)
        for name in ARGOCD_PROGRAMS:
            link = engines.argocd_bin / name
            link.unlink(missing_ok=True)
            link.symlink_to("argocd")
        for wrapper in ARGOCD_WRAPPERS:
            target = engines.argocd_bin / Path(wrapper).name
            shutil.copyfile(source / wrapper, target)
            target.chmod(0o755)
        for origin, target in ((source / "manifests" / "crds", engines.argocd_crds),
                               (source / "manifests" / "base" / "config", engines.argocd_base_config)):
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(origin, target)
        _keep_controller_statefulset(pin, source, engines)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _keep_controller_statefulset(pin: Pin, source: Path, engines: Engines) -> None:
    """ARGOCD_CONTROLLER_STATEFULSET from the module's source `source` into the cache."""
    origin = source / ARGOCD_CONTROLLER_STATEFULSET
    if not origin.is_file():
        raise EngineBuildError(f"{pin.module}@{pin.version} has no {ARGOCD_CONTROLLER_STATEFULSET}")
    target = engines.argocd_controller_statefulset
    shutil.copyfile(origin, target.with_suffix(".tmp"))
    target.with_suffix(".tmp").replace(target)


def _copy_argocd_controller_statefulset(pin: Pin, engines: Engines, out: IO[str]) -> None:
    """ARGOCD_CONTROLLER_STATEFULSET into a cache built before it was kept, without a rebuild."""
    work = fresh_folder(engines.argocd_bin.parent)
    try:
        _keep_controller_statefulset(pin, module_dir(pin, work, go_env(pin.toolchain), out), engines)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build_flux(pin: Pin, binary: Path, crds: Path, out: IO[str]) -> None:
    env = go_env(pin.toolchain)
    work = fresh_folder(binary.parent)
    try:
        source = module_copy(pin, work, env, out)
        go_build(f"{pin.name} {pin.version}", source, ".", binary, "-s -w", env, out)
        shutil.rmtree(crds, ignore_errors=True)
        shutil.copytree(source / "config" / "crd" / "bases", crds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _install_kustomize(pin: Pin, binary: Path, out: IO[str]) -> None:
    env = go_env(pin.toolchain)
    work = fresh_folder(binary.parent)
    try:
        env["GOBIN"] = str(work)
        started = time.monotonic()
        say(out, f"building kustomize {pin.version}")
        _run_with_progress(["nice", "-n", "19", "go", "install", "-v", "-trimpath", "-ldflags",
                            "-s -w", f"{pin.module}@{pin.version}"], work, env, "kustomize", out)
        os.replace(work / "kustomize", binary)
        say(out, f"built kustomize {pin.version} in {time.monotonic() - started:.0f}s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- Debian --------------------------------------------------------------------------------------


def _unpack_redis(folder: Path, out: IO[str]) -> None:
    """Debian's redis-server unpacked into `folder` (no service started); `apt-get install` only
    when the packages cannot be downloaded, then the installed binary is linked in."""
    try:
        debian.require_tools()
    except debian.DebianUnavailable as error:
        raise EngineBuildError(f"redis-server (Argo CD's cache) comes from Debian's packages: "
                               f"{error}") from None
    say(out, f"fetching Debian's {', '.join(REDIS_PACKAGES)} (apt-get download)")
    try:
        versions = debian.unpack(REDIS_PACKAGES, folder)
        (folder / "VERSION").write_text(versions["redis-server"] + "\n")
        return
    except debian.DebianUnavailable as error:
        downloaded = str(error)
    say(out, f"{downloaded}; trying apt-get install redis-server")
    try:
        debian.install("redis-server")
    except debian.DebianUnavailable as error:
        raise EngineBuildError(f"redis-server (Argo CD's cache) could not be had from Debian: "
                               f"{downloaded}; {error}") from None
    found = shutil.which("redis-server")
    if found is None:
        raise EngineBuildError("redis-server (Argo CD's cache): apt-get installed it, yet it is "
                               "not on PATH")
    target = folder / "usr" / "bin" / "redis-server"
    target.parent.mkdir(parents=True, exist_ok=True)
    (folder / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    target.symlink_to(found)
