"""`fivespot provider manual|time-based|capital-markets|composite`: run one built-in provider
controller (CompositeSchedule's also watches its children's kinds).

The compiled Deployments run `fivespot provider <name> --bundle /etc/fivespot/bundle.json`; the
bundle says which partitions exist (one Lease each) and which provider kinds were installed. The
process runs until SIGTERM, then stops acting, releases its leases and exits 0. A provider the
bundle does not install, or a bundle that cannot be read, is refused with exit code 2 before
anything is started: its CRD and RBAC would not exist.

The flags are the ones every controller shares (`fivespot.runtime.controllerprocess.add_runtime_flags`: bundle,
kubeconfig, identity, partitions, lease timings, resync, probes), so a provider is operated
exactly like the capacity controller. `register(subparsers)` adds the command to any argparse
CLI (the `fivespot` one, or `python -m fivespot.controllers.spotschedules`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from fivespot.commandline import boundary
from fivespot.runtime.controllerprocess import add_runtime_flags, serve

log = logging.getLogger("fivespot.provider")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `provider <name> ...` to an argparse sub-parser set; returns the added parser."""
    from fivespot.controllers.spotschedules.controller import DEFAULT_RESYNC_S, DEFAULT_WORKERS, PROVIDER_TYPES

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "provider", help="run a built-in schedule provider controller",
        description="Watch one provider kind, publish status.active and requeue at each "
                    "schedule's next boundary, leading one Lease per partition.")
    parser.add_argument("name", choices=sorted(PROVIDER_TYPES), help="which provider")
    add_runtime_flags(parser)
    parser.set_defaults(handler=run, resync=DEFAULT_RESYNC_S, workers=DEFAULT_WORKERS)
    return parser


def run(args: argparse.Namespace) -> int:
    """The process: check the inputs, start, wait for SIGTERM, stop cleanly."""
    from fivespot.api.bundle import Bundle
    from fivespot.controllers.spotschedules.controller import PROVIDER_TYPES, bundle_lists
    from fivespot.controllers.spotschedules.managers import provider_manager

    provider = PROVIDER_TYPES[args.name]

    def installed(bundle: Bundle) -> None:
        if not bundle_lists(bundle, provider):
            raise ValueError(f"{args.bundle} does not install {provider.kind.kind}; add it to a "
                             "ScheduleProvider's spec.builtin and recompile")

    return serve(args, "provider", lambda api, settings: provider_manager(api, provider, settings)[0],
                 check=installed)


def main(argv: list[str] | None = None) -> int:
    """`python -m fivespot.controllers.spotschedules NAME ...`: the arguments of `fivespot provider`."""
    parser = argparse.ArgumentParser(prog="python -m fivespot.controllers.spotschedules")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    boundary.add_debug_flag(parser)
    args = parser.parse_args(["provider", *(sys.argv[1:] if argv is None else argv)])
    return boundary.run(f"provider {args.name}", lambda: int(args.handler(args)), debug=args.debug)
