"""`fivespot import`: read kube-green SleepInfos, kube-downscaler annotations and KEDA cron
triggers from files or a cluster, and write the fivespot config repo, the tenant objects that do
the same, and a report of what could not be carried over (`fivespot.compiler.importer` decides all of it;
this is the shell that reads and writes).

It writes only into a new or empty folder, as `fivespot init` does, so nothing of the user's is
replaced; bad peer input is reported as `FILE:LINE:COL: field: message` with exit code 2 and
nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from fivespot.commandline import exitcodes

SUFFIXES: Final = (".yaml", ".yml", ".json")
KINDS_FROM_CLUSTER: Final = (
    ("kube-green.com", "v1alpha1", "sleepinfos", "SleepInfo"),
    ("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject"),
    ("", "v1", "namespaces", "Namespace"),
    ("apps", "v1", "deployments", "Deployment"),
    ("apps", "v1", "statefulsets", "StatefulSet"),
)
RESOURCES: Final = {"deployments": "Deployment", "statefulsets": "StatefulSet"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "import", help="write fivespot config and objects from kube-green, kube-downscaler or KEDA cron",
        description="Read kube-green SleepInfos, kube-downscaler annotations (on Namespaces, "
                    "Deployments, StatefulSets) and KEDA ScaledObjects' cron triggers from files "
                    "or a cluster; write into OUT_DIR (new or empty) the config repo (config/), "
                    "each namespace's TimeBasedSpotSchedules (tenant/schedules/) and "
                    "ScheduledCapacities (tenant/capacities/, to apply once the schedules are Ready) "
                    "and REPORT.md, which lists what could not be carried over and why. Give the "
                    "workloads' manifests with the peer's objects: the value to wake each to is "
                    "its replicas.")
    parser.add_argument("sources", type=Path, nargs="*", metavar="FILE_OR_DIR",
                        help="YAML or JSON files, or folders of them (hidden ones skipped)")
    parser.add_argument("--from-cluster", action="store_true",
                        help="read the objects from the cluster of the kubeconfig instead")
    parser.add_argument("--kubeconfig", type=Path, metavar="PATH",
                        help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    parser.add_argument("--out", type=Path, required=True, metavar="OUT_DIR",
                        help="a new or empty folder to write into")
    parser.add_argument("-n", "--namespace", default="default", metavar="NS",
                        help="the namespace of objects in files that name none (default: default)")
    parser.add_argument("--downscaler-resources", type=_resources, default=("Deployment",),
                        metavar="LIST", help="the kinds your downscaler's --include-resources "
                        "names: deployments (its default), statefulsets, or both, comma-joined")
    parser.set_defaults(handler=run)


def _resources(text: str) -> tuple[str, ...]:
    chosen = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [c for c in chosen if c not in RESOURCES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"{text!r}: expected deployments, statefulsets or both")
    return tuple(RESOURCES[c] for c in chosen)


def run(args: argparse.Namespace) -> int:
    from fivespot.compiler.diagnostics import InputError
    from fivespot.compiler.importer import import_objects, render
    from fivespot.compiler.scaffold import ScaffoldError, write_new

    if bool(args.sources) == bool(args.from_cluster):
        print("fivespot import: give files or folders, or --from-cluster (not both)", file=sys.stderr)
        return exitcodes.BAD_INPUT
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        # refused before reading anything: the same words write_new would say
        try:
            write_new(args.out, {}, "fivespot import")
        except ScaffoldError as error:
            print(f"fivespot import: --out: {error}", file=sys.stderr)
            return exitcodes.BAD_INPUT
    try:
        documents, read = (_from_cluster(args.kubeconfig, args.context) if args.from_cluster
                           else _from_files(args.sources))
        imported = import_objects(documents, default_namespace=args.namespace,
                                  downscaler_kinds=args.downscaler_resources)
    except InputError as error:
        for diagnostic in error.diagnostics:
            print(diagnostic, file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except _ClusterError as error:
        print(f"fivespot import: {error}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    files = render(imported, read)
    try:
        write_new(args.out, files, "fivespot import")
    except ScaffoldError as error:
        print(f"fivespot import: --out: {error}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    print(f"imported {len(imported.schedules)} schedule(s) and {len(imported.capacities)} "
          f"ScheduledCapacity(ies) into {args.out}; {len(imported.notes)} thing(s) not carried "
          f"over: see {args.out / 'REPORT.md'}")
    print(f"next: fivespot test {args.out / 'config'} && fivespot compile {args.out / 'config'} "
          f"--out {args.out / 'deploy'} && fivespot check {args.out / 'tenant'} --policies "
          f"{args.out / 'deploy'}")
    return exitcodes.OK


def _from_files(sources: list[Path]) -> tuple[list[Any], list[str]]:
    from fivespot.compiler import folders
    from fivespot.compiler.check.objectyaml import read_documents

    documents, read = [], []
    for source in sources:
        for path in folders.yaml_files(source, SUFFIXES):
            documents += read_documents(path)
            read.append(f"`{path}`")
    return documents, read


class _ClusterError(Exception):
    """The cluster could not be read; the message says why."""


def _from_cluster(kubeconfig: Path | None, context: str | None) -> tuple[list[Any], list[str]]:
    from fivespot.compiler.check.objectyaml import Document
    from fivespot.runtime import kube

    try:
        api = kube.load_cli_client(kubeconfig, context)
    except (kube.ConfigError, kube.KubeconfigError, OSError, ValueError) as error:
        raise _ClusterError(f"cannot use the kubeconfig: {error}") from None
    documents, counts = [], []
    try:
        for group, version, plural, kind in KINDS_FROM_CLUSTER:
            items = list(kube.list_objects(api, kube.resource_path(group, version, plural)))
            counts.append(f"{len(items)} {plural}")
            for item in items:
                meta = item.get("metadata") or {}
                where = f"{kind} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")
                documents.append(Document(f"cluster {where}", {
                    "apiVersion": f"{group}/{version}" if group else version, "kind": kind, **item}, 0))
    except kube.ApiError as error:
        raise _ClusterError(f"listing the cluster's objects: {error}") from None
    finally:
        api.close()
    return documents, [f"the cluster ({', '.join(counts)})"]
