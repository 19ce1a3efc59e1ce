"""Build the tools a platform team would pick instead of fivespot, pinned, into a cache outside the
repo, so `make bench-peers` can run them beside fivespot on the same control plane: kube-green
(one SleepInfo per namespace, a timer at each cron instant) and GoKubeDownscaler (annotations, a
scan every `--interval`).

Why these two: they are the practical peers that are single Go programs talking only to the API
server (KEDA needs the HPA controller and an external-metrics APIService; py-kube-downscaler is
not published as a package). Decision record 0030 says more.

Nothing can be downloaded here but modules, so they come from the Go module proxy, built by the
same code as the GitOps engines (`fivespot.devcluster.engines`: a writable copy of the pinned module, its
nested-module replaces dropped, the pins file's extra edits applied, `go build` at nice 19 with
progress). Their versions live in `tools/peers/versions`; each program's cache folder is named
after its line there. kube-green's SleepInfo CRD is copied from its own module source into the
cache, so nothing in the repo names a file outside it. A cold build takes about 4 minutes on two
cores; an exclusive lock keeps parallel callers from building twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from fivespot.devcluster.build import cache_root, exclusive
from fivespot.devcluster.engines import (EngineBuildError, Pin, fresh_folder, go_build, go_env, module_copy,
                                read_pins)
from fivespot.devcluster.build import REPO_ROOT

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


# --- the peers as processes ----------------------------------------------------------------------


@dataclass
class PeerProcess:
    """A peer's process: started, killed (an outage) and started again with the same arguments."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    relay: Any = None
    """A `netbridge.HostRelay` when it runs in a network namespace of its own (`stop` closes it)."""

    def start(self) -> None:
        from fivespot.runtime.processes import die_with_parent

        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env,
                                            start_new_session=True, preexec_fn=die_with_parent)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        """Killed for good: its relay closed too."""
        self.kill()
        if self.relay is not None:
            self.relay.close()
            self.relay = None


def as_in_a_pod(argv: list[str], namespace: str, work: Path) -> list[str]:
    """`argv` run in its own mount namespace in which
    /var/run/secrets/kubernetes.io/serviceaccount/namespace reads `namespace`, as in a Pod (an
    overlay on /run, so nothing outside this process sees the file). kube-green's shipped
    manifests pass `--leader-elect` and no lease namespace; controller-runtime then reads the
    Lease's namespace from that file (`getInClusterNamespace`), and out of a cluster refuses to
    start. Needs root (mount namespaces)."""
    if os.geteuid() != 0:
        raise SystemExit("kube-green with leader election needs root here (a mount namespace "
                         "for its service-account namespace file); pass --no-kube-green-leader-elect")
    upper, scratch = work / "pod-run" / "upper", work / "pod-run" / "work"
    upper.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    folder = "/run/secrets/kubernetes.io/serviceaccount"
    script = (f"mount -t overlay overlay -o lowerdir=/run,upperdir={upper},workdir={scratch} /run"
              f" && mkdir -p {folder} && printf %s {namespace} > {folder}/namespace"
              ' && exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]


def peer_processes(peers: Peers, work: Path, kube_green_config: Path, downscaler_config: Path,
                   tls_dir: Path, downscaler_flags: Sequence[str] = ("--grace-period=0",),
                   isolated: bool = True, kube_green_lease_namespace: str | None = None,
                   ) -> dict[str, PeerProcess]:
    """The peers with their documented flags (kube-green: the webhook server it always starts
    needs a certificate, `tls_dir`'s tls.crt and tls.key; nothing calls it, as no webhook
    configuration is installed; with `kube_green_lease_namespace`, `--leader-elect` as its
    shipped manifests run it, its Lease in that namespace). GoKubeDownscaler's `--grace-period 0`: its default 15 minutes
    would ignore freshly created Deployments. With `isolated`, GoKubeDownscaler runs in a
    network namespace of its own (`fivespot.devcluster.netbridge`): its health server binds :8081,
    hard-coded, and exits when another program holds it."""
    from fivespot.devcluster.dev import free_port

    env = dict(os.environ)
    green_argv = [
        str(peers.kube_green), f"--health-probe-bind-address=127.0.0.1:{free_port()}", "--webhook-host=127.0.0.1",
        f"--webhook-server-port={free_port()}", f"--webhook-cert-path={tls_dir}"]
    if kube_green_lease_namespace is not None:
        green_argv = as_in_a_pod([*green_argv, "--leader-elect"], kube_green_lease_namespace, work)
    green = PeerProcess("kube-green", green_argv, {**env, "KUBECONFIG": str(kube_green_config)},
                        work / "kube-green.log")
    argv = [str(peers.gokubedownscaler), "-k", str(downscaler_config), *downscaler_flags]
    relay = None
    if isolated:
        from fivespot.devcluster.netbridge import HostRelay, isolated as in_namespace

        address = api_server_address(downscaler_config)
        relay = HostRelay(work / "gokubedownscaler.sock", address)
        argv = in_namespace(argv, relay, address)
    downscaler = PeerProcess("gokubedownscaler", argv, env, work / "gokubedownscaler.log", relay=relay)
    return {"kube-green": green, "gokubedownscaler": downscaler}


def api_server_address(kubeconfig: Path) -> tuple[str, int]:
    """The (host, port) of the kubeconfig's first cluster (a local control plane's)."""
    from urllib.parse import urlsplit

    import yaml

    server = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    assert server.hostname is not None and server.port is not None, server
    return server.hostname, server.port


def cluster_admin(kubeconfig: Path, api: Any, namespace: str, name: str) -> Path:
    """A kubeconfig (beside `kubeconfig`) for ServiceAccount NAMESPACE/NAME bound to
    cluster-admin, as each peer runs in the benchmark and the import tests."""
    from fivespot.devcluster.clients import service_account_kubeconfig
    from fivespot.runtime import kube

    out = kubeconfig.parent / f"{name}.kubeconfig"
    path = service_account_kubeconfig(kubeconfig, namespace, name, out)
    try:
        kube.request(api, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                     body={"metadata": {"name": f"bench-{name}"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                       "kind": "ClusterRole", "name": "cluster-admin"},
                           "subjects": [{"kind": "ServiceAccount", "name": name,
                                         "namespace": namespace}]})
    except kube.ApiError as error:
        if not error.conflict:
            raise
    return path
