"""`fivespot audit OUT_DIR`: before a policy change is merged, which objects already in a cluster
would its compiled output deny — and why, in the API server's own words.

It reads (and only reads) every object of every kind the output's CRDs define, from the cluster
of a kubeconfig and context as kubectl picks them, or from `kubectl get -o yaml` exports
(`--from`, for a CI job without cluster access), and decides each as a create of it today would
be decided by the output's policies (`fivespot.compiler.check.audit`). Exit 1 when the output would deny any;
read-only RBAC (get, list on those kinds) is enough.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fivespot.commandline import exitcodes

"""Objects per list request: kubectl's chunk size, so the API server's cost is kubectl's."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "audit", help="which stored objects a compiled output's policies would deny",
        description="Decide every object of the kinds OUT_DIR defines, as stored in a cluster (or "
                    "in kubectl get -o yaml exports), as a create of it today would be decided by "
                    "OUT_DIR's policies. Exit 1 if any would be denied.")
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="a compiled output")
    parser.add_argument("--from", dest="exports", type=Path, nargs="+", metavar="FILE",
                        help="kubectl get -o yaml|json exports (files or folders) instead of a "
                             "cluster")
    parser.add_argument("--kubeconfig", type=Path, metavar="PATH",
                        help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table",
                        help="table (default), or json for tools")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fivespot.compiler.check import audit
    from fivespot.compiler.diagnostics import CompileError
    from fivespot.compiler.diagnostics import InputError
    from fivespot.runtime.kube import ApiError, ConfigError

    try:
        stored = (audit.stored_objects(args.exports) if args.exports
                  else list(_live(args.out_dir, args.kubeconfig, args.context)))
        results = audit.audit([args.out_dir], stored)
    except (InputError, CompileError) as error:
        print(str(error), file=sys.stderr)
        return exitcodes.BAD_INPUT
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    except ApiError as error:
        print(f"error: listing the stored objects: {error}", file=sys.stderr)
        return exitcodes.NEGATIVE if error.status == 403 else exitcodes.BAD_INPUT
    print(audit.render_json(results) if args.output == "json" else audit.render_table(results))
    return exitcodes.NEGATIVE if audit.denied(results) else exitcodes.OK


def _live(out_dir: Path, kubeconfig: Path | None, context: str | None) -> Iterator[dict[str, Any]]:
    """Every object of every kind OUT_DIR's CRDs define, from the cluster, page by page; a kind
    the cluster does not serve yet has none."""
    from fivespot.runtime import kube

    api = kube.load_cli_client(kubeconfig, context)
    try:
        for group, version, plural in _kinds(out_dir):
            yield from kube.list_objects(api, kube.resource_path(group, version, plural))
    finally:
        api.close()


def _kinds(out_dir: Path) -> list[tuple[str, str, str]]:
    """(group, storage version, plural) of every CRD in OUT_DIR."""
    from fivespot.compiler.check.objectyaml import parse_documents, read_file
    from fivespot.compiler.check.objects import yaml_files

    found = []
    for path in yaml_files(out_dir):
        for document in parse_documents(read_file(path, str(path)), str(path)):
            crd = document.data
            if not isinstance(crd, Mapping) or crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd.get("spec") or {}
            versions = [v for v in spec.get("versions") or [] if v.get("served")]
            storage = next((v["name"] for v in versions if v.get("storage")),
                           versions[0]["name"] if versions else None)
            if storage is not None:
                found.append((str(spec.get("group")), str(storage),
                              str((spec.get("names") or {}).get("plural"))))
    return sorted(set(found))
