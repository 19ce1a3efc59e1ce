"""`python -m devcluster build|engines|up|down`: the local control plane (and the GitOps engines
the end-to-end tests run) from the command line.

`up` leaves etcd and kube-apiserver running in the background after it returns and writes
STATE_DIR/kubeconfig; `down` stops them and removes STATE_DIR.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from commandline import boundary, exitcodes
from devcluster.build import BuildError, ensure_binaries
from devcluster.engines import ensure_engines
from devcluster.controlplane import ControlPlane, ControlPlaneError, Record, _alive, stop_recorded


def _up(state_dir: Path) -> int:
    record = state_dir / "record.json"
    if record.exists() and all(_alive(p.pid) for p in Record.load(record).processes):
        print(f"control plane already running: {Record.load(record).server} "
              f"(kubeconfig {state_dir / 'kubeconfig'})")
        return 0
    stop_recorded(state_dir)
    shutil.rmtree(state_dir, ignore_errors=True)
    plane = ControlPlane(ensure_binaries(), state_dir.resolve(), owned=False)
    plane.start()
    print(f"control plane ready at {plane.server}")
    print(f"  kubectl --kubeconfig {state_dir / 'kubeconfig'} get --raw /readyz")
    print("  stop it with: make cluster-down")
    return 0


def _down(state_dir: Path) -> int:
    stopped = stop_recorded(state_dir.resolve())
    shutil.rmtree(state_dir, ignore_errors=True)
    print("control plane stopped" if stopped else "no control plane was running")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build (or reuse) kube-apiserver and etcd")
    sub.add_parser("engines", help="build (or reuse) Argo CD, Flux, kustomize and redis "
                                   "(pinned in tools/engines/versions)")
    for name in ("up", "down"):
        p = sub.add_parser(name)
        p.add_argument("--state-dir", type=Path, default=Path(".cluster"))
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


def _command(args: argparse.Namespace) -> int:
    if args.command == "build":
        binaries = ensure_binaries()
        print(f"kube-apiserver: {binaries.kube_apiserver}\netcd: {binaries.etcd}")
        return 0
    if args.command == "engines":
        engines = ensure_engines()
        print("\n".join(str(program) for program in engines.programs()))
        return 0
    if args.command == "up":
        return _up(args.state_dir)
    return _down(args.state_dir)


if __name__ == "__main__":
    sys.exit(main())
