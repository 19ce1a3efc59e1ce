"""The webhook server under malformed, oversized, slow, stalled and fast-but-expensive clients,
over TLS on loopback: malformed HTTP is always a 4xx, size limits hold for chunked bodies, and no
set of slow or stalled clients, nor a flood of large bodies that are costly to parse, keeps a
real AdmissionReview from an answer within the API server's timeout.

The server runs as the compiled Deployment runs it (one worker, the bundle's timeoutSeconds of
5 s, cert-manager files mode so the test holds the CA). While the attack runs, probes go two
ways: straight to the webhook over TLS (latency measured per request, p99 reported), and through
the real API server, which calls the webhook by URL for a dry-run create in its namespace.
Everything is bounded in count and time and talks only to 127.0.0.1.
"""

from __future__ import annotations

import base64
import datetime
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from kubernetes import client

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster.kubectl import apply, wait_established
from tests.integration.test_control_plane_is_real import eventually
from tests.integration.test_webhook_admission import EXAMPLE, Server, denial
from tests.integration.test_webhook_server import start_files_server
from fivespot.compiler.emit.workloads import WEBHOOK_RESOURCES
from fivespot.webhook.bodies import CONSUMER_REVIEW_VALUES
from fivespot.webhook.connections import MAX_BODY_BYTES
from fivespot.webhook.tls import issue, new_ca

API_SERVER_TIMEOUT_S: Final = 5.0
"""The compiled webhooks' timeoutSeconds (the example Platform's)."""
SLOWLORIS: Final = 50
STALLED: Final = 50
ATTACK_S: Final = 12.0
OPENS_PER_PASS: Final = 10
HOOK: Final = "under-attack.5spot.finos.org"


def review(uid: str, namespace: str = "agents") -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "operation": "CREATE", "namespace": namespace, "name": "cap",
        "kind": {"group": "5spot.finos.org", "version": "v1alpha1", "kind": "ScheduledCapacity"},
        "resource": {"group": "5spot.finos.org", "version": "v1alpha1",
                     "resource": "scheduledcapacities"},
        "userInfo": {"username": "alice"},
        "object": {"metadata": {"name": "cap", "namespace": namespace},
                   "spec": {"nodeName": f"free-{uid}"}}}}).encode()


@dataclass
class Target:
    server: Server
    trust: ssl.SSLContext
    core: client.CoreV1Api
    namespace: str

    def connect(self, timeout: float = 10.0) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=timeout)
        return self.trust.wrap_socket(raw, server_hostname="127.0.0.1")


@pytest.fixture(scope="module")
def target(kubeconfig: Path, admin: client.ApiClient,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    work = tmp_path_factory.mktemp("under-attack")
    compiled = compile_repo(EXAMPLE / "config")
    write_tree(compiled.files, work / "out")
    apply(kubeconfig, work / "out" / "crds")
    wait_established(kubeconfig, ["scheduledmachines.5spot.finos.org",
                                  "scheduledcapacities.5spot.finos.org"])
    now = datetime.datetime.now(datetime.timezone.utc)
    ca, ca_key = new_ca("attack-ca", now)
    serving = issue(ca, ca_key, "fivespot-webhook", now, ip_addresses=("127.0.0.1",), server=True)
    cert_dir = work / "tls"
    cert_dir.mkdir()
    (cert_dir / "tls.crt").write_bytes(serving.cert_pem)
    (cert_dir / "tls.key").write_bytes(serving.key_pem)
    server = start_files_server(work, kubeconfig, cert_dir)
    port = server.port
    trust = ssl.create_default_context(cadata=ca.cert_pem.decode())
    namespace = f"under-attack-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": namespace, "labels": {"under-attack": "yes"}}})
    registration = client.AdmissionregistrationV1Api(admin)
    registration.create_validating_webhook_configuration({
        "metadata": {"name": HOOK},
        "webhooks": [{
            "name": HOOK, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": int(API_SERVER_TIMEOUT_S),
            "clientConfig": {"url": f"https://127.0.0.1:{port}/validate/host-governance",
                             "caBundle": base64.b64encode(ca.cert_pem).decode()},
            "namespaceSelector": {"matchLabels": {"under-attack": "yes"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}]}]})
    result = Target(server, trust, core, namespace)
    try:
        eventually(lambda: True if _probe(result)[0] == 200 else None, timeout_s=60)
        eventually(lambda: True if _through_api_server(result, "warm-up") is None else None,
                   timeout_s=30)
        yield result
    except BaseException:
        print(server.output())
        raise
    finally:
        registration.delete_validating_webhook_configuration(HOOK)
        server.stop()


