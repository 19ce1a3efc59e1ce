"""The key material a local control plane needs, generated with `cryptography`.

A serving CA and the apiserver's serving certificate, a client CA and an admin client
certificate in `system:masters`, and the service-account signing key pair that makes
TokenRequest work. EC P-256 keys keep generation instant.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def new_ca(common_name: str, now: datetime.datetime) -> tuple[KeyPair, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)), key


def issue(
    ca: KeyPair,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    now: datetime.datetime,
    *,
    organization: str | None = None,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
) -> KeyPair:
    """A leaf certificate signed by `ca` for a server, a client, or both."""
    key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def service_account_keys() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) for signing and verifying service-account tokens."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public


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
