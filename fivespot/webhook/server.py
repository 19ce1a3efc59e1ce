"""`fivespot webhook serve`: the app under gunicorn (event-driven uvicorn workers) over TLS.

Process layout, and why:
- The **master** (this process) checks the bundle, and in self-managed mode makes sure the TLS
  Secret exists (create-or-adopt) before anything listens, so a pod that cannot get a certificate
  fails to start, visibly, instead of serving errors. It writes the pair to a private scratch dir
  only because gunicorn validates its TLS settings from files at start. It starts no threads:
  gunicorn forks workers from it, and a fork copies only the forking thread, so locks held by
  any other thread would be copied held.
- Each **worker** (after the fork) opens its own API client, loads the pair, and runs its own
  certificate loop and informers. Several workers behave exactly like several replicas: the
  Secret's resourceVersion makes one writer win, the rest adopt. The compiled Deployment runs
  one worker (its CPU limit is one core); scale with replicas.
- Each worker is `fivespot.webhook.connections.AdmissionWorker`: uvicorn on a uvloop event loop, with a
  whole-request deadline per connection, bounded sizes, and the Flask app called only once a
  request has fully arrived (that module says why: no set of slow clients can take every slot).
- Connections get their TLS context from the worker's `ServingCertificate` (uvicorn's
  `ssl_context_factory` hook), which is how a rotated certificate is served without a restart;
  with client authentication on, the same object judges each connection's certificate
  (`fivespot.webhook.serving`).
- Metrics: plain HTTP on `--metrics-port` (the compiled metrics Service's port), never on the
  TLS port every caller reaches. With several workers each serves its own registry on that port
  (SO_REUSEPORT), so a scrape sees one worker's view; the compiled Deployment runs one.
"""

from __future__ import annotations

import datetime
import gc
import logging
import os
import shutil
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from gunicorn.app.base import BaseApplication

from fivespot.api.identities import WEBHOOK, WEBHOOK_CONFIGURATION, WEBHOOK_TLS_SECRET
from fivespot.runtime.informer import Informer
from fivespot.runtime.kube import ApiClient, ApiError, load_client
from fivespot.runtime.processes import die_with_parent
from fivespot.webhook import metrics as prometheus
from fivespot.webhook.app import Runtime, served, utcnow
from fivespot.webhook.bodies import body_limit, check_label, waits
from fivespot.webhook.bundle import WebhookBundle, load_bundle
from fivespot.webhook.caches import (
    AutoscalersNow,
    CapacitiesByTarget,
    CapacityNow,
    MachinesByNamespace,
    NamespaceObjects,
    capacity_informer,
    machine_informer,
    namespace_informer,
)
from fivespot.webhook.connections import (
    AdmissionWorker,
    ConnectionLimits,
    QuietArbiter,
    WSGIGateway,
    observe_cuts,
)
from fivespot.webhook.certificates import (
    CertificateError,
    CertificateLoop,
    Lifetimes,
    SecretKeeper,
    ServingNames,
    TLSState,
    next_due,
)
from fivespot.webhook.metrics import Metrics, status_label
from fivespot.webhook.review import Lookups
from fivespot.webhook.serving import (
    CertificateFiles,
    ClientAuthentication,
    MinimumVersion,
    ServingCertificate,
    TLSPolicy,
    server_context,
)

log = logging.getLogger("fivespot.webhook")

CertificateMode = Literal["self-managed", "files"]
STARTUP_DEADLINE_S: Final = 60.0


