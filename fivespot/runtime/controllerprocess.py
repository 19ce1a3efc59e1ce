"""A controller process, the same for every controller: its command-line flags, the inputs they
name (bundle, partitions, lease timing), and `serve` — build the Manager, serve its probes, log the
start line, run until SIGTERM, stop in order. The capacity controller, the machine controller and
each provider are this with their own reconciler; `fivespot.controllers.cli` and
`fivespot.controllers.spotschedules.cli` only name which. (Not to be confused with `fivespot.runtime.processes`, which
keeps child processes from outliving their parent.)
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fivespot.api.bundle import Bundle, BundleError, load_bundle
from fivespot.commandline import exitcodes
from fivespot.runtime import logs
from fivespot.runtime.informer import DEFAULT_RESYNC_S, DEFAULT_WATCH_TIMEOUT_S
from fivespot.runtime.leaderelection import Timing, default_identity
from fivespot.runtime.manager import Manager, Settings
from fivespot.runtime.partitions import Partitions

if TYPE_CHECKING:
    from fivespot.runtime.kube import ApiClient as ApiClientType
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
                        help="the least time between two renewals of a lease, and between two "
                             "tries to take one")
    parser.add_argument("--renew-every", type=float, metavar="S",
                        help="a held lease is renewed this long after its last renewal (default: a "
                             "third of --lease-duration); a failed renewal is retried at once")
    parser.add_argument("--solo-lease-duration", type=float, default=120.0, metavar="S",
                        help="the lease a holder writes while no standby replica has announced "
                             "itself (renewed at the same fraction; 0: always --lease-duration)")
    parser.add_argument("--idle-release", type=float, default=Timing.idle_release_s, metavar="S",
                        help="a holder no standby replica has announced itself to releases its "
                             "lease after S seconds without a write and takes it again before "
                             "its next write (0: keep it and renew it)")
    parser.add_argument("--resync", type=float, default=DEFAULT_RESYNC_S, metavar="S",
                        help="slow periodic resync of every cached object, the backstop for a "
                             "missed reaction (each period drawn between S and 1.25 S; 0: none)")
    parser.add_argument("--stall-after", type=float, default=150.0, metavar="S",
                        help="a watch with no event and no bookmark for this long is restarted")
    parser.add_argument("--watch-timeout", type=float, default=DEFAULT_WATCH_TIMEOUT_S, metavar="S",
                        help="server-side timeout of each watch request (jittered), after which "
                             "it is resumed")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                        help="JSON log lines at this level and above (default info)")


def runtime_inputs(args: argparse.Namespace) -> tuple[Bundle, Partitions, Timing]:
    """The bundle, partitions and lease timing every controller starts from.

    Raises BundleError or ValueError on bad input, which the caller reports and exits 2
    (so does load_client's KubeconfigError).
    """
    bundle = load_bundle(args.bundle)
    partitions = partitions_from(args, bundle)
    timing = Timing(lease_duration_s=args.lease_duration, renew_deadline_s=args.renew_deadline,
                    retry_period_s=args.retry_period, renew_every_s=args.renew_every,
                    solo_lease_duration_s=args.solo_lease_duration or None,
                    idle_release_s=args.idle_release or None)
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    return bundle, partitions, timing


def partitions_from(args: argparse.Namespace, bundle: Bundle) -> Partitions:
    partitions = Partitions.from_bundle(bundle)
    if args.partitions:
        partitions = partitions.only(p.strip() for p in args.partitions.split(",") if p.strip())
    return partitions


def serve(args: argparse.Namespace, what: str,
          build: Callable[[ApiClientType, Settings], Manager],
          check: Callable[[Bundle], None] | None = None,
          extra: Mapping[str, object] | None = None) -> int:
    """Run one controller's Manager until SIGTERM: inputs (exit 2 when bad), probes and
    metrics, the start line tests and the demo wait for (`<what> starting`), then stop (workers,
    leases, watches). Every controller binary — capacity, machine, each provider — is this."""
    from fivespot.runtime.kube import KubeconfigError, load_client, pool_for
    from fivespot.runtime.signals import stop_event_on_signals

    logs.configure(args.log_level)
    try:
        bundle, partitions, timing = runtime_inputs(args)
        if check is not None:
            check(bundle)
        api = load_client(args.kubeconfig, pool_size=pool_for(args.workers))
    except (BundleError, ValueError, KubeconfigError) as error:
        log.error("cannot start", extra={"error": str(error)})
        return EXIT_BAD_INPUT
    settings = Settings(
        bundle=bundle,
        identity=args.identity or default_identity(),
        namespace=args.lease_namespace or os.environ.get("POD_NAMESPACE") or bundle.namespace,
        partitions=partitions, timing=timing, workers=args.workers, resync_s=args.resync,
        stall_after_s=args.stall_after, watch_timeout_s=args.watch_timeout,
    )
    stop = stop_event_on_signals(threading.Event())
    mgr = build(api, settings)
    port = mgr.serve_probes(args.metrics_port)
    log.info(f"{what} starting", extra={
        "controller": mgr.component, "identity": settings.identity,
        "partitions": list(partitions.campaign), "metrics_port": port,
        "lease_namespace": settings.namespace, "pid": os.getpid(), **(extra or {})})
    try:
        if mgr.start(stop):
            stop.wait()
    finally:
        log.info("stopping: releasing leases", extra={"controller": mgr.component,
                                                      "identity": settings.identity})
        mgr.stop()
    return EXIT_OK
