"""`python -m fivespot.devcluster build|versions|engines|peers|up|down`: the local control plane (and the GitOps
engines the end-to-end tests run) from the command line.

`up` leaves etcd and kube-apiserver running in the background after it returns and writes
STATE_DIR/kubeconfig; `down` stops them and removes STATE_DIR. `build` and `up` take the
Kubernetes minor from --kubernetes-version, else KUBERNETES_VERSION, else the default
(fivespot/policies/kubeversions.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from fivespot.commandline import boundary, exitcodes
from fivespot.devcluster.build import BuildError, ensure_binaries, selected_version
from fivespot.policies import kubeversions
from fivespot.policies.kubeversions import KubernetesVersion
from fivespot.devcluster.engines import ensure_engines
from fivespot.devcluster.peers import ensure_peers
from fivespot.devcluster.upstream_crds import ensure_keda_scaledobject_crd
from fivespot.devcluster.controlplane import ControlPlane, ControlPlaneError, Record, _alive, stop_recorded


def _up(state_dir: Path, version: KubernetesVersion) -> int:
    record = state_dir / "record.json"
    if record.exists() and all(_alive(p.pid) for p in Record.load(record).processes):
        print(f"control plane already running: {Record.load(record).server} "
              f"(kubeconfig {state_dir / 'kubeconfig'})")
        return 0
    stop_recorded(state_dir)
    shutil.rmtree(state_dir, ignore_errors=True)
    plane = ControlPlane(ensure_binaries(version=version), state_dir.resolve(), owned=False)
    plane.start()
    print(f"control plane (Kubernetes {version.release}) ready at {plane.server}")
    print(f"  kubectl --kubeconfig {state_dir / 'kubeconfig'} get --raw /readyz")
    print("  stop it with: make cluster-down")
    return 0


def _down(state_dir: Path) -> int:
    stopped = stop_recorded(state_dir.resolve())
    shutil.rmtree(state_dir, ignore_errors=True)
    print("control plane stopped" if stopped else "no control plane was running")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fivespot.devcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build (or reuse) kube-apiserver and etcd")
    build.add_argument("--all-versions", action="store_true",
                       help="every supported minor, one after the other")
    versions = sub.add_parser("versions", help="print the supported Kubernetes minors, one a line")
    versions.add_argument("--others", action="store_true",
                          help="all but the selected one (KUBERNETES_VERSION, else the default)")
    sub.add_parser("engines", help="build (or reuse) Argo CD, Flux, kustomize and redis "
                                   "(pinned in tools/engines/versions), and fetch (or reuse) the "
                                   "upstream CRDs the tests install (tools/crds/versions)")
    sub.add_parser("peers", help="build (or reuse) kube-green and GoKubeDownscaler, the tools "
                                 "`make bench-peers` runs (pinned in tools/peers/versions)")
    for name in ("up", "down"):
        p = sub.add_parser(name)
        p.add_argument("--state-dir", type=Path, default=Path(".cluster"))
    for name in ("build", "up"):
        sub.choices[name].add_argument(
            "--kubernetes-version", metavar="MINOR",
            help=f"the Kubernetes minor ({kubeversions.SUPPORTED_RANGE}; default: "
                 f"{kubeversions.ENVIRONMENT_VARIABLE}, else {kubeversions.DEFAULT.minor})")
    boundary.add_debug_flag(parser)
    args = parser.parse_args(argv)
    return boundary.run(f"devcluster {args.command}", lambda: _expected(args), debug=args.debug)


def _expected(args: argparse.Namespace) -> int:
    """The command's exit code; a control plane that cannot be built or started is exit 2."""
    try:
        return _command(args)
    except (BuildError, ControlPlaneError) as error:
        print(f"devcluster {args.command}: {error}", file=sys.stderr)
        return exitcodes.BAD_INPUT


def _version(args: argparse.Namespace) -> KubernetesVersion:
    if getattr(args, "kubernetes_version", None):
        try:
            return kubeversions.resolve(args.kubernetes_version)
        except kubeversions.UnsupportedVersion as error:
            raise BuildError(f"--kubernetes-version: {error}") from None
    return selected_version()


def _command(args: argparse.Namespace) -> int:
    if args.command == "build":
        versions = kubeversions.SUPPORTED if args.all_versions else (_version(args),)
        for version in versions:
            binaries = ensure_binaries(version=version)
            print(f"Kubernetes {version.release}\n  kube-apiserver: {binaries.kube_apiserver}\n"
                  f"  etcd: {binaries.etcd}")
        return 0
    if args.command == "versions":
        selected = selected_version()
        print("\n".join(v.minor for v in kubeversions.SUPPORTED
                        if not (args.others and v == selected)))
        return 0
    if args.command == "engines":
        engines = ensure_engines()
        print("\n".join(str(program) for program in engines.programs()))
        print(ensure_keda_scaledobject_crd())
        return 0
    if args.command == "peers":
        peers = ensure_peers()
        print("\n".join(str(program) for program in peers.programs()))
        return 0
    if args.command == "up":
        return _up(args.state_dir, _version(args))
    return _down(args.state_dir)


if __name__ == "__main__":
    sys.exit(main())
