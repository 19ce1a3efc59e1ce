"""A kubeconfig fivespot does not trust (CAPI's `<cluster>-kubeconfig` Secret) gives the workload
client an https server, its inline CA and inline credentials, and nothing else: every other field
is refused by its path, never by its value, and a key never stays on disk (issue 36, F1)."""

from __future__ import annotations

import base64
import copy
import datetime
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.runtime import kube
from fivespot.runtime.kubeconfig import ClusterAccess, KubeconfigRefused, parse
from fivespot.webhook.tls import KeyPair, issue, new_ca

pytestmark = pytest.mark.unit

SENTINEL = "s3cr3t-SENTINEL-0f9c"
"""Every value a test plants: it must never come back in a reason."""
SOURCE = "Secret trading/desk-kubeconfig"
NOW = datetime.datetime.now(datetime.timezone.utc)
CA, CA_KEY = new_ca("workload-ca", NOW)
CLIENT = issue(CA, CA_KEY, "admin", NOW, organization="system:masters", client=True)
OTHER_CA, OTHER_CA_KEY = new_ca("another-ca", NOW)
OTHER_CLIENT = issue(OTHER_CA, OTHER_CA_KEY, "someone", NOW, client=True)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def capi(**changes: Any) -> dict[str, Any]:
    """What CAPI writes into `<cluster>-kubeconfig` (clusterctl's shape)."""
    config: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "desk", "cluster": {
            "server": "https://desk.example.com:6443/",
            "certificate-authority-data": b64(CA.cert_pem)}}],
        "users": [{"name": "desk-admin", "user": {
            "client-certificate-data": b64(CLIENT.cert_pem),
            "client-key-data": b64(CLIENT.key_pem)}}],
        "contexts": [{"name": "desk-admin@desk", "context": {"cluster": "desk", "user": "desk-admin"}}],
        "current-context": "desk-admin@desk",
    }
    config.update(changes)
    return config


def with_user(**fields: Any) -> dict[str, Any]:
    config = capi()
    config["users"][0]["user"].update(fields)
    return config


def with_cluster(**fields: Any) -> dict[str, Any]:
    config = capi()
    config["clusters"][0]["cluster"].update(fields)
    return config


def with_entry(section: str, inner: dict[str, Any]) -> dict[str, Any]:
    """CAPI's kubeconfig with the one entry of `section` holding `inner` instead."""
    config = capi()
    config[section][0][section[:-1]] = inner
    return config


def doubled_users() -> dict[str, Any]:
    config = capi()
    config["users"].append(copy.deepcopy(config["users"][0]))
    return config


def without(section: str, field: str) -> dict[str, Any]:
    config = capi()
    del config[section][0][section[:-1]][field]
    return config


def dump(config: dict[str, Any]) -> bytes:
    return yaml.safe_dump(config).encode()


def refused(data: bytes) -> KubeconfigRefused:
    with pytest.raises(KubeconfigRefused) as caught:
        parse(data, SOURCE)
    return caught.value


# --- accepted -----------------------------------------------------------------------------------


def test_capis_own_kubeconfig_gives_the_server_its_ca_and_the_client_certificate() -> None:
    access = parse(dump(capi()), SOURCE)
    assert access == ClusterAccess(server="https://desk.example.com:6443", ca_pem=CA.cert_pem,
                                   client_certificate_pem=CLIENT.cert_pem,
                                   client_key_pem=CLIENT.key_pem, token=None)


def test_a_token_alone_or_beside_the_client_certificate_is_accepted() -> None:
    config = capi()
    config["users"][0]["user"] = {"token": SENTINEL}
    assert parse(dump(config), SOURCE).token == SENTINEL
    both = parse(dump(with_user(token=SENTINEL)), SOURCE)
    assert both.token == SENTINEL and both.client_key_pem == CLIENT.key_pem


def test_the_secrets_never_show_in_the_parsed_values_repr() -> None:
    access = parse(dump(with_user(token=SENTINEL)), SOURCE)
    shown = repr(access)
    assert "desk.example.com" in shown
    assert SENTINEL not in shown and "PRIVATE KEY" not in shown and "CERTIFICATE" not in shown


