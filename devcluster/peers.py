"""Build the tools a platform team would pick instead of fivespot, pinned, into a cache outside the
repo, so `make bench-peers` can run them beside fivespot on the same control plane: kube-green
(one SleepInfo per namespace, a timer at each cron instant) and GoKubeDownscaler (annotations, a
scan every `--interval`).

Why these two: they are the practical peers that are single Go programs talking only to the API
server (KEDA needs the HPA controller and an external-metrics APIService; py-kube-downscaler is
not published as a package). Decision record 0030 says more.

Nothing can be downloaded here but modules, so they come from the Go module proxy, built by the
same code as the GitOps engines (`devcluster.engines`: a writable copy of the pinned module, its
nested-module replaces dropped, the pins file's extra edits applied, `go build` at nice 19 with
progress). Their versions live in `tools/peers/versions`; each program's cache folder is named
after its line there. kube-green's SleepInfo CRD is copied from its own module source into the
cache, so nothing in the repo names a file outside it. A cold build takes about 4 minutes on two
cores; an exclusive lock keeps parallel callers from building twice.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from devcluster.build import cache_root, exclusive
from devcluster.engines import (EngineBuildError, Pin, fresh_folder, go_build, go_env, module_copy,
                                read_pins)
from devcluster.build import REPO_ROOT

PINS: Final = REPO_ROOT / "tools" / "peers" / "versions"
NAMES: Final = ("kube-green", "gokubedownscaler")
PACKAGES: Final = {"kube-green": "./cmd/", "gokubedownscaler": "./cmd/kubedownscaler"}
"""Each peer's main package inside its module (its own Makefile and Dockerfile build these)."""
KUBE_GREEN_CRD: Final = "config/crd/bases/kube-green.com_sleepinfos.yaml"


@dataclass(frozen=True)
class Peers:
    """Where the built peers and their upstream manifests are."""

    kube_green: Path
    sleepinfo_crd: Path
    gokubedownscaler: Path
    pins: dict[str, Pin]

    def programs(self) -> tuple[Path, ...]:
        return (self.kube_green, self.gokubedownscaler)


def peers_root() -> Path:
    return cache_root() / "peers"


def _layout(pins: dict[str, Pin]) -> Peers:
    root = peers_root()
    green = root / pins["kube-green"].folder_name
    return Peers(kube_green=green / "kube-green", sleepinfo_crd=green / "crds" / Path(KUBE_GREEN_CRD).name,
                 gokubedownscaler=root / pins["gokubedownscaler"].folder_name / "gokubedownscaler",
                 pins=pins)


def _complete(peers: Peers) -> bool:
    return all(p.is_file() for p in peers.programs()) and peers.sleepinfo_crd.is_file()


def cached_peers() -> Peers | None:
    """The cached peers if every one is there, without building."""
    peers = _layout(read_pins(PINS, NAMES))
    return peers if _complete(peers) else None


def ensure_peers(out: IO[str] = sys.stderr) -> Peers:
    """The cached peers, building whichever is missing first."""
    pins = read_pins(PINS, NAMES)
    peers = _layout(pins)
    root = peers_root()
    root.mkdir(parents=True, exist_ok=True)
    with exclusive(root / ".lock", out, "the peers"):
        if not peers.kube_green.is_file() or not peers.sleepinfo_crd.is_file():
            _build_peer(pins["kube-green"], peers.kube_green, out,
                        copy={KUBE_GREEN_CRD: peers.sleepinfo_crd})
        if not peers.gokubedownscaler.is_file():
            _build_peer(pins["gokubedownscaler"], peers.gokubedownscaler, out)
    if not _complete(peers):
        raise EngineBuildError(f"the peers' cache {root} is incomplete after building")
    return peers


def _build_peer(pin: Pin, binary: Path, out: IO[str], copy: dict[str, Path] | None = None) -> None:
    """`go build` of the peer's main package into `binary`; `copy` maps files of its module
    source to where they go in the cache."""
    env = go_env(pin.toolchain)
    work = fresh_folder(binary.parent)
    try:
        source = module_copy(pin, work, env, out)
        go_build(f"{pin.name} {pin.version}", source, PACKAGES[pin.name], binary, "-s -w", env, out)
        for origin, target in (copy or {}).items():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / origin, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
