"""Client authentication (mutual TLS) against the real API server: with
`webhook.clientAuthentication`, the webhook answers the API server, which presents a client
certificate through its AdmissionConfiguration (`WebhookAdmissionConfiguration.kubeConfigFile`,
a user per webhook host, exactly as docs/how-to/webhook-rollout.md tells a platform to configure
it), and gives no review to any other caller: one without a certificate, one with a certificate
from another CA, one whose certificate names somebody else, nor the same API server calling it
through a host it has no certificate for.

The module runs its own control plane, started with that admission configuration; the webhook
runs as the compiled Deployment runs it with client authentication on (`--client-ca-path`,
`--client-subject-names`), in files mode so the test holds the serving CA. Everything talks
only to 127.0.0.1.
"""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from kubernetes import client

from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster.clients import admin_client
from fivespot.devcluster.controlplane import ControlPlane
from fivespot.devcluster.kubectl import apply, wait_established
from tests.integration.conftest import own_control_plane
from tests.integration.test_control_plane_is_real import eventually
from tests.integration.test_webhook_admission import EXAMPLE, Server, denial, free_port
from tests.integration.test_webhook_server import start_files_server
from fivespot.webhook.tls import KeyPair, issue, new_ca

API_SERVER_NAME: Final = "kube-apiserver-webhook-client"
HOOK: Final = "client-authentication.5spot.finos.org"
UNTRUSTED_HOOK: Final = "no-client-certificate.5spot.finos.org"
REVIEWS: Final = 'fivespot_webhook_admission_duration_seconds_count{check="host-governance",' \
                 'verdict="allowed"}'
REFUSED: Final = 'fivespot_webhook_rejected_bodies_total{check="host-governance",status="403"}'
NOW: Final = datetime.datetime.now(datetime.timezone.utc)
SERVING_CA, SERVING_CA_KEY = new_ca("serving-ca", NOW)
CLIENT_CA, CLIENT_CA_KEY = new_ca("apiserver-webhook-client-ca", NOW)
OTHER_CA, OTHER_CA_KEY = new_ca("another-ca", NOW)


@dataclass
class World:
    plane: ControlPlane
    server: Server
    core: client.CoreV1Api
    namespace: str
    work: Path

    def tls(self, pair: KeyPair | None = None) -> ssl.SSLSocket:
        """A TLS connection to the webhook, presenting `pair` if one is given."""
        context = ssl.create_default_context(cadata=SERVING_CA.cert_pem.decode())
        if pair is not None:
            pem = self.work / f"client-{uuid.uuid4().hex}.pem"
            pem.write_bytes(pair.cert_pem + pair.key_pem)
            context.load_cert_chain(pem)
        raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        return context.wrap_socket(raw, server_hostname="127.0.0.1")

    def count(self, series: str) -> float:
        for line in self.server.metrics().splitlines():
            if line.startswith(series + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def reviews(self) -> float:
        """How many allowed host-governance reviews the webhook has decided."""
        return self.count(REVIEWS)

    def refusals(self) -> float:
        """How many host-governance requests it refused for want of an accepted certificate."""
        return self.count(REFUSED)

    def through_api_server(self, name: str) -> str | None:
        """A dry-run ConfigMap create that the API server must have the webhook(s) judge."""
        body = {"metadata": {"name": name, "namespace": self.namespace}, "data": {"k": "v"}}
        return denial(lambda: self.core.create_namespaced_config_map(self.namespace, body,
                                                                     dry_run="All"))


def warmed_up(world: World) -> bool | None:
    """True once the API server has had the webhook judge a write and the worker counted it.
    A write that merely passes proves nothing: until the API server's informer has the new
    configuration it calls no webhook, and the worker (which serves the metrics) may still be
    starting behind the master's listening socket."""
    try:
        before = world.reviews()
    except OSError:
        return None
    if world.through_api_server("warm-up") is not None:
        return None
    return True if world.reviews() > before else None


def client_pair(name: str, ca: KeyPair = CLIENT_CA, key: object = CLIENT_CA_KEY) -> KeyPair:
    return issue(ca, key, name, NOW, client=True)  # type: ignore[arg-type]


def webhook_configuration(name: str, url: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "webhooks": [{
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "failurePolicy": "Fail", "timeoutSeconds": 5,
        "clientConfig": {"url": url, "caBundle": base64.b64encode(SERVING_CA.cert_pem).decode()},
        "namespaceSelector": {"matchLabels": {"client-authentication": "yes"}},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["configmaps"]}]}]}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    work = tmp_path_factory.mktemp("client-authentication")
    port = free_port()
    # The API server presents its client certificate to this webhook's host:port only.
    with own_control_plane(webhook_clients={f"127.0.0.1:{port}": client_pair(API_SERVER_NAME)}
                           ) as plane:
        admin = admin_client(plane.kubeconfig)
        compiled = compile_repo(EXAMPLE / "config")
        write_tree(compiled.files, work / "out")
        apply(plane.kubeconfig, work / "out" / "crds")
        wait_established(plane.kubeconfig, ["scheduledmachines.5spot.finos.org",
                                            "scheduledcapacities.5spot.finos.org"])
        serving = issue(SERVING_CA, SERVING_CA_KEY, "fivespot-webhook", NOW,
                        dns_names=("localhost",), ip_addresses=("127.0.0.1",), server=True)
        cert_dir = work / "tls"
        cert_dir.mkdir()
        (cert_dir / "tls.crt").write_bytes(serving.cert_pem)
        (cert_dir / "tls.key").write_bytes(serving.key_pem)
        client_ca = work / "client-ca.crt"
        client_ca.write_bytes(CLIENT_CA.cert_pem)
        server = start_files_server(work, plane.kubeconfig, cert_dir, "--client-ca-path",
                                    str(client_ca), "--client-subject-names", API_SERVER_NAME,
                                    port=port)
        core = client.CoreV1Api(admin)
        namespace = f"mtls-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": namespace,
                                            "labels": {"client-authentication": "yes"}}})
        registration = client.AdmissionregistrationV1Api(admin)
        registration.create_validating_webhook_configuration(webhook_configuration(
            HOOK, f"https://127.0.0.1:{port}/validate/host-governance"))
        found = World(plane, server, core, namespace, work)
        try:
            eventually(lambda: warmed_up(found), timeout_s=90)
            yield found
        except BaseException:
            print(server.output())
            raise
        finally:
            server.stop()
            admin.close()


