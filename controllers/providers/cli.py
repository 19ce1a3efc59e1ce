"""`fivespot provider manual|time-based|capital-markets|composite`: run one built-in provider
controller (CompositeSchedule's also watches its children's kinds).

The compiled Deployments run `fivespot provider <name> --bundle /etc/fivespot/bundle.json`; the
bundle says which partitions exist (one Lease each) and which provider kinds were installed. The
process runs until SIGTERM, then stops acting, releases its leases and exits 0. A provider the
bundle does not install, or a bundle that cannot be read, is refused with exit code 2 before
anything is started: its CRD and RBAC would not exist.

The flags are the ones every controller shares (`controllers.cli.add_runtime_flags`: bundle,
kubeconfig, identity, partitions, lease timings, resync, probes), so a provider is operated
exactly like the capacity controller. `register(subparsers)` adds the command to any argparse
CLI (the `fivespot` one, or `python -m controllers.providers`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from commandline import boundary
from controllers.cli import EXIT_BAD_INPUT, EXIT_OK, add_runtime_flags, runtime_inputs

log = logging.getLogger("fivespot.provider")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `provider <name> ...` to an argparse sub-parser set; returns the added parser."""
    from controllers.providers.controller import DEFAULT_RESYNC_S, DEFAULT_WORKERS, PROVIDER_TYPES

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
    from api.bundle import BundleError
    from controllers.providers.controller import PROVIDER_TYPES, ProviderController, bundle_lists
    from runtime import kube, logs
    from runtime.health import HealthServer
    from runtime.leaderelection import default_identity
    from runtime.signals import stop_event_on_signals

    logs.configure(args.log_level)
    provider = PROVIDER_TYPES[args.name]
    try:
        bundle, partitions, timing = runtime_inputs(args)
        api = kube.load_client(args.kubeconfig, pool_size=kube.pool_for(args.workers))
    except (BundleError, ValueError) as error:
        log.error("cannot start", extra={"error": str(error)})
        return EXIT_BAD_INPUT
    if not bundle_lists(bundle, provider):
        log.error("cannot start", extra={"error": (
            f"{args.bundle} does not install {provider.kind.kind}; add it to a "
            "ScheduleProvider's spec.builtin and recompile")})
        return EXIT_BAD_INPUT

    stop = stop_event_on_signals(threading.Event())
    identity = args.identity or default_identity()
    lease_namespace = args.lease_namespace or os.environ.get("POD_NAMESPACE") or bundle.namespace
    settings: dict[str, Any] = dict(
        lease_namespace=lease_namespace, identity=identity, workers=args.workers,
        resync_s=args.resync, stall_after_s=args.stall_after,
        watch_timeout_s=args.watch_timeout, timing=timing,
    )
    controller: ProviderController
    if provider.kind.reads_providers:
        from controllers.providers.composite_controller import CompositeController

        controller = CompositeController(
            api, provider, partitions, **settings,
            child_kinds=[(p.group, p.kind) for p in bundle.providers])
    else:
        controller = ProviderController(api, provider, partitions, **settings)
    health = HealthServer(args.metrics_port)
    health.add_liveness("workers",
                        lambda: controller.alive() or not controller.informer.has_synced())
    health.add_readiness("watch", controller.ready)
    health.start()
    log.info("provider starting", extra={
        "controller": provider.component, "identity": identity,
        "partitions": list(partitions.campaign), "metrics_port": health.port,
        "lease_namespace": lease_namespace, "pid": os.getpid()})
    try:
        if controller.start(stop):
            stop.wait()
    finally:
        log.info("stopping: releasing leases", extra={"controller": provider.component})
        controller.stop()
        health.stop()
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """`python -m controllers.providers NAME ...`: the arguments of `fivespot provider`."""
    parser = argparse.ArgumentParser(prog="python -m controllers.providers")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    boundary.add_debug_flag(parser)
    args = parser.parse_args(["provider", *(sys.argv[1:] if argv is None else argv)])
    return boundary.run(f"provider {args.name}", lambda: int(args.handler(args)), debug=args.debug)
