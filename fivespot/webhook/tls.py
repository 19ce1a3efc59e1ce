"""Issuing certificates with `cryptography`: self-signed CAs and the leaves they sign.

One implementation for every certificate fivespot makes: the webhook's own CA and serving
certificate (`fivespot.webhook.certificates`) and the local control plane's key material
(`fivespot.devcluster.certs` re-exports these). EC P-256 keys, because generating one is instant, which
matters when several webhook replicas start at once and each may have to mint a CA.

Every certificate is backdated by `BACKDATE` so a node whose clock runs a little behind still
accepts it; the webhook's rotation arithmetic (`issued_at`) undoes the backdate, so the requested
validity, not the backdated one, is what "2/3 of the lifetime" refers to.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

BACKDATE: Final = datetime.timedelta(minutes=5)
DEFAULT_VALIDITY: Final = datetime.timedelta(days=30)


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
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


def issued_at(cert: x509.Certificate) -> datetime.datetime:
    """When the certificate was made (its notBefore without the backdate)."""
    return cert.not_valid_before_utc + BACKDATE


def new_ca(
    common_name: str,
    now: datetime.datetime,
    validity: datetime.timedelta = DEFAULT_VALIDITY,
) -> tuple[KeyPair, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate (may sign leaves only) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem(key)), key


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
    validity: datetime.timedelta = DEFAULT_VALIDITY,
) -> KeyPair:
    """A leaf certificate signed by `ca` for a server, a client, or both.

    It never outlives its CA: notAfter is capped at the CA's, so a leaf cannot be left valid and
    unverifiable (the failure behind Kyverno's expired-CA reports)."""
    key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))
