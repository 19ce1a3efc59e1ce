"""What the webhook's TLS contexts offer and whom they admit, by real handshakes on loopback:
TLS 1.3 only by default, TLS 1.2 (when allowed) with AEAD suites only and no renegotiation, and
client certificates verified against the client CA and judged by name."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fivespot.webhook.serving import (
    ClientAuthentication,
    ClientCAError,
    ServingCertificate,
    TLSPolicy,
    client_refusal,
    names_of,
    server_context,
)
from fivespot.webhook.tls import KeyPair, issue, new_ca

NOW = datetime.datetime.now(datetime.timezone.utc)
CA, CA_KEY = new_ca("serving-ca", NOW)
SERVING = issue(CA, CA_KEY, "fivespot-webhook", NOW, ip_addresses=("127.0.0.1",), server=True)
CLIENT_CA, CLIENT_CA_KEY = new_ca("apiserver-client-ca", NOW)
OTHER_CA, OTHER_CA_KEY = new_ca("someone-else", NOW)
API_SERVER = "kube-apiserver-webhook-client"


def client_pair(name: str, ca: KeyPair = CLIENT_CA, key: object = CLIENT_CA_KEY,
                dns: tuple[str, ...] = ()) -> KeyPair:
    return issue(ca, key, name, NOW, dns_names=dns, client=True)  # type: ignore[arg-type]


@dataclass
class Handshake:
    version: str | None
    cipher: str | None
    peer: dict[str, object] | None
    error: str | None


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> Handshake:
    """One handshake over loopback; what the server side saw."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[Handshake] = []

    def serve() -> None:
        raw, _ = listener.accept()
        try:
            with server.wrap_socket(raw, server_side=True) as tls:
                seen.append(Handshake(tls.version(), (tls.cipher() or ("",))[0],
                                      tls.getpeercert(), None))  # type: ignore[arg-type]
                tls.recv(1)
        except (ssl.SSLError, OSError) as error:
            seen.append(Handshake(None, None, None, str(error)))

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with socket.create_connection(listener.getsockname(), timeout=5) as raw, \
                client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"x")
    except (ssl.SSLError, OSError):
        pass
    thread.join(5)
    listener.close()
    return seen[0]


def client_context(*, maximum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
                   ciphers: str | None = None, pair: KeyPair | None = None,
                   tmp: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=CA.cert_pem.decode())
    context.maximum_version = maximum
    if ciphers:
        context.set_ciphers(ciphers)
    if pair is not None:
        assert tmp is not None
        path = tmp / "client.pem"
        path.write_bytes(pair.cert_pem + pair.key_pem)
        context.load_cert_chain(path)
    return context


@pytest.fixture
def client_ca_file(tmp_path: Path) -> Path:
    path = tmp_path / "client-ca.crt"
    path.write_bytes(CLIENT_CA.cert_pem)
    return path


def test_by_default_only_tls_1_3_is_accepted() -> None:
    context = server_context(SERVING.cert_pem, SERVING.key_pem)
    assert handshake(context, client_context()).version == "TLSv1.3"
    refused = handshake(context, client_context(maximum=ssl.TLSVersion.TLSv1_2))
    assert refused.version is None and refused.error


