"""The TLS context every new connection is served with, switched when the certificate changes.

The server listens with one context (`ServingCertificate.listening_context`) whose SNI callback
runs on every ClientHello, whether the client sent a server name or not (the API server calling
by IP sends none), and moves the handshake onto the current context. A new certificate (rotated
Secret, or cert-manager's renewed files) becomes a freshly built context that replaces the
current one in a single reference assignment: new handshakes get the new certificate at once,
connections already established finish on the old one, no request is refused and nothing
restarts. Building a new context instead of calling `load_cert_chain` on the live one keeps a
half-loaded context (new certificate, old key) from ever being visible to a handshake.

How long a client may take over its handshake is the connection layer's business
(`fivespot.webhook.connections`: the whole-request deadline counts from accept).

What every context offers (`TLSPolicy`; docs/design/decisions/0023-webhook-authentication-and-limits.md):
TLS 1.3 only by default — every supported API server (1.34+) speaks it — or TLS 1.2 as well
when a platform asks (`Platform.spec.webhook.minTLSVersion`), then with AEAD suites only
(`TLS12_CIPHERS`: ECDHE with AES-GCM or ChaCha20-Poly1305) and no renegotiation, which
would let a client make the server redo handshakes at will; ALPN `http/1.1` only.

Client authentication (`ClientAuthentication`, off by default: managed control planes cannot
present a certificate). The context asks every client for a certificate and verifies one that
is sent against the client CA file, so a certificate from any other CA fails the handshake. A
connection without one is let through the handshake only because the kubelet's probes present
none: the connection layer then refuses it everything but the probes, and `client_refusal`
refuses a verified certificate that names nobody allowed (its subject's common name and DNS
SANs are compared with the allowed names), so neither reaches a review. The CA file is read
again when it changes (a mounted ConfigMap or Secret the kubelet updates).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from cryptography import x509

from fivespot.runtime.tlskeys import load_key_pair

TLS12_CIPHERS: Final = "ECDHE+AESGCM:ECDHE+CHACHA20"
"""The TLS 1.2 suites offered when 1.2 is allowed: forward-secret and AEAD only (no CBC, no
plain RSA or DHE key exchange). TLS 1.3's suites are all AEAD and are not affected by this."""
MinimumVersion = Literal["1.2", "1.3"]
_VERSIONS: Final = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class ClientAuthentication:
    """Who may call: a certificate signed by a CA in `ca_file` naming one of `names`."""

    ca_file: Path
    names: frozenset[str]


@dataclass(frozen=True)
class TLSPolicy:
    minimum_version: MinimumVersion = "1.3"
    clients: ClientAuthentication | None = None


class ClientCAError(ValueError):
    """The client CA file cannot be read or holds no certificate."""


def _client_ca(path: Path) -> str:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ClientCAError(f"the client CA file {path} cannot be read: {error}") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise ClientCAError(f"the client CA file {path} holds no PEM certificate")
    return text


