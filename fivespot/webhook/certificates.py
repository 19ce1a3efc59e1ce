"""Self-managed certificates: a CA and serving certificate kept in one Secret, rotated early,
with the caBundle injected into the ValidatingWebhookConfiguration.

Why it is shaped like this (lessons from Kyverno and Gatekeeper's cert-controller):
- **One Secret, fill-or-adopt.** The compiled output holds `fivespot-webhook-tls`, empty (type
  `kubernetes.io/tls`, its two keys blank), so the webhook never creates a Secret: its RBAC has
  no `create` on Secrets, which cannot be limited by name and would let a compromised webhook
  mint a ServiceAccount token Secret for another identity (security review F7). Several
  replicas may start at once: each reads the Secret and, finding it empty, fills it with an
  update carrying the `resourceVersion` it read, so exactly one update wins (409 for the rest)
  and the others load the winner's. Every later write is such an update too, so two replicas
  rotating at the same time cannot both win: the loser's 409 makes it re-read and adopt. A
  missing Secret is an error that says to apply it, not something to repair.
- **Rotation is decided by a pure function** (`plan`) of the Secret's contents and the time, so
  every replica computes the same answer and the rules are unit-tested with a fake clock.
- **Early, for both certificates.** The serving certificate and the CA are each renewed at a
  fraction (default 2/3) of their lifetime. Kyverno's CA expired a year in because only the leaf
  was ever checked (kyverno#10063, #13639); here the CA has its own renewal point, and a leaf
  never outlives the CA that signed it.
- **Staged CA rotation, no dropped requests.** A new CA is first only *published*: it joins the
  bundle (`ca.crt`, injected as `caBundle`) while the old CA keeps signing. Only after
  `overlap` has passed — long enough for the API server to pick up the new caBundle — does the
  new CA sign the serving certificate. The old CA stays in the bundle until it expires, so a
  replica that has not yet reloaded (or a client holding the previous caBundle) still verifies.
  Expired CAs leave the bundle (kyverno#12049 kept them forever). Serving a certificate the API
  server cannot yet verify is exactly the "bad certificate after renewal" of kyverno#2642.
- **Only the caBundle fields are patched** (a JSON patch, each op guarded by a `test` of the
  webhook's name), so the GitOps tool owns everything else in the configuration and the
  webhook's RBAC needs nothing but get/patch on that one object, and get/update on the Secret.

Secret layout (`kubernetes.io/tls`): `tls.crt`/`tls.key` the serving pair, `ca.crt` every
trusted CA (oldest first), `ca.key` their keys in the same order.
"""

from __future__ import annotations

import base64
import datetime
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fivespot.runtime import kube
from fivespot.runtime.kube import ApiClient
from fivespot.webhook import tls

log = logging.getLogger(__name__)

SECRET_TYPE: Final = "kubernetes.io/tls"
CA_COMMON_NAME: Final = "fivespot-webhook-ca"
SERVING_COMMON_NAME: Final = "fivespot-webhook"

Clock = Callable[[], datetime.datetime]


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


@dataclass(frozen=True)
class Lifetimes:
    """How long certificates live and when they are renewed."""

    ca: datetime.timedelta = datetime.timedelta(days=365)
    serving: datetime.timedelta = datetime.timedelta(days=90)
    renew_fraction: float = 2 / 3
    overlap: datetime.timedelta = datetime.timedelta(minutes=10)
    """How long a new CA is published in the caBundle before it signs the serving certificate."""

    def __post_init__(self) -> None:
        if not 0 < self.renew_fraction < 1:
            raise ValueError("the renewal fraction must be between 0 and 1")
        if self.serving > self.ca:
            raise ValueError("the serving certificate cannot outlive its CA")
        if self.overlap * 2 > self.ca * (1 - self.renew_fraction):
            raise ValueError(
                f"the CA overlap ({self.overlap}) must be at most half the time between the CA's "
                f"renewal and its expiry ({self.ca * (1 - self.renew_fraction)}); lengthen the CA "
                "validity or shorten the overlap")