def test_tls_1_2_when_allowed_offers_only_forward_secret_aead_suites() -> None:
    context = server_context(SERVING.cert_pem, SERVING.key_pem, policy=TLSPolicy("1.2"))
    tls12 = [c for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(c["aead"] and c["kea"] == "kx-ecdhe" for c in tls12), tls12
    assert {c["symmetric"] for c in tls12} <= {"aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"}
    accepted = handshake(context, client_context(maximum=ssl.TLSVersion.TLSv1_2))
    assert accepted.version == "TLSv1.2" and accepted.cipher in {c["name"] for c in tls12}
    for weak in ("ECDHE-ECDSA-AES128-SHA256", "ECDHE-ECDSA-AES256-SHA", "AES128-SHA256"):
        refused = handshake(context, client_context(maximum=ssl.TLSVersion.TLSv1_2, ciphers=weak))
        assert refused.version is None, weak
    assert handshake(context, client_context()).version == "TLSv1.3"


@pytest.mark.parametrize("minimum", ["1.2", "1.3"])
def test_renegotiation_and_compression_are_off(minimum: str) -> None:
    options = server_context(SERVING.cert_pem, SERVING.key_pem, policy=TLSPolicy(minimum)).options  # type: ignore[arg-type]
    assert options & ssl.OP_NO_RENEGOTIATION and options & ssl.OP_NO_COMPRESSION


def policy(ca_file: Path, *names: str) -> TLSPolicy:
    return TLSPolicy(clients=ClientAuthentication(ca_file, frozenset(names or (API_SERVER,))))


def test_a_client_certificate_from_the_client_ca_naming_an_allowed_caller_is_admitted(
        client_ca_file: Path, tmp_path: Path) -> None:
    serving = ServingCertificate(tmp_path, policy(client_ca_file))
    serving.load(SERVING.cert_pem, SERVING.key_pem)
    seen = handshake(serving.listening_context(),
                     client_context(pair=client_pair(API_SERVER), tmp=tmp_path))
    assert seen.version == "TLSv1.3"
    assert client_refusal(seen.peer, frozenset({API_SERVER})) is None


def test_a_client_certificate_from_another_ca_fails_the_handshake(
        client_ca_file: Path, tmp_path: Path) -> None:
    serving = ServingCertificate(tmp_path, policy(client_ca_file))
    serving.load(SERVING.cert_pem, SERVING.key_pem)
    stranger = client_pair(API_SERVER, OTHER_CA, OTHER_CA_KEY)
    seen = handshake(serving.listening_context(), client_context(pair=stranger, tmp=tmp_path))
    assert seen.version is None and seen.error is not None


def test_no_certificate_or_one_naming_someone_else_is_refused_by_name(
        client_ca_file: Path, tmp_path: Path) -> None:
    serving = ServingCertificate(tmp_path, policy(client_ca_file))
    serving.load(SERVING.cert_pem, SERVING.key_pem)
    bare = handshake(serving.listening_context(), client_context())
    assert bare.version == "TLSv1.3"  # the kubelet's probes present no certificate
    assert client_refusal(bare.peer, frozenset({API_SERVER})) == \
        "no client certificate was presented"
    other = handshake(serving.listening_context(),
                      client_context(pair=client_pair("system:admin"), tmp=tmp_path))
    assert client_refusal(other.peer, frozenset({API_SERVER})) == (
        f"the client certificate names system:admin, none of the allowed {API_SERVER}")


def test_a_dns_san_counts_as_a_name() -> None:
    peer = {"subject": ((("commonName", "x"),),), "subjectAltName": (("DNS", "api.example.com"),
                                                                    ("IP Address", "10.0.0.1"))}
    assert names_of(peer) == {"x", "api.example.com"}
    assert client_refusal(peer, frozenset({"api.example.com"})) is None
    assert client_refusal(peer, frozenset({"10.0.0.1"})) is not None


def test_a_changed_client_ca_file_is_used_by_new_handshakes(
        client_ca_file: Path, tmp_path: Path) -> None:
    serving = ServingCertificate(tmp_path, policy(client_ca_file))
    serving.load(SERVING.cert_pem, SERVING.key_pem)
    assert serving.refresh_client_ca() is False
    client_ca_file.write_bytes(OTHER_CA.cert_pem)
    assert serving.refresh_client_ca() is True
    listening = serving.listening_context()
    moved = handshake(listening, client_context(pair=client_pair(API_SERVER, OTHER_CA,
                                                                 OTHER_CA_KEY), tmp=tmp_path))
    assert moved.version == "TLSv1.3" and moved.peer
    old = handshake(listening, client_context(pair=client_pair(API_SERVER), tmp=tmp_path))
    assert old.version is None


def test_an_unusable_client_ca_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent.crt"
    with pytest.raises(ClientCAError, match="absent.crt cannot be read"):
        server_context(SERVING.cert_pem, SERVING.key_pem, policy=policy(missing))
    empty = tmp_path / "empty.crt"
    empty.write_text("not a certificate\n")
    with pytest.raises(ClientCAError, match="holds no PEM certificate"):
        server_context(SERVING.cert_pem, SERVING.key_pem, policy=policy(empty))


@pytest.fixture(autouse=True)
def _no_leftover_threads() -> Iterator[None]:
    before = threading.active_count()
    yield
    assert threading.active_count() <= before
