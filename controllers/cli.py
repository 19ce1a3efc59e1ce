"""`fivespot controller capacity ...`: the command-line entry of the controllers.

`register(subparsers)` adds the `controller` command to any argparse parser (the `fivespot` CLI
wires it in with one line); `add_runtime_flags` is the set of flags every controller shares
(identity, kubeconfig, partitions, lease timings, probes), so the providers take the same ones.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from api.bundle import Bundle, BundleError, load_bundle
from commandline import exitcodes
from runtime import logs
from runtime.leaderelection import Timing, default_identity
from runtime.partitions import Partitions

if TYPE_CHECKING:
    from runtime.kube import ApiClient as ApiClientType
else:
    ApiClientType = Any

log = logging.getLogger("fivespot.cli")

EXIT_OK = exitcodes.OK
EXIT_BAD_INPUT = exitcodes.BAD_INPUT


def add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every controller binary."""
    parser.add_argument("--bundle", type=Path, required=True, metavar="PATH",
                        help="the compiled bundle.json (mounted from the fivespot-bundle ConfigMap)")
    parser.add_argument("--kubeconfig", type=Path, metavar="PATH",
                        help="kubeconfig to use (default: $KUBECONFIG, else in-cluster)")
    parser.add_argument("--identity", metavar="NAME",
                        help="lease holder identity (default: $POD_NAME, else host-pid-random)")
    parser.add_argument("--metrics-port", type=int, default=8080, metavar="N",
                        help="port for /healthz, /readyz and /metrics (0: any free port)")
    parser.add_argument("--partitions", metavar="a,b",
                        help="campaign only for these partitions (default: all in the bundle)")
    parser.add_argument("--lease-namespace", metavar="NS",
                        help="namespace of the partition Leases (default: $POD_NAMESPACE, else "
                             "the bundle's install namespace)")
    parser.add_argument("--workers", type=int, default=4, metavar="N",
                        help="reconciles run at once (never two for one object)")
    parser.add_argument("--lease-duration", type=float, default=15.0, metavar="S",
                        help="how long a partition's Lease holds without renewal before another "
                             "replica may take it")
    parser.add_argument("--renew-deadline", type=float, default=10.0, metavar="S",
                        help="a leader that could not renew for this long stops acting (less "
                             "than --lease-duration)")
    parser.add_argument("--retry-period", type=float, default=2.0, metavar="S",
                        help="how often leases are renewed or tried")
    parser.add_argument("--resync", type=float, default=300.0, metavar="S",
                        help="slow periodic resync of every cached object (the backstop clock)")
    parser.add_argument("--stall-after", type=float, default=150.0, metavar="S",
                        help="a watch with no event and no bookmark for this long is restarted")
    parser.add_argument("--watch-timeout", type=float, default=240.0, metavar="S",
                        help="server-side timeout of each watch request (jittered), after which "
                             "it is resumed")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                        help="JSON log lines at this level and above (default info)")


def add_capacity(subparsers: Any) -> argparse.ArgumentParser:
    """The `capacity` subcommand (under `controller`, or top level for `python -m controllers`)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "capacity", help="run the ScheduledCapacity controller")
    add_runtime_flags(parser)
    parser.set_defaults(handler=run_capacity)
    return parser


def add_machine(subparsers: Any) -> argparse.ArgumentParser:
    """The `machine` subcommand: ScheduledMachine -> CAPI Machines."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "machine", help="run the ScheduledMachine controller (CAPI Machines by schedule)")
    add_runtime_flags(parser)
    parser.set_defaults(handler=run_machine)
    return parser


def register(subparsers: Any) -> None:
    """Add `controller capacity` and `controller machine` to a parser's subcommands."""
    controller = subparsers.add_parser("controller", help="run a fivespot controller")
    sub = controller.add_subparsers(dest="controller", metavar="CONTROLLER", required=True)
    add_capacity(sub)
    add_machine(sub)


def runtime_inputs(args: argparse.Namespace) -> tuple[Bundle, Partitions, Timing]:
    """The bundle, partitions and lease timing every controller starts from.

    Raises BundleError or ValueError on bad input, which the caller reports and exits 2
    (so does load_client's KubeconfigError).
    """
    bundle = load_bundle(args.bundle)
    partitions = partitions_from(args, bundle)
    timing = Timing(lease_duration_s=args.lease_duration, renew_deadline_s=args.renew_deadline,
                    retry_period_s=args.retry_period)
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    return bundle, partitions, timing


def partitions_from(args: argparse.Namespace, bundle: Bundle) -> Partitions:
    partitions = Partitions.from_bundle(bundle)
    if args.partitions:
        partitions = partitions.only(p.strip() for p in args.partitions.split(",") if p.strip())
    return partitions


def run_capacity(args: argparse.Namespace) -> int:
    from controllers.capacity.controller import CapacityController, Settings

    return serve(args, "capacity controller", lambda api, fields: CapacityController(
        api, Settings(**fields)))


def run_machine(args: argparse.Namespace) -> int:
    from controllers.machine.controller import MachineController, Settings

    def needs_machines(bundle: Bundle) -> None:
        if bundle.machines is None:
            raise ValueError(f"{args.bundle}: the bundle declares no MachineProvisioning, so there "
                             "are no ScheduledMachines to reconcile; add one to the config repo "
                             "and compile again")

    return serve(args, "machine controller", lambda api, fields: MachineController(
        api, Settings(**fields)), check=needs_machines)


class Served(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def alive(self) -> bool: ...
    def ready(self) -> bool: ...


def serve(args: argparse.Namespace, what: str,
          build: Callable[[ApiClientType, dict[str, Any]], Served],
          check: Callable[[Bundle], None] | None = None) -> int:
    """Run one controller until SIGTERM: inputs (exit 2 when bad), probes and metrics, the
    start line tests and the demo wait for, then stop (workers, leases, watches)."""
    from runtime.health import HealthServer
    from runtime.kube import load_client, pool_for
    from runtime.signals import stop_event_on_signals

    logs.configure(args.log_level)
    try:
        bundle, partitions, timing = runtime_inputs(args)
        if check is not None:
            check(bundle)
        api = load_client(args.kubeconfig, pool_size=pool_for(args.workers))
    except (BundleError, ValueError) as error:
        log.error("cannot start", extra={"error": str(error)})
        return EXIT_BAD_INPUT
    fields: dict[str, Any] = dict(
        bundle=bundle,
        identity=args.identity or default_identity(),
        namespace=args.lease_namespace or os.environ.get("POD_NAMESPACE") or bundle.namespace,
        partitions=partitions, timing=timing, workers=args.workers, resync_s=args.resync,
        stall_after_s=args.stall_after, watch_timeout_s=args.watch_timeout,
    )
    stop = stop_event_on_signals(threading.Event())
    controller = build(api, fields)
    health = HealthServer(args.metrics_port)
    health.add_liveness("workers", controller.alive)
    health.add_readiness("caches", controller.ready)
    health.start()
    log.info(f"{what} starting", extra={
        "identity": fields["identity"], "partitions": list(partitions.campaign),
        "metrics_port": health.port, "lease_namespace": fields["namespace"], "pid": os.getpid()})
    controller.start()
    stop.wait()
    log.info("stopping: releasing leases", extra={"identity": fields["identity"]})
    controller.stop()
    health.stop()
    return EXIT_OK
