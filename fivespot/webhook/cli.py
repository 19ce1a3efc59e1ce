"""`fivespot webhook serve ...`: the command line of the admission webhook.

`register(subparsers)` adds the `webhook` command to the `fivespot` parser (`fivespot/cli/main.py`);
`python -m fivespot.webhook serve ...` runs the same parser on its own. The flags the compiled Deployment
passes are `--bundle`, `--port`, in cert-manager mode `--cert-dir`, and what the Platform's
webhook settings say (`--min-tls-version`; with client authentication `--client-ca-path` and
`--client-subject-names`, cert-manager's webhook's names for them); the rest have production
defaults and exist for local runs and tests (short certificate lifetimes force rotations).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from fivespot.commandline import boundary, exitcodes

EXIT_BAD_INPUT = exitcodes.BAD_INPUT


def _duration(text: str) -> Any:
    from fivespot.webhook.server import parse_duration

    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def register(subparsers: Any) -> None:
    """Add `webhook serve` to a parser's subcommands."""
    webhook = subparsers.add_parser("webhook", help="the admission webhook")
    commands = webhook.add_subparsers(dest="webhook_command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve", help="serve the admission webhook over TLS (gunicorn, event-driven workers)",
        description="Serve host governance, the governed-target guard and the VAP polyfill.")
    serve.add_argument("--bundle", type=Path, required=True, metavar="PATH",
                       help="the compiled bundle.json")
    serve.add_argument("--port", type=int, required=True, metavar="N", help="TLS port (8443)")
    serve.add_argument("--bind", default="0.0.0.0", metavar="ADDR", help="listen address")
    serve.add_argument("--kubeconfig", type=Path, metavar="PATH",
                       help="default: $KUBECONFIG, else the in-cluster ServiceAccount")
    serve.add_argument("--certificate-mode", choices=("self-managed", "files"),
                       default="self-managed",
                       help="self-managed: keep a CA and serving certificate in the Secret "
                            "fivespot-webhook-tls and inject the caBundle; files: serve "
                            "--tls-cert/--tls-key (cert-manager) and reload them when they change")
    serve.add_argument("--tls-cert", type=Path, metavar="FILE",
                       help="files mode: the serving certificate (PEM), reloaded when it changes")
    serve.add_argument("--tls-key", type=Path, metavar="FILE",
                       help="files mode: its private key (PEM)")
    serve.add_argument("--cert-dir", type=Path, metavar="DIR",
                       help="files mode with DIR/tls.crt and DIR/tls.key (the mounted Secret)")
    serve.add_argument("--namespace", metavar="NS",
                       help="namespace of the TLS Secret (default: $POD_NAMESPACE, else the "
                            "bundle's install namespace)")
    serve.add_argument("--tls-san", action="append", default=[], metavar="NAME",
                       help="extra DNS name or IP for the serving certificate (repeatable), e.g. "
                            "127.0.0.1 for a local API server calling by URL")
    serve.add_argument("--ca-validity", type=_duration, default="365d", metavar="DURATION",
                       help="self-managed: lifetime of each CA it makes (default 365d)")
    serve.add_argument("--cert-validity", type=_duration, default="90d", metavar="DURATION",
                       help="self-managed: lifetime of each serving certificate (default 90d)")
    serve.add_argument("--renew-fraction", type=float, default=2 / 3, metavar="F",
                       help="renew each certificate at this fraction of its lifetime")
    serve.add_argument("--ca-overlap", type=_duration, default="10m", metavar="DURATION",
                       help="how long a new CA sits in the caBundle before it signs")
    serve.add_argument("--certificate-check-interval", type=float, default=60.0, metavar="SECONDS",
                       help="how often the certificates are checked for renewal or a new file")
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="gunicorn worker processes (each behaves like a replica)")
    serve.add_argument("--keepalive", type=int, default=75, metavar="SECONDS",
                       help="how long an idle keep-alive connection stays open")
    serve.add_argument("--request-deadline", type=float, metavar="SECONDS",
                       help="a client must send a whole request (TLS handshake, headers, body) "
                            "within this long, or get a 408 (default: half the bundle's "
                            "timeoutSeconds)")
    serve.add_argument("--metrics-port", type=int, default=8080, metavar="N",
                       help="plain-HTTP /metrics port (0: none); the TLS port never serves them")
    serve.add_argument("--min-tls-version", choices=("1.2", "1.3"), default="1.3",
                       help="oldest TLS version accepted (1.2 is offered with AEAD suites only)")
    serve.add_argument("--client-ca-path", type=Path, metavar="FILE",
                       help="verify callers: only clients presenting a certificate from this CA "
                            "(PEM, reloaded when it changes) and naming one of "
                            "--client-subject-names are served; others get the probes only")
    serve.add_argument("--client-subject-names", action="append", default=[], metavar="NAMES",
                       help="with --client-ca-path: comma-separated names (subject common name "
                            "or DNS SAN) a caller's certificate must carry one of (repeatable)")
    serve.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from fivespot.api.bundle import BundleError
    from fivespot.runtime.kube import KubeconfigError
    from fivespot.webhook.certificates import CertificateError, Lifetimes
    from fivespot.webhook.server import ServeOptions, serve
    from fivespot.webhook.serving import ClientCAError

    mode = args.certificate_mode
    cert, key = args.tls_cert, args.tls_key
    if args.cert_dir is not None:
        mode, cert, key = "files", args.cert_dir / "tls.crt", args.cert_dir / "tls.key"
    if mode == "files" and (cert is None or key is None):
        print("webhook serve: files mode needs --tls-cert and --tls-key (or --cert-dir)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    names = tuple(n.strip() for value in args.client_subject_names for n in value.split(",")
                  if n.strip())
    if (args.client_ca_path is None) != (not names):
        print("webhook serve: --client-ca-path and --client-subject-names go together: a CA "
              "verifies callers, the names say which of its certificates may call",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        lifetimes = Lifetimes(ca=args.ca_validity, serving=args.cert_validity,
                              renew_fraction=args.renew_fraction, overlap=args.ca_overlap)
    except ValueError as error:
        print(f"webhook serve: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = ServeOptions(
        bundle_path=args.bundle, port=args.port, bind=args.bind, kubeconfig=args.kubeconfig,
        certificate_mode=mode, tls_cert=cert, tls_key=key, namespace=args.namespace,
        tls_sans=tuple(args.tls_san), lifetimes=lifetimes,
        certificate_check_s=args.certificate_check_interval, workers=args.workers,
        keepalive_s=args.keepalive,
        request_deadline_s=args.request_deadline,
        metrics_port=args.metrics_port, min_tls_version=args.min_tls_version,
        client_ca=args.client_ca_path, client_names=names)
    try:
        return serve(options)
    except (BundleError, CertificateError, ClientCAError, KubeconfigError) as error:
        print(f"webhook serve: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fivespot.webhook")
    register(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    boundary.add_debug_flag(parser)
    args = parser.parse_args(["webhook", *(sys.argv[1:] if argv is None else argv)])
    return boundary.run(f"webhook {args.webhook_command}", lambda: int(args.handler(args)),
                        debug=args.debug)