@dataclass(frozen=True)
class ServeOptions:
    bundle_path: Path
    port: int
    bind: str = "0.0.0.0"
    kubeconfig: Path | None = None
    certificate_mode: CertificateMode = "self-managed"
    tls_cert: Path | None = None
    tls_key: Path | None = None
    namespace: str | None = None
    """Where the TLS Secret lives: --namespace, else $POD_NAMESPACE, else the bundle's."""
    tls_sans: tuple[str, ...] = ()
    lifetimes: Lifetimes = field(default_factory=Lifetimes)
    certificate_check_s: float = 60.0
    workers: int = 1
    keepalive_s: int = 75
    request_deadline_s: float | None = None
    """How long a client may take to send a whole request; default: half the bundle's
    timeoutSeconds (`ConnectionLimits.for_timeout`)."""
    metrics_port: int = 0
    min_tls_version: MinimumVersion = "1.3"
    client_ca: Path | None = None
    """Verify callers: a client certificate from this CA (PEM), naming one of `client_names`."""
    client_names: tuple[str, ...] = ()

    def tls_policy(self) -> TLSPolicy:
        clients = (ClientAuthentication(self.client_ca, frozenset(self.client_names))
                   if self.client_ca is not None else None)
        return TLSPolicy(self.min_tls_version, clients)

    def limits(self, webhook_timeout_s: float) -> ConnectionLimits:
        if self.request_deadline_s is not None:
            return ConnectionLimits(request_deadline_s=self.request_deadline_s)
        return ConnectionLimits.for_timeout(webhook_timeout_s)


def _secret_namespace(options: ServeOptions, bundle: WebhookBundle) -> str:
    return options.namespace or os.environ.get("POD_NAMESPACE") or bundle.namespace


def _keeper(api: ApiClient, options: ServeOptions, bundle: WebhookBundle) -> SecretKeeper:
    namespace = _secret_namespace(options, bundle)
    return SecretKeeper(api, namespace, WEBHOOK_TLS_SECRET, WEBHOOK_CONFIGURATION,
                        options.lifetimes,
                        ServingNames.for_service(WEBHOOK, namespace, options.tls_sans))


def initial_certificate(options: ServeOptions, bundle: WebhookBundle, scratch: Path) -> tuple[Path, Path]:
    """The files gunicorn starts with: the mounted pair, or the Secret's (created if need be)."""
    if options.certificate_mode == "files":
        assert options.tls_cert is not None and options.tls_key is not None
        return options.tls_cert, options.tls_key
    api = load_client(options.kubeconfig)
    keeper = _keeper(api, options, bundle)
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    try:
        while True:
            try:
                state = keeper.reconcile()
                break
            except (CertificateError, ApiError, OSError) as error:
                if time.monotonic() > deadline:
                    raise CertificateError(f"no serving certificate after {STARTUP_DEADLINE_S:.0f}s: "
                                           f"{error}") from None
                log.warning("certificate not ready (%s); retrying", error)
                time.sleep(2)
    finally:
        api.close()
    cert, key = scratch / "tls.crt", scratch / "tls.key"
    key.touch(mode=0o600)
    key.write_bytes(state.serving_key_pem)
    cert.write_bytes(state.serving_cert_pem)
    return cert, key


# --- per worker --------------------------------------------------------------------------------

_SERVING: ServingCertificate | None = None
"""This worker's serving certificate (None in the master)."""


