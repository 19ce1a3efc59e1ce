"""`fivespot install OUT_DIR` and `fivespot uninstall OUT_DIR`: the command lines.

Exit codes: 0 done; 1 the cluster refused an object or an object did not become ready in time
(named on stderr; what was applied before it stays, and a second run continues from there);
2 bad input (OUT_DIR is not compiled output, no usable kubeconfig or context).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

from fivespot.commandline import exitcodes

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = exitcodes.OK, exitcodes.NEGATIVE, exitcodes.BAD_INPUT


def _cluster_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR",
                        help="the output of `fivespot compile`")
    parser.add_argument("--kubeconfig", type=Path, metavar="PATH",
                        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else "
                             "the in-cluster ServiceAccount)")
    parser.add_argument("--context", metavar="NAME",
                        help="kubeconfig context to use (default: its current context)")
    parser.add_argument("--dry-run", action="store_true",
                        help="send every request with dryRun=All: the API server validates each "
                             "object and stores nothing")


def register_install(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "install", help="apply a compiled OUT_DIR to a cluster, wave by wave, waiting for each",
        description="Server-side apply every object of OUT_DIR in the order the output declares "
                    "(its sync waves), waiting after each wave until its CRDs are Established "
                    "and its Deployments Available. Running it again changes nothing.")
    _cluster_flags(parser)
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                        help="how long each wave may take to become ready (default 300)")
    parser.set_defaults(handler=_install)


def register_uninstall(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "uninstall", help="delete what `fivespot install` applied; CRDs and their objects stay",
        description="Delete the objects of OUT_DIR from the cluster: the webhook configuration "
                    "first, then the waves in reverse. The CRDs, and so every ScheduledCapacity "
                    "and schedule in the cluster, are kept unless --delete-crds is given; the "
                    "namespaces are always kept (deleting one deletes everything in it).")
    _cluster_flags(parser)
    parser.add_argument("--delete-crds", action="store_true",
                        help="also delete the CRDs, which deletes every object of their kinds in "
                             "the cluster (ScheduledMachines first, each draining its machine)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                        help="with --delete-crds, how long the ScheduledMachines may take to "
                             "leave (default 300)")
    parser.set_defaults(handler=_uninstall)


def _run(args: argparse.Namespace, act: Callable[[Any, Any], str], **options: Any) -> int:
    """Load OUT_DIR and the client (exit 2 if either fails), run `act(installer, manifests)`
    (exit 1 on a refusal or a timeout) and print the line it returns."""
    from fivespot.deploy.installer import Installer, InstallError
    from fivespot.deploy.manifests import OutputError, load
    from fivespot.runtime.kube import ApiError, ConfigError, load_cli_client

    try:
        manifests = load(args.out_dir)
        api = load_cli_client(args.kubeconfig, args.context)
    except (OutputError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    installer = Installer(api, dry_run=args.dry_run, report=lambda line: print(line, flush=True),
                          **options)
    try:
        print(act(installer, manifests))
    except InstallError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except ApiError as error:  # no answer at all, or one the installer does not expect
        print(f"error: the API server {api.configuration.host}: {_unanswered(error)}",
              file=sys.stderr)
        return EXIT_FAILED
    finally:
        api.close()
    return EXIT_OK


def _unanswered(error: Any) -> str:
    """`connection refused` rather than urllib3's retry report."""
    if error.status != 0:
        return f"{error.status} {error.reason}: {error.message}"
    found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", error.message)
    cause = found.group(1).lower() if found else error.reason
    return f"did not answer ({cause}); is the cluster up and is this its kubeconfig?"


def _install(args: argparse.Namespace) -> int:
    started = time.monotonic()

    def act(installer: Any, manifests: Any) -> str:
        summary = installer.install(manifests)
        verb = "checked (dry run, nothing stored)" if args.dry_run else "installed"
        return (f"{verb} {len(manifests)} objects from {args.out_dir} in "
                f"{time.monotonic() - started:.1f}s: {summary.render()}")

    return _run(args, act, timeout_s=args.timeout)


def _uninstall(args: argparse.Namespace) -> int:
    def act(installer: Any, manifests: Any) -> str:
        summary = installer.uninstall(manifests, delete_crds=args.delete_crds)
        return f"uninstalled {args.out_dir}{' (dry run)' if args.dry_run else ''}: {summary.render()}"

    return _run(args, act, timeout_s=args.timeout)