def _read_response(tls: ssl.SSLSocket) -> tuple[int, bytes]:
    """The status and raw bytes of one HTTP response (0 when the server closed without one)."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = tls.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            chunk = tls.recv(65536)
            if not chunk:
                break
            rest += chunk
        data = head + b"\r\n\r\n" + rest
    except (OSError, ssl.SSLError):
        pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data


def _probe(target: Target, tls: ssl.SSLSocket | None = None) -> tuple[int, float]:
    """One AdmissionReview over TLS (a new connection unless one is given): status, seconds."""
    started = time.monotonic()
    own = tls is None
    try:
        tls = tls or target.connect()
        body = review(uuid.uuid4().hex)
        tls.sendall(b"POST /validate/host-governance HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body))
        status, data = _read_response(tls)
        if status == 200:
            assert b'"allowed":true' in data, data[-300:]
    except (OSError, ssl.SSLError):
        status = 0
    finally:
        if own and tls is not None:
            tls.close()
    return status, time.monotonic() - started


def _through_api_server(target: Target, name: str) -> str | None:
    """A dry-run create the API server must have the webhook answer; None when allowed. (A
    ConfigMap: no policy but this module's webhook judges it, whatever other modules installed.)"""
    body = {"metadata": {"name": name, "namespace": target.namespace}, "data": {"k": "v"}}
    return denial(lambda: target.core.create_namespaced_config_map(target.namespace, body,
                                                                   dry_run="All"))


def _exchange(target: Target, raw: bytes) -> int:
    tls = target.connect()
    try:
        tls.sendall(raw)
        return _read_response(tls)[0]
    finally:
        tls.close()


# --- malformed and oversized ---------------------------------------------------------------------

HEAD: Final = (b"POST /validate/host-governance HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\n")
CHUNKED: Final = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("raw", [
    pytest.param(CHUNKED + b"zz\r\n{}\r\n0\r\n\r\n", id="bad-chunk-size"),
    pytest.param(CHUNKED + b"2\r\n{}0\r\n\r\n", id="chunk-without-crlf"),
    pytest.param(CHUNKED + b"2\r\n{}\r\n0\r\nbad trailer\r\n\r\n", id="bad-trailer"),
    pytest.param(CHUNKED + b"fffffffffffffffffff\r\n{}\r\n0\r\n\r\n", id="chunk-size-overflow"),
    pytest.param(CHUNKED + b"-2\r\n{}\r\n0\r\n\r\n", id="negative-chunk-size"),
    pytest.param(CHUNKED + b"2;\x00=\x01\r\n{}\r\n0\r\n\r\n", id="bad-chunk-extension"),
    pytest.param(HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                 id="length-and-chunked"),
    pytest.param(HEAD + b"Transfer-Encoding: gzip\r\n\r\n{}", id="unknown-coding"),
    pytest.param(HEAD + b"Content-Length: -5\r\n\r\n{}", id="negative-length"),
    pytest.param(HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", id="two-lengths"),
    pytest.param(b"POST /validate/host-governance HTTP/1.1\r\nHost x\r\n\r\n", id="bad-header-line"),
    pytest.param(b"\x16\x03\x01garbage\r\n\r\n", id="not-http"),
])
def test_malformed_http_is_always_a_4xx_never_a_500(target: Target, raw: bytes) -> None:
    status = _exchange(target, raw)
    assert 400 <= status < 500, status
    assert "Traceback" not in target.server.log.read_text(errors="replace")


def test_a_chunked_body_over_the_limit_gets_413(target: Target) -> None:
    tls = target.connect()
    try:
        tls.sendall(CHUNKED)
        chunk = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
        status = 0
        for _ in range(9):  # 9 MiB > the 7 MiB limit
            try:
                tls.sendall(chunk)
            except (OSError, ssl.SSLError):
                break  # answered and closed: read what it said
        status = _read_response(tls)[0]
    finally:
        tls.close()
    assert status == 413


def test_a_declared_length_over_the_limit_gets_413_without_the_body(target: Target) -> None:
    assert _exchange(target, HEAD + b"Content-Length: 104857600\r\n\r\n{") == 413


def test_a_chunked_review_within_the_limit_is_decided(target: Target) -> None:
    body = review("chunked")
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part)
                      for part in (body[:100], body[100:]) if part) + b"0\r\n\r\n"
    assert _exchange(target, CHUNKED + chunks) == 200