def _ssl_context(conf: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    return _SERVING.listening_context() if _SERVING is not None else default_factory()


def _admit(ssl_object: Any) -> str | None:
    """The connection layer's client gate: this worker's verdict on a caller's certificate."""
    if _SERVING is None:
        return "the webhook is not serving yet"
    return _SERVING.admit(ssl_object)


MISSING_CONFIGURATION_RETRY_S: Final = 1.0
"""How soon to look again for a webhook configuration that does not exist yet, to inject its
caBundle: `fivespot install` applies it only once the webhook is Available, and waits for it."""


class _SelfManagedTick:
    """One certificate check: reconcile the Secret and caBundle, serve what it holds."""

    def __init__(self, keeper: SecretKeeper, serving: ServingCertificate, metrics: Metrics,
                 interval_s: float) -> None:
        self.keeper, self.serving, self.metrics, self.interval_s = keeper, serving, metrics, interval_s

    def __call__(self) -> float:
        if self.serving.refresh_client_ca():
            log.info("client CA file changed; new connections are verified against it")
        state: TLSState = self.keeper.reconcile()
        if self.serving.load(state.serving_cert_pem, state.serving_key_pem):
            self.metrics.certificate_reloads.inc()
            log.info("serving certificate loaded; valid until %s", self.serving.not_after)
        self.metrics.set_expiry("serving", self.serving.not_after)
        self.metrics.set_expiry("ca", state.authorities[-1].cert.not_valid_after_utc)
        now = utcnow()
        until = (next_due(state, self.keeper.lifetimes, now) - now).total_seconds()
        if self.keeper.configuration_missing:  # an installer applies it once the webhook is ready
            until = min(until, MISSING_CONFIGURATION_RETRY_S)
        return min(self.interval_s, max(until, 0.0) + 0.05)


class _FilesTick:
    def __init__(self, files: CertificateFiles, metrics: Metrics) -> None:
        self.files, self.metrics = files, metrics

    def __call__(self) -> float:
        if self.files.serving.refresh_client_ca():
            log.info("client CA file changed; new connections are verified against it")
        before = self.files.serving.reloads
        delay = self.files.tick()
        if self.files.serving.reloads != before:
            self.metrics.certificate_reloads.inc()
            log.info("serving certificate reloaded from %s; valid until %s", self.files.cert,
                     self.files.serving.not_after)
        self.metrics.set_expiry("serving", self.files.serving.not_after)
        return delay


@dataclass
class Worker:
    """What one worker runs besides the app (kept for readiness and shutdown)."""

    serving: ServingCertificate
    machines: Informer
    capacities: Informer
    namespaces: Informer | None
    loop: CertificateLoop

    def readiness(self) -> list[str]:
        problems = []
        if problem := self.serving.problem(utcnow()):
            problems.append(problem)
        for informer in (self.machines, self.capacities, self.namespaces):
            if informer is not None and not informer.healthy():
                problems.append(f"the {informer.name} cache is not synced or its watch is stalled")
        return problems


def start_worker(options: ServeOptions, bundle: WebhookBundle, cert: Path, key: Path,
                 scratch: Path) -> tuple[Runtime, Worker]:
    api = load_client(options.kubeconfig)
    metrics = Metrics()
    serving = ServingCertificate(scratch, options.tls_policy())
    serving.load(cert.read_bytes(), key.read_bytes())
    metrics.certificate_reloads.inc()
    metrics.set_expiry("serving", serving.not_after)
    tick: Callable[[], float]
    if options.certificate_mode == "files":
        files = CertificateFiles(cert, key, serving, interval=min(options.certificate_check_s, 10.0))
        files.tick()
        tick = _FilesTick(files, metrics)
    else:
        tick = _SelfManagedTick(_keeper(api, options, bundle), serving, metrics,
                                options.certificate_check_s)
    machines = machine_informer(api)
    capacities = capacity_informer(api)
    namespaces = namespace_informer(api) if bundle.polyfill else None
    loop = CertificateLoop(tick, "certificates")
    worker = Worker(serving, machines, capacities, namespaces, loop)
    for informer in (machines, capacities, namespaces):
        if informer is not None:
            informer.start()
    loop.start()
    lookups = Lookups(MachinesByNamespace(machines), NamespaceObjects(namespaces),
                      CapacitiesByTarget(capacities), CapacityNow(api), AutoscalersNow(api))
    runtime = Runtime(bundle, lookups, metrics, worker.readiness)
    return runtime, worker


def use_serving(serving: ServingCertificate) -> None:
    """Hand this worker's connections the contexts of `serving` (the `ssl_context` hook)."""
    global _SERVING
    _SERVING = serving


class GunicornApplication(BaseApplication):  # type: ignore[misc]
    """gunicorn, configured in code rather than from a command line or a file; `factory` runs in
    each worker after the fork and returns the WSGI app, which the worker serves behind
    `fivespot.webhook.connections`. The benchmark's no-op responder runs on this same class, so the two
    differ only in the app."""

    def __init__(self, options: ServeOptions, cert: Path, key: Path,
                 factory: Callable[[], Any], limits: ConnectionLimits,
                 on_refused: Callable[[str, int], None] | None = None) -> None:
        self.options, self.cert, self.key, self.factory = options, cert, key, factory
        self.limits, self.on_refused = limits, on_refused
        super().__init__()

    def load_config(self) -> None:
        options = self.options
        host = f"[{options.bind}]" if ":" in options.bind else options.bind
        settings: dict[str, Any] = {
            "bind": [f"{host}:{options.port}"],
            "workers": options.workers,
            "worker_class": AdmissionWorker.configure(
                self.limits, _ssl_context, _admit if options.client_ca is not None else None),
            "keepalive": options.keepalive_s,
            "timeout": 30,
            "graceful_timeout": 10,
            "certfile": str(self.cert),
            "keyfile": str(self.key),
            "accesslog": None,
            "errorlog": "-",
            "loglevel": "info",
            "proc_name": "fivespot-webhook",
            "preload_app": False,
            "control_socket_disable": True,  # a shared ~/.gunicorn path; nothing uses it
            "post_fork": _end_with_master,
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    def run(self) -> None:
        """gunicorn's `BaseApplication.run`, with the `QuietArbiter`."""
        try:
            QuietArbiter(self).run()
        except RuntimeError as error:
            print(f"\nError: {error}\n", file=sys.stderr)
            sys.stderr.flush()
            sys.exit(1)

    def load(self) -> Any:
        app = WSGIGateway(self.factory(), self.limits, body_limit, self.on_refused, waits)
        # Everything built so far (imports, bundle, compiled policies, the app) lives as long as
        # the worker: move it out of the collector's generations, so a full collection scans
        # only what requests allocate and stays short.
        gc.collect()
        gc.freeze()
        return app


def _end_with_master(server: Any, worker: Any) -> None:
    """A worker ends with its master: uvicorn's workers, unlike gunicorn's own, never check
    whether the master still lives, so a master killed outright would leave them serving."""
    die_with_parent()


_METRICS: Metrics | None = None
"""This worker's metrics (None in the master), for what the connection layer rejects."""


def _refused(path: str, status: int) -> None:
    """Count a request the connection layer answered itself (413, 503, 403), by check: the
    label is the check's name or "unknown", never the path (security review F5)."""
    if _METRICS is not None:
        _METRICS.rejected.labels(check_label(path), status_label(status)).inc()


def _webhook_factory(options: ServeOptions, bundle: WebhookBundle, cert: Path, key: Path,
                     scratch: Path) -> Callable[[], Any]:
    def factory() -> Any:
        global _METRICS
        runtime, worker = start_worker(options, bundle, cert, key, scratch)
        use_serving(worker.serving)
        _METRICS = runtime.metrics
        observe_cuts(lambda reason: runtime.metrics.connections_cut.labels(reason).inc())
        if options.metrics_port:
            prometheus.serve(runtime.metrics.registry, options.metrics_port, options.bind,
                             shared=options.workers > 1)
        return served(runtime)

    return factory


def serve(options: ServeOptions) -> int:
    """Run the webhook until a signal stops it; the exit code of the master."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    bundle = load_bundle(options.bundle_path)
    scratch = Path(tempfile.mkdtemp(prefix="fivespot-webhook-"))
    try:
        cert, key = initial_certificate(options, bundle, scratch)
        # Fail here, visibly, rather than in every worker: the pair and the policy must load.
        server_context(cert.read_bytes(), key.read_bytes(), scratch, options.tls_policy())
        limits = options.limits(bundle.timeout_seconds)
        clients = (f"client certificates from {options.client_ca} naming "
                   f"{', '.join(options.client_names)}" if options.client_ca else
                   "no client certificates")
        log.info("serving %s on %s:%d (%s certificates, TLS %s+, %s, host governance %s, "
                 "polyfill %s, request deadline %gs)", options.bundle_path, options.bind,
                 options.port, options.certificate_mode, options.min_tls_version, clients,
                 bundle.host_governance, "on" if bundle.polyfill else "off",
                 limits.request_deadline_s)
        GunicornApplication(options, cert, key,
                            _webhook_factory(options, bundle, cert, key, scratch), limits,
                            _refused).run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def parse_duration(text: str) -> datetime.timedelta:
    """`90d`, `12h`, `10m`, `30s` (or a sum of them, `1h30m`)."""
    import re

    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?[dhms])+", text.strip())
    if not parts:
        raise ValueError(f"{text!r} is not a duration like 90d, 12h, 10m or 30s")
    seconds = sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([dhms])", text))
    return datetime.timedelta(seconds=seconds)
