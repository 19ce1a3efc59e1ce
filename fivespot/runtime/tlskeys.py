"""Loading a certificate and its private key into an `ssl.SSLContext` without leaving them on disk.

Python's `ssl` reads key material only from files. The webhook's serving pair and the machine
controller's workload-cluster client certificate are both written to one owner-only file in a
private folder, loaded, and removed at once, whether they loaded or not: once loaded, the key
lives only in the context's memory.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from pathlib import Path


def load_key_pair(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes,
                  scratch: Path | None = None) -> None:
    """Load `cert_pem` (with any chain) and `key_pem` into `context`; raises ssl.SSLError if they
    do not load or do not match. The file is 0600 in a fresh 0700 folder made in `scratch` (else
    the temporary directory), and the folder is gone when this returns or raises."""
    folder = Path(tempfile.mkdtemp(prefix="fivespot-tls-", dir=scratch))
    try:
        pair = folder / "pair.pem"
        descriptor = os.open(pair, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(cert_pem.rstrip(b"\n") + b"\n" + key_pem)
        # An encrypted key fails to load (with an empty password) rather than make OpenSSL
        # prompt for one on the terminal.
        context.load_cert_chain(pair, password=lambda: b"")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