def test_only_the_current_contexts_entries_are_read() -> None:
    config = capi()
    config["clusters"].insert(0, {"name": "other", "cluster": {"server": "http://x", "proxy-url": SENTINEL}})
    config["users"].insert(0, {"name": "other", "user": {"exec": {"command": SENTINEL}}})
    config["contexts"].append({"name": "other", "context": {"cluster": "other", "user": "other"}})
    access = parse(dump(config), SOURCE)
    assert access.server == "https://desk.example.com:6443"
    assert (access.cluster_path, access.user_path) == ("clusters[1].cluster", "users[1].user")


def test_insecure_skip_tls_verify_false_says_what_its_absence_says() -> None:
    assert parse(dump(with_cluster(**{"insecure-skip-tls-verify": False})), SOURCE).ca_pem == CA.cert_pem


# --- refused, by field path, never by value -----------------------------------------------------

EXEC = {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/sh",
        "args": ["-c", f"echo {SENTINEL}"], "interactiveMode": "Never"}
GCP = {"name": "gcp", "config": {"cmd-path": f"/bin/echo {SENTINEL}", "cmd-args": SENTINEL}}

REFUSALS: dict[str, tuple[Callable[[], dict[str, Any]], tuple[str, ...]]] = {
    "exec": (lambda: with_user(exec=EXEC), ("users[0].user.exec",)),
    "auth-provider": (lambda: with_user(**{"auth-provider": GCP}), ("users[0].user.auth-provider",)),
    "tokenFile": (lambda: with_user(tokenFile=f"/var/run/{SENTINEL}"), ("users[0].user.tokenFile",)),
    "token-file": (lambda: with_user(**{"token-file": f"/{SENTINEL}"}), ("users[0].user.token-file",)),
    "client file paths": (
        lambda: with_entry("users", {"client-certificate": f"/{SENTINEL}.crt",
                                     "client-key": f"/{SENTINEL}.key"}),
        ("users[0].user.client-certificate", "users[0].user.client-key")),
    "certificate-authority path": (
        lambda: with_cluster(**{"certificate-authority": f"/{SENTINEL}"}),
        ("clusters[0].cluster.certificate-authority",)),
    "proxy-url": (lambda: with_cluster(**{"proxy-url": f"http://{SENTINEL}:3128"}),
                  ("clusters[0].cluster.proxy-url",)),
    "insecure-skip-tls-verify": (lambda: with_cluster(**{"insecure-skip-tls-verify": True}),
                                 ("clusters[0].cluster.insecure-skip-tls-verify",)),
    "tls-server-name": (lambda: with_cluster(**{"tls-server-name": SENTINEL}),
                        ("clusters[0].cluster.tls-server-name",)),
    "basic auth": (lambda: with_user(username=SENTINEL, password=SENTINEL),
                   ("users[0].user.password", "users[0].user.username")),
    "impersonation (not on the allowlist)": (lambda: with_user(**{"as": SENTINEL}),
                                             ("users[0].user.as",)),
    "an unknown cluster field": (lambda: with_cluster(extensions=[{"name": SENTINEL}]),
                                 ("clusters[0].cluster.extensions",)),
    "an unknown context field": (
        lambda: with_entry("contexts", {"cluster": "desk", "user": "desk-admin",
                                        "extensions": SENTINEL}),
        ("contexts[0].context.extensions",)),
    "a field name that is not a name": (lambda: with_user(**{f"{SENTINEL} x": 1}),
                                        ("users[0].user.(a field whose name is not shown)",)),
    "no CA": (lambda: without("clusters", "certificate-authority-data"),
              ("clusters[0].cluster.certificate-authority-data",)),
    "plain http": (lambda: with_cluster(server=f"http://{SENTINEL}.example.com"),
                   ("clusters[0].cluster.server",)),
    "credentials in the URL": (lambda: with_cluster(server=f"https://u:{SENTINEL}@h.example.com"),
                               ("clusters[0].cluster.server",)),
    "not a URL": (lambda: with_cluster(server=f"https://h:{SENTINEL}"), ("clusters[0].cluster.server",)),
    "no server": (lambda: without("clusters", "server"), ("clusters[0].cluster.server",)),
    "a certificate without its key": (lambda: without("users", "client-key-data"),
                                      ("users[0].user.client-key-data",)),
    "no credentials": (lambda: with_entry("users", {}), ("users[0].user",)),
    "a token that would break the header": (lambda: with_user(token=f"{SENTINEL}\r\nX-Evil: 1"),
                                            ("users[0].user.token",)),
    "a CA that is not base64": (lambda: with_cluster(**{"certificate-authority-data": SENTINEL}),
                                ("clusters[0].cluster.certificate-authority-data",)),
    "a CA that is not a certificate": (
        lambda: with_cluster(**{"certificate-authority-data": b64(SENTINEL.encode())}),
        ("clusters[0].cluster.certificate-authority-data",)),
    "a key that is not a key": (lambda: with_user(**{"client-key-data": b64(CLIENT.cert_pem)}),
                                ("users[0].user.client-key-data",)),
    "no current context": (lambda: {k: v for k, v in capi().items() if k != "current-context"},
                           ("current-context",)),
    "a current context that names nothing": (lambda: capi(**{"current-context": SENTINEL}),
                                             ("current-context",)),
    "a user the context does not name": (
        lambda: with_entry("contexts", {"cluster": "desk", "user": SENTINEL}),
        ("contexts[0].context.user",)),
    "two users of one name": (
        doubled_users, ("users[1]",)),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_each_field_fivespot_does_not_accept_is_refused_by_its_path_and_never_by_its_value(
        case: str) -> None:
    make, paths = REFUSALS[case]
    error = refused(dump(make()))
    assert error.fields == paths
    message = str(error)
    assert message.startswith(f"{SOURCE}: the kubeconfig is refused: {paths[0]}: ")
    for path in paths:
        assert path in message
    assert SENTINEL not in message


def test_every_refused_field_is_named_at_once_and_a_long_list_is_counted() -> None:
    config = with_user(exec=EXEC, tokenFile="/x", **{f"f{i}": i for i in range(20)})
    error = refused(dump(config))
    assert len(error.fields) == 22
    assert "users[0].user.exec" in str(error) and "and 14 more" in str(error)


MALFORMED = {
    "a line that does not parse": f"users:\n- name: u\n  user:\n    token: {SENTINEL}: [\n".encode(),
    "an open quote": f'current-context: "{SENTINEL}\n'.encode(),
    "a tab": f"users:\n\t- {SENTINEL}\n".encode(),
    "an undefined alias": f"users: *{SENTINEL}\n".encode(),
    "an unknown tag": f"users: !{SENTINEL} x\n".encode(),
    "an integer tag on text": f"users: !!int {SENTINEL}\n".encode(),
    "not UTF-8": b"users: \xff\xfe" + SENTINEL.encode() + b"\n",
    "too deep": b"a: " + b"[" * 2000 + SENTINEL.encode() + b"]" * 2000 + b"\n",
    "two documents": f"a: 1\n---\nb: {SENTINEL}\n".encode(),
    "not a mapping": f"- {SENTINEL}\n".encode(),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_yaml_is_refused_without_any_of_its_text(case: str) -> None:
    error = refused(MALFORMED[case])
    assert error.fields == ("(document)",)
    assert SENTINEL not in str(error)
    assert SENTINEL[:6] not in str(error)


def test_malformed_yaml_says_where() -> None:
    error = refused(MALFORMED["a line that does not parse"])
    assert "not valid YAML at line 4, column " in str(error)


# --- the client: built from the parsed values alone, nothing left on disk ------------------------


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process's temporary directory, empty, so whatever is left in it shows."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def left_behind(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


def test_a_kubeconfig_with_exec_runs_nothing_and_reports_the_field(private_tmp: Path) -> None:
    marker = private_tmp / "ran"
    config = with_user(exec={**EXEC, "args": ["-c", f"touch {marker}; echo {SENTINEL}"]})
    with pytest.raises(KubeconfigRefused) as caught:
        kube.client_from_kubeconfig(dump(config), source=SOURCE)
    assert not marker.exists()
    assert "users[0].user.exec" in str(caught.value) and SENTINEL not in str(caught.value)


def test_a_kubeconfig_with_insecure_skip_tls_verify_gets_no_client(private_tmp: Path) -> None:
    config = capi()
    config["clusters"][0]["cluster"] = {"server": "https://127.0.0.1:1",
                                        "insecure-skip-tls-verify": True}
    with pytest.raises(KubeconfigRefused) as caught:
        kube.client_from_kubeconfig(dump(config), source=SOURCE)
    assert caught.value.fields == ("clusters[0].cluster.insecure-skip-tls-verify",
                                   "clusters[0].cluster.certificate-authority-data")


def test_the_client_key_is_not_left_on_disk(private_tmp: Path) -> None:
    fresh = issue(CA, CA_KEY, "fresh", NOW, client=True)  # a key no earlier test loaded
    config = with_user(**{"client-certificate-data": b64(fresh.cert_pem),
                          "client-key-data": b64(fresh.key_pem)})
    api = kube.client_from_kubeconfig(dump(config), source=SOURCE)
    api.close()
    assert left_behind(private_tmp) == []


def test_a_key_that_does_not_match_is_refused_and_not_left_on_disk(private_tmp: Path) -> None:
    config = with_user(**{"client-key-data": b64(OTHER_CLIENT.key_pem)})
    with pytest.raises(KubeconfigRefused) as caught:
        kube.client_from_kubeconfig(dump(config), source=SOURCE)
    assert caught.value.fields == ("users[0].user.client-certificate-data and client-key-data",)
    assert left_behind(private_tmp) == []


class _Seen(BaseHTTPRequestHandler):
    requests: list[tuple[str, str | None, dict[str, Any] | None]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        _Seen.requests.append((self.path, self.headers.get("Authorization"), peer))
        body = b'{"kind": "Node", "metadata": {"name": "n"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def mutual_tls_server(tmp_path: Path) -> Iterator[int]:
    """An https server on 127.0.0.1 with a certificate from CA that requires a client certificate
    from CA: a stand-in for the workload cluster's API server."""
    serving: KeyPair = issue(CA, CA_KEY, "apiserver", NOW, ip_addresses=("127.0.0.1",), server=True)
    (tmp_path / "serving.pem").write_bytes(serving.cert_pem + serving.key_pem)
    (tmp_path / "ca.pem").write_bytes(CA.cert_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "serving.pem")
    context.load_verify_locations(tmp_path / "ca.pem")
    context.verify_mode = ssl.CERT_REQUIRED
    _Seen.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Seen)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_the_client_presents_its_certificate_and_token_from_memory_and_trusts_only_the_pinned_ca(
        mutual_tls_server: int, private_tmp: Path) -> None:
    config = with_user(token=SENTINEL)
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{mutual_tls_server}"
    api = kube.client_from_kubeconfig(dump(config), source=SOURCE)
    try:
        assert left_behind(private_tmp) == [], "nothing on disk before the first connection"
        for _ in range(2):  # a second connection too: the key stays loaded
            api.rest_client.pool_manager.clear()
            assert kube.request(api, "GET", "/api/v1/nodes/n")["metadata"]["name"] == "n"
    finally:
        api.close()
    assert [(path, auth) for path, auth, _ in _Seen.requests] == [
        ("/api/v1/nodes/n", f"Bearer {SENTINEL}")] * 2
    subject = dict(x[0] for x in (_Seen.requests[0][2] or {}).get("subject", ()))
    assert subject.get("commonName") == "admin"
    pinned_elsewhere = capi()
    pinned_elsewhere["clusters"][0]["cluster"] = {
        "server": f"https://127.0.0.1:{mutual_tls_server}",
        "certificate-authority-data": b64(OTHER_CA.cert_pem)}
    other = kube.client_from_kubeconfig(dump(pinned_elsewhere), source=SOURCE)
    try:
        with pytest.raises(kube.ApiError) as caught:
            kube.request(other, "GET", "/api/v1/nodes/n", timeout=(2.0, 2.0))
        assert caught.value.status == 0, "the server's certificate is not from the pinned CA"
    finally:
        other.close()
