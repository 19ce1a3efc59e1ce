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
(`webhook.connections`: the whole-request deadline counts from accept).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import ssl
import threading
from pathlib import Path

from cryptography import x509

from runtime.tlskeys import load_key_pair


def server_context(cert_pem: bytes, key_pem: bytes, scratch: Path | None = None) -> ssl.SSLContext:
    """A TLS 1.2+ server context for this pair; raises ssl.SSLError if they do not match."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    load_key_pair(context, cert_pem, key_pem, scratch)
    return context


class ServingCertificate:
    """The current serving context and what it holds."""

    def __init__(self, scratch: Path | None = None) -> None:
        self.scratch = scratch
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
        context = server_context(cert_pem, key_pem, self.scratch)
        with self._lock:
            self._context, self._fingerprint = context, fingerprint
            self.not_after = cert.not_valid_after_utc
            self.reloads += 1
        return True

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