# --- slow and stalled clients --------------------------------------------------------------------


@dataclass
class Client:
    sock: socket.socket
    opened: float
    drip: bytes = b""
    """What it still has to send, one byte a second (empty: it sends nothing)."""
    next_drip: float = 0.0


@dataclass
class Attack:
    """SLOWLORIS clients that drip a request one byte a second (half from its first byte, half
    after sending whole headers, so both the header and the body phase are slow) and STALLED
    clients that send nothing (half after the TLS handshake, half before it: a bare TCP
    connection). Each is replaced by a new one as soon as the server cuts it."""

    target: Target
    stop: threading.Event = field(default_factory=threading.Event)
    cut_after: list[float] = field(default_factory=list)
    failed_connects: int = 0
    connections: int = 0

    def run(self) -> None:
        body = b"{" * 2000
        headers = HEAD + b"Content-Length: %d\r\n\r\n" % len(body)
        clients: list[Client] = []
        # Every client is looked at ten times a second (a cut is timed to within a pass, not to
        # within a second), before replacements are opened, and at most OPENS_PER_PASS of those
        # per pass: TLS handshakes are slow on a loaded machine, and a long pass would be timed
        # as a late cut of every client it kept waiting.
        while not self.stop.is_set():
            for client_ in list(clients):
                now = time.monotonic()
                if self._cut(client_, now):
                    self.cut_after.append(now - client_.opened)
                    client_.sock.close()
                    clients.remove(client_)
            kinds = [c.drip != b"" for c in clients]
            opens = 0
            for index in range(SLOWLORIS - sum(kinds)):
                if opens == OPENS_PER_PASS:
                    break
                opens += 1
                self._open(clients, headers + body if index % 2 else body, headers if not index % 2
                           else b"", tls=True)
            for index in range(STALLED - (len(kinds) - sum(kinds))):
                if opens == OPENS_PER_PASS:
                    break
                opens += 1
                self._open(clients, b"", b"", tls=index % 2 == 0)
            self.stop.wait(0.1)
        for client_ in clients:
            client_.sock.close()

    def _open(self, clients: list[Client], drip: bytes, first: bytes, tls: bool) -> None:
        self.connections += 1
        opened = time.monotonic()
        try:
            sock: socket.socket = self.target.connect(timeout=10) if tls else \
                socket.create_connection(("127.0.0.1", self.target.server.port), timeout=10)
            if first:
                sock.sendall(first)
        except (OSError, ssl.SSLError):
            self.failed_connects += 1
            return
        sock.setblocking(False)
        clients.append(Client(sock, opened, drip))

    @staticmethod
    def _cut(client_: Client, now: float) -> bool:
        """Send the next byte, if any is due; True once the server has answered or closed."""
        try:
            client_.sock.recv(65536)
            return True  # a 408, or the close itself
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except (OSError, ssl.SSLError):
            return True
        if client_.drip and now >= client_.next_drip:
            client_.next_drip = now + 1.0
            try:
                client_.sock.send(client_.drip[:1])
                client_.drip = client_.drip[1:] or b" "
            except (ssl.SSLWantWriteError, BlockingIOError):
                pass
            except (OSError, ssl.SSLError):
                return True
        return False


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def test_slow_and_stalled_clients_never_keep_a_review_from_an_answer_in_time(
        target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    attack = Attack(target)
    attacker = threading.Thread(target=attack.run, daemon=True)
    attacker.start()
    probes: list[tuple[int, float]] = []
    through: list[tuple[str | None, float]] = []
    kept: ssl.SSLSocket | None = None
    try:
        # Every attacker connected and dripping (a few passes: OPENS_PER_PASS at a time).
        eventually(lambda: True if attack.connections >= SLOWLORIS + STALLED else None, timeout_s=30)
        time.sleep(1.0)
        # Opened only now and used at once: a connection that sends nothing for the server's
        # request deadline is cut like any stalled client (a 408), kept-alive or not.
        kept = target.connect()
        deadline = time.monotonic() + ATTACK_S
        sent = 0
        while time.monotonic() < deadline:
            sent += 1
            probes.append(_probe(target))  # a new connection: accept and handshake under attack
            probes.append(_probe(target, kept))  # a kept-alive one, as the API server keeps them
            if sent % 5 == 0:
                started = time.monotonic()
                through.append((_through_api_server(target, f"probe-{sent}"),
                                time.monotonic() - started))
            time.sleep(0.05)
    finally:
        if kept is not None:
            kept.close()
        attack.stop.set()
        attacker.join(15)
    latencies = [seconds for _, seconds in probes]
    report = (f"webhook under attack: {len(probes)} probes while {SLOWLORIS} slowloris + {STALLED} "
              f"stalled clients were held ({attack.connections} attacker connections, "
              f"{attack.failed_connects} refused): p50 "
              f"{sorted(latencies)[len(latencies) // 2] * 1000:.1f} ms, p99 "
              f"{_p99(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms; "
              f"{len(through)} through the API server, max "
              f"{max((s for _, s in through), default=0) * 1000:.0f} ms; attackers cut after at most "
              f"{max(attack.cut_after, default=0):.1f} s")
    with capsys.disabled():
        print("\n" + report)
    assert all(status == 200 for status, _ in probes), [s for s, _ in probes if s != 200][:10]
    assert max(latencies) < API_SERVER_TIMEOUT_S, report
    assert all(message is None for message, _ in through), [m for m, _ in through if m][:3]
    assert max(s for _, s in through) < API_SERVER_TIMEOUT_S, report
    assert attack.failed_connects == 0, report
    assert len(attack.cut_after) >= SLOWLORIS + STALLED, report  # each cut at least once
    assert max(attack.cut_after) < API_SERVER_TIMEOUT_S, report
    log = target.server.log.read_text(errors="replace")
    assert "Traceback" not in log
    assert "did not send a whole request within" in log
    assert sent >= 20, "the probes kept coming through the attack (two per round)"


# --- fast clients with expensive bodies ----------------------------------------------------------

FLOODERS: Final = 24
FLOOD_S: Final = 15.0


def nested_lists(size: int) -> bytes:
    """`[[[[]]],[[[]]],...]` of exactly `size` bytes: the costliest JSON to parse per byte that
    was found (3 lists per 7 bytes, each tracked by the cyclic collector)."""
    unit = b"[[[]]],"
    count = (size - 1) // len(unit)
    body = b"[" + unit * count
    return body[:-1] + b" " * (size - len(body)) + b"]"


def floats(count: int) -> bytes:
    """`[0.5,0.5,...]`: the costliest values per value that was found (a float is parsed by
    strtod), as many as the target guard takes."""
    return b"[" + b",".join([b"0.5"] * count) + b"]"


@dataclass
class Flood:
    """FLOODERS clients, each sending as fast as it can, over a new connection each time, one of
    `bodies` to the target guard (the check with the largest limits)."""

    target: Target
    bodies: list[bytes]
    stop: threading.Event = field(default_factory=threading.Event)
    statuses: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, index: int) -> None:
        body = self.bodies[index % len(self.bodies)]
        head = (b"POST /validate/target-guard HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        while not self.stop.is_set():
            try:
                tls = self.target.connect(timeout=30)
            except (OSError, ssl.SSLError):
                continue
            try:
                tls.sendall(head)
                tls.sendall(body)
                status = _read_response(tls)[0]
            except (OSError, ssl.SSLError):
                status = _read_response(tls)[0]  # answered early (a 503) and closed
            finally:
                tls.close()
            with self.lock:
                self.statuses[status] = self.statuses.get(status, 0) + 1


def _worker_peak_rss_mib(server: Server) -> float:
    """The peak resident memory of the server's worker (the master's child), from /proc."""
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    peaks = []
    for pid in children.read_text().split():
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]) / 1024)
    return max(peaks, default=0.0)


