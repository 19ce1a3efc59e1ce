"""The key material a local control plane needs, generated with `cryptography`.

A serving CA and the apiserver's serving certificate, a client CA and an admin client
certificate in `system:masters`, and the service-account signing key pair that makes
TokenRequest work. EC P-256 keys keep generation instant. The CA and leaf issuing lives in
`fivespot.webhook.tls` (the webhook mints its own certificates the same way); it is re-exported here.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fivespot.webhook.tls import KeyPair, issue, key_pem, new_ca

__all__ = ["ControlPlaneCerts", "KeyPair", "issue", "new_ca", "service_account_keys",
           "write_control_plane_certs"]


def service_account_keys() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) for signing and verifying service-account tokens."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return key_pem(key), public


@dataclass(frozen=True)
class ControlPlaneCerts:
    """Files written by `write_control_plane_certs`."""

    serving_ca: Path
    serving_cert: Path
    serving_key: Path
    client_ca: Path
    admin_cert: Path
    admin_key: Path
    sa_private: Path
    sa_public: Path


def write_control_plane_certs(folder: Path, now: datetime.datetime) -> ControlPlaneCerts:
    folder.mkdir(parents=True, exist_ok=True)
    serving_ca, serving_ca_key = new_ca("fivespot-devcluster-serving-ca", now)
    serving = issue(
        serving_ca, serving_ca_key, "kube-apiserver", now,
        dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        ip_addresses=("127.0.0.1", "10.0.0.1"),
        server=True,
    )
    client_ca, client_ca_key = new_ca("fivespot-devcluster-client-ca", now)
    admin = issue(client_ca, client_ca_key, "admin", now, organization="system:masters", client=True)
    sa_private, sa_public = service_account_keys()
    paths = ControlPlaneCerts(
        serving_ca=folder / "serving-ca.crt",
        serving_cert=folder / "apiserver.crt",
        serving_key=folder / "apiserver.key",
        client_ca=folder / "client-ca.crt",
        admin_cert=folder / "admin.crt",
        admin_key=folder / "admin.key",
        sa_private=folder / "sa.key",
        sa_public=folder / "sa.pub",
    )
    contents = {
        paths.serving_ca: serving_ca.cert_pem,
        paths.serving_cert: serving.cert_pem,
        paths.serving_key: serving.key_pem,
        paths.client_ca: client_ca.cert_pem,
        paths.admin_cert: admin.cert_pem,
        paths.admin_key: admin.key_pem,
        paths.sa_private: sa_private,
        paths.sa_public: sa_public,
    }
    for path, data in contents.items():
        path.write_bytes(data)
        path.chmod(0o600)
    return paths