def server_context(cert_pem: bytes, key_pem: bytes, scratch: Path | None = None,
                   policy: TLSPolicy = TLSPolicy()) -> ssl.SSLContext:
    """A server context for this pair as `policy` says; raises ssl.SSLError if they do not
    match, ClientCAError if the client CA cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[policy.minimum_version]
    context.maximum_version = ssl.TLSVersion.TLSv1_3
    context.set_ciphers(TLS12_CIPHERS)
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(["http/1.1"])
    if policy.clients is not None:
        try:
            context.load_verify_locations(cadata=_client_ca(policy.clients.ca_file))
        except ssl.SSLError as error:
            raise ClientCAError(f"the client CA file {policy.clients.ca_file} is not a usable "
                                f"CA: {error}") from None
        context.verify_mode = ssl.CERT_OPTIONAL
    load_key_pair(context, cert_pem, key_pem, scratch)
    return context


def names_of(peer: Mapping[str, Any]) -> set[str]:
    """The common names and DNS SANs of a certificate as `SSLSocket.getpeercert()` gives it."""
    found = {value for rdn in peer.get("subject", ()) for key, value in rdn if key == "commonName"}
    found.update(value for kind, value in peer.get("subjectAltName", ()) if kind == "DNS")
    return found


def client_refusal(peer: Mapping[str, Any] | None, allowed: frozenset[str]) -> str | None:
    """Why a caller presenting `peer` (a verified certificate, or None for none) may not be
    served; None when it may."""
    if not peer:
        return "no client certificate was presented"
    names = names_of(peer)
    if names & allowed:
        return None
    return (f"the client certificate names {', '.join(sorted(names)) or 'nobody'}, none of the "
            f"allowed {', '.join(sorted(allowed))}")


class ServingCertificate:
    """The current serving context and what it holds."""

    def __init__(self, scratch: Path | None = None, policy: TLSPolicy = TLSPolicy()) -> None:
        self.scratch = scratch
        self.policy = policy
        self._pair: tuple[bytes, bytes] | None = None
        self._client_ca_seen: tuple[object, ...] | None = None
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._listening: ssl.SSLContext | None = None
        self._fingerprint: str | None = None
        self.not_after: datetime.datetime | None = None
        self.reloads = 0

    def load(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """Serve this pair from the next connection on; False when it is what is served already.
        Raises ValueError (or ssl.SSLError) when the pair is unusable, keeping the old one."""
        fingerprint = hashlib.sha256(cert_pem + b"\0" + key_pem).hexdigest()
        if fingerprint == self._fingerprint:
            return False
        cert = x509.load_pem_x509_certificate(cert_pem)
        seen = self._client_ca_identity()
        context = server_context(cert_pem, key_pem, self.scratch, self.policy)
        with self._lock:
            self._context, self._fingerprint = context, fingerprint
            self._pair, self._client_ca_seen = (cert_pem, key_pem), seen
            self.not_after = cert.not_valid_after_utc
            self.reloads += 1
        return True

    def _client_ca_identity(self) -> tuple[object, ...] | None:
        if self.policy.clients is None:
            return None
        path = self.policy.clients.ca_file
        try:
            stat = path.stat()
        except OSError as error:
            raise ClientCAError(f"the client CA file {path} cannot be read: {error}") from None
        return os.path.realpath(path), stat.st_ino, stat.st_mtime_ns, stat.st_size

    def refresh_client_ca(self) -> bool:
        """Rebuild the context if the client CA file changed; True when it did. Raises
        ClientCAError (keeping the current context) when the new file is unusable."""
        if self.policy.clients is None or self._pair is None:
            return False
        seen = self._client_ca_identity()
        if seen == self._client_ca_seen:
            return False
        context = server_context(*self._pair, self.scratch, self.policy)
        with self._lock:
            self._context, self._client_ca_seen = context, seen
        return True

    def admit(self, ssl_object: ssl.SSLObject | None) -> str | None:
        """The connection layer's client gate (`fivespot.webhook.connections.ClientGate`)."""
        if self.policy.clients is None:
            return None
        peer = ssl_object.getpeercert() if ssl_object is not None else None
        return client_refusal(peer, self.policy.clients.names)

    def context(self) -> ssl.SSLContext | None:
        return self._context

    def listening_context(self) -> ssl.SSLContext:
        """The context to listen with: it hands every handshake to the current context."""
        with self._lock:
            if self._context is None:
                raise ValueError("no serving certificate is loaded yet")
            if self._listening is None:
                self._listening = self._context
                self._listening.sni_callback = self._switch
            return self._listening

    def _switch(self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                listening: ssl.SSLContext) -> None:
        current = self._context
        if current is not None and current is not listening:
            connection.context = current

    def problem(self, now: datetime.datetime) -> str | None:
        """Why this pod must not receive traffic, if it must not."""
        if self._context is None or self.not_after is None:
            return "no serving certificate is loaded yet"
        if self.not_after <= now:
            return f"the serving certificate expired at {self.not_after.isoformat()}"
        return None


class CertificateFiles:
    """Serve a mounted pair (cert-manager mode) and reload it when the kubelet updates it.

    The kubelet swaps a Secret volume's files atomically (a `..data` symlink), so comparing the
    resolved files' identity and mtime is enough to notice a renewal."""

    def __init__(self, cert: Path, key: Path, serving: ServingCertificate,
                 interval: float = 10.0) -> None:
        self.cert, self.key, self.serving, self.interval = cert, key, serving, interval
        self._seen: tuple[object, ...] | None = None

    def _identity(self) -> tuple[object, ...]:
        found: list[object] = []
        for path in (self.cert, self.key):
            stat = path.stat()
            found += [os.path.realpath(path), stat.st_ino, stat.st_mtime_ns, stat.st_size]
        return tuple(found)

    def tick(self) -> float:
        identity = self._identity()
        if identity != self._seen:
            self.serving.load(self.cert.read_bytes(), self.key.read_bytes())
            self._seen = identity
        return self.interval
