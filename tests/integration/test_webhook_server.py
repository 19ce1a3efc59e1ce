"""The gunicorn/TLS server itself: cert-manager mode reloads renewed files without dropping a
connection, and slow, oversized or malformed requests get a 4xx or a closed socket, never a hang.

The server runs as the compiled cert-manager Deployment runs it (`--cert-dir` with the Secret's
files, swapped the way the kubelet swaps a Secret volume: a new timestamped folder, then one
atomic rename of the `..data` symlink). It talks to the real API server only for its caches.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import http.client
import json
import os
import secrets
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster.kubectl import apply, wait_established
from tests.integration.test_control_plane_is_real import eventually
from tests.integration.test_webhook_admission import EXAMPLE, ROOT, Server, free_port
from fivespot.webhook.tls import KeyPair, issue, new_ca

REVIEW = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
    "uid": "u-1", "operation": "CREATE", "namespace": "agents", "name": "cap",
    "resource": {"group": "5spot.finos.org", "version": "v1alpha1",
                 "resource": "scheduledcapacities"},
    "userInfo": {"username": "alice"},
    "object": {"metadata": {"name": "cap", "namespace": "agents"}, "spec": {}}}}


def _pair(common_name: str) -> tuple[KeyPair, KeyPair]:
    now = datetime.datetime.now(datetime.timezone.utc)
    ca, ca_key = new_ca(common_name, now)
    return ca, issue(ca, ca_key, "fivespot-webhook", now, ip_addresses=("127.0.0.1",), server=True)


def _publish(cert_dir: Path, serving: KeyPair, stamp: str) -> None:
    """Write a Secret volume version and switch to it atomically, as the kubelet does."""
    version = cert_dir / f"..{stamp}"
    version.mkdir()
    (version / "tls.crt").write_bytes(serving.cert_pem)
    (version / "tls.key").write_bytes(serving.key_pem)
    link = cert_dir / "..data_tmp"
    link.symlink_to(version.name)
    os.replace(link, cert_dir / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (cert_dir / name).is_symlink():
            (cert_dir / name).symlink_to(f"..data/{name}")


def start_files_server(work: Path, kubeconfig: Path, cert_dir: Path, *flags: str,
                       port: int | None = None) -> Server:
    """`webhook serve` as the compiled cert-manager Deployment runs it (WORK/out/bundle.json, the
    pair in CERT_DIR), on loopback (`port`, else a free one; a free metrics port), logging to
    WORK/server.log."""
    port, metrics_port = port or free_port(), free_port()
    log = work / "server.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "fivespot.webhook", "serve", "--bundle", str(work / "out" / "bundle.json"),
             "--port", str(port), "--bind", "127.0.0.1", "--metrics-port", str(metrics_port),
             "--kubeconfig", str(kubeconfig), "--cert-dir", str(cert_dir), *flags],
            cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    return Server(process, port, log, metrics_port)


@pytest.fixture(scope="module")
def files_server(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[Server, Path, ssl.SSLContext, KeyPair]]:
    work = tmp_path_factory.mktemp("webhook-files")
    compiled = compile_repo(EXAMPLE / "config")
    write_tree(compiled.files, work / "out")
    apply(kubeconfig, work / "out" / "crds")  # the ScheduledMachine CRD its cache watches
    wait_established(kubeconfig, ["scheduledmachines.5spot.finos.org"])
    first_ca, first = _pair("first-ca")
    second_ca, second = _pair("second-ca")
    cert_dir = work / "tls"
    cert_dir.mkdir()
    _publish(cert_dir, first, "1")
    trust = ssl.create_default_context(cadata=(first_ca.cert_pem + second_ca.cert_pem).decode())
    server = start_files_server(work, kubeconfig, cert_dir, "--request-deadline", "2",
                                "--certificate-check-interval", "0.5")
    try:
        eventually(lambda: True if _get(server.port, trust, "/readyz")[0] == 200 else None,
                   timeout_s=60)
        yield server, cert_dir, trust, second
    except BaseException:
        print(server.output())
        raise
    finally:
        server.stop()


def _connection(port: int, trust: ssl.SSLContext) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection("127.0.0.1", port, context=trust, timeout=10)


def _get(port: int, trust: ssl.SSLContext, path: str) -> tuple[int, bytes]:
    try:
        connection = _connection(port, trust)
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    except OSError:
        return 0, b""


def _post(connection: http.client.HTTPSConnection, body: bytes) -> tuple[int, Any]:
    connection.request("POST", "/validate/host-governance", body=body,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read() or b"null")


def _served_certificate(port: int, trust: ssl.SSLContext) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            trust.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return tls.getpeercert(binary_form=True) or b""


def test_renewed_files_are_served_to_new_connections_while_open_ones_keep_working(
        files_server: tuple[Server, Path, ssl.SSLContext, KeyPair]) -> None:
    server, cert_dir, trust, second = files_server
    kept = _connection(server.port, trust)
    assert _post(kept, json.dumps(REVIEW).encode())[0] == 200
    second_der = x509.load_pem_x509_certificate(second.cert_pem).public_bytes(Encoding.DER)
    _publish(cert_dir, second, "2")
    eventually(lambda: True if _served_certificate(server.port, trust) == second_der else None,
               timeout_s=60)
    status, body = _post(kept, json.dumps(REVIEW).encode())  # same socket, old handshake
    assert status == 200 and body["response"]["uid"] == "u-1"
    # The reload is counted just after the new pair is in use: it can be served first.
    def reloaded() -> str | None:
        text = server.metrics()
        return text if "fivespot_webhook_certificate_reloads_total 2.0" in text else None

    metrics = eventually(reloaded)
    assert 'fivespot_webhook_certificate_expiry_timestamp_seconds{certificate="serving"}' in metrics


def test_clients_that_stall_mid_request_are_cut_off_and_do_not_starve_others(
        files_server: tuple[Server, Path, ssl.SSLContext, KeyPair]) -> None:
    server, _, trust, _ = files_server
    stalled = []
    for _ in range(10):  # more than the worker's 8 threads
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        tls = trust.wrap_socket(raw, server_hostname="127.0.0.1")
        tls.sendall(b"POST /validate/host-governance HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"api")
        stalled.append(tls)
    started = time.monotonic()
    status, _ = _post(_connection(server.port, trust), json.dumps(REVIEW).encode())
    assert status == 200 and time.monotonic() - started < 10
    for tls in stalled:
        try:
            answer = tls.recv(4096)  # a 400 (body cut short), 408, or the close
        except OSError:
            answer = b""
        assert answer == b"" or answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 408")), answer[:80]
        tls.close()
    assert time.monotonic() - started < 12


def test_an_oversized_body_gets_413_without_being_read(
        files_server: tuple[Server, Path, ssl.SSLContext, KeyPair]) -> None:
    server, _, trust, _ = files_server
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    with trust.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /validate/target-guard HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{")
        assert tls.recv(4096).startswith(b"HTTP/1.1 413")


def test_malformed_and_wrong_version_bodies_get_400_over_tls(
        files_server: tuple[Server, Path, ssl.SSLContext, KeyPair]) -> None:
    server, _, trust, _ = files_server
    connection = _connection(server.port, trust)
    assert _post(connection, b"{\"apiVersion\": ")[0] == 400
    wrong = {**REVIEW, "apiVersion": "admission.k8s.io/v1beta1"}
    status, body = _post(connection, json.dumps(wrong).encode())
    assert status == 400 and "admissionReviewVersions: [v1]" in body["error"]
    missing = {**REVIEW, "request": {"uid": "u-9"}}
    status, body = _post(connection, json.dumps(missing).encode())
    assert status == 200 and body["response"]["status"]["code"] == 400


# --- metrics -------------------------------------------------------------------------------------


def test_the_metrics_are_served_on_the_metrics_port_and_never_on_the_serving_port(
        files_server: tuple[Server, Path, ssl.SSLContext, KeyPair]) -> None:
    server, _, trust, _ = files_server
    assert _get(server.port, trust, "/metrics")[0] == 404
    assert "fivespot_webhook_certificate_expiry_timestamp_seconds" in server.metrics()


def _series(server: Server) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in server.metrics().splitlines() if line and not line.startswith("#")}


HEADER_ONLY_REQUESTS: Final = 10_000


def _header_only(port: int, trust: ssl.SSLContext, paths: list[str]) -> list[int]:
    """POST each path with a huge declared length and no body, a connection each; the statuses."""
    statuses, session = [], None
    for path in paths:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                trust.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as tls:
            session = tls.session
            tls.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: 999999999\r\n\r\n".encode())
            statuses.append(int(tls.recv(64).split(b" ", 2)[1] or 0))
    return statuses


def test_ten_thousand_header_only_requests_to_random_paths_add_no_metric_series(
        files_server: tuple[Server, Path, ssl.SSLContext, KeyPair],
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each is answered 413 before any body is read; the rejection is counted under the check
    it names, or "unknown", never under its path (security review F5: a label per path was a
    new time series per request, and the pod's memory with them)."""
    server, _, trust, _ = files_server
    _header_only(server.port, trust, ["/validate/warm-up", "/validate/target-guard"])
    before = _series(server)
    started = time.monotonic()
    paths = [f"/validate/{secrets.token_urlsafe(12)}" for _ in range(HEADER_ONLY_REQUESTS - 1)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        statuses = [s for part in pool.map(lambda i: _header_only(server.port, trust, paths[i::4]),
                                           range(4)) for s in part]
    statuses += _header_only(server.port, trust, ["/validate/target-guard"])
    after = _series(server)
    with capsys.disabled():
        print(f"\n{HEADER_ONLY_REQUESTS} header-only requests in "
              f"{time.monotonic() - started:.1f}s; metric series {len(before)} -> {len(after)}")
    assert statuses == [413] * HEADER_ONLY_REQUESTS
    assert after.keys() == before.keys()
    rejected = 'fivespot_webhook_rejected_bodies_total{check="%s",status="413"}'
    assert after[rejected % "unknown"] - before[rejected % "unknown"] == HEADER_ONLY_REQUESTS - 1
    assert after[rejected % "target-guard"] - before[rejected % "target-guard"] == 1