@dataclass(frozen=True)
class ServingNames:
    """The subject alternative names the serving certificate must carry."""

    dns: tuple[str, ...]
    ips: tuple[str, ...] = ()

    @classmethod
    def for_service(cls, service: str, namespace: str, extra: Sequence[str] = ()) -> ServingNames:
        dns = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]
        ips: list[str] = []
        for name in extra:
            (ips if _is_ip(name) else dns).append(name)
        return cls(tuple(dns), tuple(ips))


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Authority:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return tls.key_pem(self.key)

    @property
    def published_at(self) -> datetime.datetime:
        """A CA joins the bundle in the same write that creates it."""
        return tls.issued_at(self.cert)

    def signed(self, leaf: x509.Certificate) -> bool:
        if leaf.issuer != self.cert.subject:
            return False
        try:
            leaf.verify_directly_issued_by(self.cert)
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True


@dataclass(frozen=True)
class TLSState:
    """What the Secret holds: the trusted CAs (oldest first) and the serving pair."""

    authorities: tuple[Authority, ...]
    serving_cert_pem: bytes
    serving_key_pem: bytes

    @property
    def serving_cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.serving_cert_pem)

    @property
    def ca_bundle(self) -> bytes:
        return b"".join(a.cert_pem for a in self.authorities)

    def secret_data(self) -> dict[str, str]:
        raw = {"tls.crt": self.serving_cert_pem, "tls.key": self.serving_key_pem,
               "ca.crt": self.ca_bundle, "ca.key": b"".join(a.key_pem for a in self.authorities)}
        return {k: base64.b64encode(v).decode() for k, v in raw.items()}

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str] | None) -> TLSState | None:
        """The state in a Secret's `data`, or None when it is missing or unusable."""
        if not data:
            return None
        try:
            raw = {k: base64.b64decode(data[k]) for k in ("tls.crt", "tls.key", "ca.crt", "ca.key")}
            certs = x509.load_pem_x509_certificates(raw["ca.crt"])
            keys = [serialization.load_pem_private_key(block, None)
                    for block in _pem_blocks(raw["ca.key"])]
            x509.load_pem_x509_certificate(raw["tls.crt"])
            serialization.load_pem_private_key(raw["tls.key"], None)
        except (KeyError, ValueError, TypeError):
            return None
        if len(certs) != len(keys) or not certs:
            return None
        authorities = []
        for cert, key in zip(certs, keys):
            if not isinstance(key, ec.EllipticCurvePrivateKey) or not _pairs(cert, key):
                return None
            authorities.append(Authority(cert, key))
        return cls(tuple(authorities), raw["tls.crt"], raw["tls.key"])


