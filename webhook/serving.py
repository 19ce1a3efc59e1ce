"""The TLS context the server hands each new connection, swapped when the certificate changes.

gunicorn's gthread worker asks its `ssl_context` hook for a context on every accepted
connection; ours returns the current one from `ServingCertificate`. A new certificate (rotated
Secret, or cert-manager's renewed files) becomes a freshly built context that replaces the old
one in a single reference assignment: new handshakes get the new certificate at once, connections
already established finish on the old one, no request is refused and nothing restarts. Building a
new context instead of calling `load_cert_chain` on the live one keeps a half-loaded context
(new certificate, old key) from ever being visible to a concurrent handshake.

Slow clients: every TLS socket this context makes carries an I/O timeout, including after
gunicorn switches a kept-alive socket back to blocking mode (it calls `setblocking(True)`, which
would otherwise mean "wait forever"). A client that stops sending mid-handshake, mid-headers or
mid-body therefore frees its worker thread after `io_timeout` seconds instead of holding it.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

from cryptography import x509


class DeadlineSSLSocket(ssl.SSLSocket):
    """An SSLSocket whose blocking mode always has a timeout (its context's `io_timeout`)."""

    def setblocking(self, flag: bool) -> None:
        timeout = getattr(self.context, "io_timeout", None)
        if flag and timeout:
            self.settimeout(timeout)
        else:
            super().setblocking(flag)


class DeadlineSSLContext(ssl.SSLContext):
    """A server context whose sockets time out instead of blocking forever."""

    io_timeout: float = 10.0

    def wrap_socket(self, sock: Any, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        sock.settimeout(self.io_timeout)
        return super().wrap_socket(sock, *args, **kwargs)


def server_context(cert_pem: bytes, key_pem: bytes, io_timeout: float,
                   scratch: Path | None = None) -> DeadlineSSLContext:
    """A TLS 1.2+ server context for this pair; raises ssl.SSLError if they do not match."""
    context = DeadlineSSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.io_timeout = io_timeout
    context.sslsocket_class = DeadlineSSLSocket
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    # `ssl` loads key material only from files: a private, short-lived one in the scratch dir.
    fd, name = tempfile.mkstemp(prefix="serving-", suffix=".pem", dir=scratch)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(cert_pem.rstrip(b"\n") + b"\n" + key_pem)
        context.load_cert_chain(name)
    finally:
        os.unlink(name)
    return context


class ServingCertificate:
    """The current serving context and what it holds."""

    def __init__(self, io_timeout: float, scratch: Path | None = None) -> None:
        self.io_timeout = io_timeout
        self.scratch = scratch
        self._lock = threading.Lock()
        self._context: DeadlineSSLContext | None = None
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
        context = server_context(cert_pem, key_pem, self.io_timeout, self.scratch)
        with self._lock:
            self._context, self._fingerprint = context, fingerprint
            self.not_after = cert.not_valid_after_utc
            self.reloads += 1
        return True

    def context(self) -> ssl.SSLContext | None:
        return self._context

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