def test_with_client_authentication_the_api_servers_reviews_are_answered(world: World) -> None:
    before = world.reviews()
    for index in range(5):
        assert world.through_api_server(f"answered-{index}") is None
    assert world.reviews() == before + 5


def _post(tls: ssl.SSLSocket) -> bytes:
    body = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}'
    tls.sendall(b"POST /validate/host-governance HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    answer = b""
    while chunk := tls.recv(65536):
        answer += chunk
    return answer


def test_a_caller_without_a_certificate_gets_no_review_but_the_probes_answer(
        world: World) -> None:
    before = world.reviews()
    with world.tls() as tls:
        answer = _post(tls)
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert b"no client certificate was presented" in answer
    with world.tls() as tls:
        tls.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert tls.recv(64).startswith(b"HTTP/1.1 200")
    assert world.reviews() == before
    assert 'fivespot_webhook_rejected_bodies_total{check="host-governance",status="403"}' in \
        world.server.metrics()


def test_a_certificate_from_another_ca_fails_the_handshake(world: World) -> None:
    before = world.reviews()
    impostor = client_pair(API_SERVER_NAME, OTHER_CA, OTHER_CA_KEY)
    try:
        with world.tls(impostor) as tls:
            # TLS 1.3: the client's handshake ends before the server has judged its certificate;
            # the server's alert and close arrive on the first read.
            answer = _post(tls)
    except (ssl.SSLError, ConnectionError):
        answer = b""
    assert answer == b"", answer[:200]
    assert world.reviews() == before


def test_a_certificate_from_the_ca_naming_another_caller_gets_no_review(world: World) -> None:
    before = world.reviews()
    with world.tls(client_pair("system:admin")) as tls:
        answer = _post(tls)
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert f"names system:admin, none of the allowed {API_SERVER_NAME}".encode() in answer
    assert world.reviews() == before


def test_the_api_server_calling_through_a_host_it_has_no_certificate_for_is_refused(
        world: World) -> None:
    """The same webhook by `localhost`: the API server's admission kubeconfig names only
    127.0.0.1:PORT, so it presents no certificate, and failurePolicy Fail refuses the write."""
    registration = client.AdmissionregistrationV1Api(world.core.api_client)
    registration.create_validating_webhook_configuration(webhook_configuration(
        UNTRUSTED_HOOK, f"https://localhost:{world.server.port}/validate/host-governance"))
    try:
        before = world.refusals()

        def refused() -> str | None:
            message = world.through_api_server("uncertified")
            return message if message and UNTRUSTED_HOOK in message else None

        message = eventually(refused, timeout_s=30)
        assert f'failed calling webhook "{UNTRUSTED_HOOK}"' in message, message
        assert world.refusals() > before, "the API server's call reached the certificate gate"
    finally:
        registration.delete_validating_webhook_configuration(UNTRUSTED_HOOK)