FLOOD_BODIES: Final = {
    "7 MiB of [[[[]]],...]": lambda: nested_lists(MAX_BODY_BYTES - 1),
    f"{CONSUMER_REVIEW_VALUES // 1000}k floats": lambda: floats(CONSUMER_REVIEW_VALUES - 10),
}


@pytest.mark.parametrize("what", list(FLOOD_BODIES))
def test_a_flood_of_large_expensive_bodies_never_keeps_a_review_from_an_answer_in_time(
        target: Target, what: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Parsing is the one costly step on the loop: FLOODERS clients sending 7 MiB of
    `[[[[]]],...]` as fast as they can once left reviews from the API server waiting behind a
    queue of seconds-long parses, and the worker past the pod's memory limit. Bodies with more
    values than any review now get a 413 before they are parsed (the first case); large ones
    within the limits (the costliest: a million floats, the second) hold one of a few slots (503
    without one) and are parsed one at a time, so a small review waits behind at most one parse
    per step."""
    flood = Flood(target, [FLOOD_BODIES[what]()])
    flooders = [threading.Thread(target=flood.run, args=(i,), daemon=True)
                for i in range(FLOODERS)]
    for flooder in flooders:
        flooder.start()
    through: list[tuple[str | None, float]] = []
    try:
        eventually(lambda: True if sum(flood.statuses.values()) >= FLOODERS else None,
                   timeout_s=60)
        deadline = time.monotonic() + FLOOD_S
        while time.monotonic() < deadline:
            started = time.monotonic()
            through.append((_through_api_server(target, f"flooded-{len(through)}"),
                            time.monotonic() - started))
            time.sleep(0.1)
    finally:
        flood.stop.set()
        for flooder in flooders:
            flooder.join(60)
    latencies = sorted(seconds for _, seconds in through)
    peak = _worker_peak_rss_mib(target.server)
    limit = float(WEBHOOK_RESOURCES["limits"]["memory"].removesuffix("Mi"))
    report = (f"webhook under a flood of large bodies: {len(through)} reviews through the API "
              f"server while {FLOODERS} clients sent {what} "
              f"({dict(sorted(flood.statuses.items()))} by status): p50 "
              f"{latencies[len(latencies) // 2] * 1000:.0f} ms, p99 "
              f"{_p99(latencies) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms; worker peak "
              f"RSS {peak:.0f} MiB (the pod's limit: {limit:.0f} MiB)")
    with capsys.disabled():
        print("\n" + report)
    assert all(message is None for message, _ in through), [m for m, _ in through if m][:3]
    assert _p99(latencies) < API_SERVER_TIMEOUT_S, report
    assert peak < limit, report
    assert len(through) >= 10, report
    assert sum(flood.statuses.values()) >= 2 * FLOODERS, "the flood kept coming"
    assert "Traceback" not in target.server.log.read_text(errors="replace")