def _pairs(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    return bool(cert.public_key() == key.public_key())


_PEM_BLOCK: Final = re.compile(rb"-----BEGIN [A-Z ]+-----.+?-----END [A-Z ]+-----\n?", re.S)


def _pem_blocks(data: bytes) -> list[bytes]:
    return _PEM_BLOCK.findall(data)


# --- the rules -----------------------------------------------------------------------------------


def renew_at(cert: x509.Certificate, fraction: float,
             lifetime: datetime.timedelta | None = None) -> datetime.datetime:
    """`fraction` of the way through the certificate's life, or through `lifetime` (the one
    configured now) when that is shorter: shortening a validity takes effect on the Secret a
    webhook finds, without anyone deleting it."""
    issued = tls.issued_at(cert)
    life = cert.not_valid_after_utc - issued
    return issued + (min(life, lifetime) if lifetime is not None else life) * fraction


def _new_authority(now: datetime.datetime, lifetimes: Lifetimes) -> Authority:
    # The CN carries the issue time so successive CAs have distinct subjects.
    pair, key = tls.new_ca(f"{CA_COMMON_NAME}-{int(now.timestamp())}", now, lifetimes.ca)
    return Authority(x509.load_pem_x509_certificate(pair.cert_pem), key)


def signer(authorities: Sequence[Authority], now: datetime.datetime,
           overlap: datetime.timedelta) -> Authority:
    """The newest CA published for at least `overlap`; the oldest one if none has been yet (a
    fresh start, where nobody can hold an older bundle)."""
    for authority in reversed(authorities):
        if authority.published_at + overlap <= now:
            return authority
    return authorities[0]


def _names_of(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return (set(sans.get_values_for_type(x509.DNSName)),
            {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)})


def _serving_is_current(state: TLSState, by: Authority, now: datetime.datetime,
                        lifetimes: Lifetimes, names: ServingNames) -> bool:
    try:
        cert = state.serving_cert
        key = serialization.load_pem_private_key(state.serving_key_pem, None)
    except ValueError:
        return False
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _pairs(cert, key):
        return False
    if _names_of(cert) != (set(names.dns), set(names.ips)):
        return False
    return by.signed(cert) and now < renew_at(cert, lifetimes.renew_fraction, lifetimes.serving)


def plan(state: TLSState | None, now: datetime.datetime, lifetimes: Lifetimes,
         names: ServingNames) -> TLSState | None:
    """What the Secret should hold at `now`, or None when `state` is already right.

    Starting from nothing: a CA and a serving certificate it signs. Otherwise: expired CAs
    leave the bundle; a CA past its renewal point gets a successor (published, not yet used);
    the serving certificate is reissued when it is past its renewal point, has the wrong names
    or key, or was not signed by the CA that should sign now (`signer`)."""
    changed = False
    authorities: list[Authority] = list(state.authorities) if state else []
    live = [a for a in authorities if a.cert.not_valid_after_utc > now]
    if len(live) != len(authorities):
        authorities, changed = live, True
    if not authorities:
        authorities, changed = [_new_authority(now, lifetimes)], True
    elif now >= renew_at(authorities[-1].cert, lifetimes.renew_fraction, lifetimes.ca):
        authorities.append(_new_authority(now, lifetimes))
        changed = True
    by = signer(authorities, now, lifetimes.overlap)
    if state is not None and _serving_is_current(state, by, now, lifetimes, names):
        if not changed:
            return None
        return TLSState(tuple(authorities), state.serving_cert_pem, state.serving_key_pem)
    # The names live in the SANs (what clients check); a CN is at most 64 characters, which a
    # long namespace's service name would exceed.
    pair = tls.issue(tls.KeyPair(by.cert_pem, by.key_pem), by.key, SERVING_COMMON_NAME, now,
                     dns_names=names.dns, ip_addresses=names.ips, server=True,
                     validity=lifetimes.serving)
    return TLSState(tuple(authorities), pair.cert_pem, pair.key_pem)


def next_due(state: TLSState, lifetimes: Lifetimes, now: datetime.datetime) -> datetime.datetime:
    """The next time after `now` that `plan` may change `state` (a renewal point, a CA switch
    or an expiry); points already passed are ignored, so a caller sleeping until then never
    spins."""
    times = [renew_at(state.serving_cert, lifetimes.renew_fraction, lifetimes.serving),
             renew_at(state.authorities[-1].cert, lifetimes.renew_fraction, lifetimes.ca)]
    times += [a.cert.not_valid_after_utc for a in state.authorities]
    times += [a.published_at + lifetimes.overlap for a in state.authorities]
    return min((t for t in times if t > now), default=now + lifetimes.overlap)


# --- the Secret and the caBundle ----------------------------------------------------------------


class CertificateError(RuntimeError):
    """The Secret or the webhook configuration cannot be brought to the wanted state."""


class SecretKeeper:
    """Keeps the TLS Secret and the configuration's caBundle right; one `reconcile` per tick."""

    def __init__(self, api: ApiClient, namespace: str, secret_name: str,
                 configuration_name: str, lifetimes: Lifetimes, names: ServingNames,
                 clock: Clock = utcnow) -> None:
        self.api = api
        self.namespace = namespace
        self.secret_name = secret_name
        self.configuration_name = configuration_name
        self.lifetimes = lifetimes
        self.names = names
        self.clock = clock
        self.rotations = 0
        """Writes this keeper won (creation included)."""
        self.configuration_missing = False
        """The webhook configuration did not exist at the last injection (not applied yet)."""

    def reconcile(self) -> TLSState:
        """Read, rotate if due (first writer wins), inject the caBundle; return what to serve."""
        state = self._settle_secret()
        self.inject_ca_bundle(state.ca_bundle)
        return state

    def _secret_path(self, name: str | None = None) -> str:
        return kube.resource_path("", "v1", "secrets", self.namespace, name)

    def _configuration_path(self) -> str:
        return kube.resource_path("admissionregistration.k8s.io", "v1",
                                  "validatingwebhookconfigurations", None, self.configuration_name)

    def _settle_secret(self) -> TLSState:
        for _ in range(8):
            secret: dict[str, Any] | None
            try:
                secret = kube.request(self.api, "GET", self._secret_path(self.secret_name))
            except kube.ApiError as error:
                if error.not_found:
                    raise CertificateError(missing_secret(self.namespace, self.secret_name)) from None
                raise CertificateError(f"reading Secret {self.namespace}/{self.secret_name}: "
                                       f"{error.status} {error.reason}") from None
            current = TLSState.from_secret_data(secret.get("data"))
            wanted = plan(current, self.clock(), self.lifetimes, self.names)
            if wanted is None:
                assert current is not None
                return current
            try:
                self._write(secret, wanted)
            except kube.ApiError as error:
                if error.conflict:
                    continue  # someone else wrote first: adopt theirs
                raise CertificateError(
                    f"writing Secret {self.namespace}/{self.secret_name}: {error.status} "
                    f"{error.reason}: {error.message}") from None
            self.rotations += 1
            log.info("wrote %s/%s: serving certificate valid until %s, %d CA(s) in the bundle",
                     self.namespace, self.secret_name, wanted.serving_cert.not_valid_after_utc,
                     len(wanted.authorities))
            return wanted
        raise CertificateError(f"Secret {self.namespace}/{self.secret_name} kept changing under "
                               "us; will retry")

    def _write(self, existing: dict[str, Any], state: TLSState) -> None:
        if existing.get("type") not in (None, SECRET_TYPE):
            raise CertificateError(
                f"Secret {self.namespace}/{self.secret_name} has type {existing.get('type')}, not "
                f"{SECRET_TYPE}, and a Secret's type cannot change; delete it and apply the "
                "compiled output's workloads/ again (it holds the Secret, empty), and the webhook "
                "fills it")
        # A replace of what was read: its resourceVersion makes a concurrent writer's win a 409.
        replacement = {**existing, "data": state.secret_data()}
        kube.request(self.api, "PUT", self._secret_path(self.secret_name), body=replacement)

    def inject_ca_bundle(self, bundle: bytes) -> bool:
        """Patch every webhook's caBundle to `bundle`; True when something changed. A missing
        configuration is not an error (GitOps may not have applied it yet)."""
        encoded = base64.b64encode(bundle).decode()
        try:
            configuration = kube.request(self.api, "GET", self._configuration_path())
            self.configuration_missing = False
        except kube.ApiError as error:
            if error.not_found:
                self.configuration_missing = True
                log.warning("ValidatingWebhookConfiguration %s does not exist yet; the caBundle "
                            "is injected once it does", self.configuration_name)
                return False
            raise CertificateError(f"reading ValidatingWebhookConfiguration "
                                   f"{self.configuration_name}: {error.status} {error.reason}") from None
        operations = ca_bundle_patch(configuration.get("webhooks") or [], encoded)
        if not operations:
            return False
        try:
            kube.request(self.api, "PATCH", self._configuration_path(), body=operations,
                         content_type=kube.JSON_PATCH)
        except kube.ApiError as error:
            if error.status in (409, 422):  # reordered under us (a `test` failed): next tick
                return False
            raise CertificateError(f"patching the caBundle of {self.configuration_name}: "
                                   f"{error.status} {error.reason}: {error.message}") from None
        log.info("injected a caBundle of %d CA(s) into %s", bundle.count(b"BEGIN CERTIFICATE"),
                 self.configuration_name)
        return True


def missing_secret(namespace: str, name: str) -> str:
    return (f"Secret {namespace}/{name} does not exist; it is part of the compiled output "
            f"(workloads/{name}.secret.yaml, empty: the webhook fills it, and may not create it): "
            "sync or apply the output's workloads/ layer")


def ca_bundle_patch(webhooks: Sequence[Mapping[str, Any]], encoded: str) -> list[dict[str, Any]]:
    """JSON-patch operations setting every webhook's caBundle, each guarded by its name."""
    operations: list[dict[str, Any]] = []
    for index, hook in enumerate(webhooks):
        current = (hook.get("clientConfig") or {}).get("caBundle")
        if current == encoded:
            continue
        operations.append({"op": "test", "path": f"/webhooks/{index}/name",
                           "value": hook.get("name")})
        operations.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle",
                           "value": encoded})
    return operations


# --- the loop --------------------------------------------------------------------------------------


class CertificateLoop:
    """Runs `tick` now and then until stopped; `tick` returns when it next wants to run."""

    def __init__(self, tick: Callable[[], float], name: str) -> None:
        self._tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delay = self._tick()
            except CertificateError as error:  # says what to do; no traceback to read
                log.error("certificate check failed, retrying in 5s (the certificate loaded "
                          "is served meanwhile): %s", error)
                delay = 5.0
            except Exception:  # a failed tick is retried; the loop must not die
                log.exception("certificate check failed; retrying")
                delay = 5.0
            self._stop.wait(max(delay, 0.05))
