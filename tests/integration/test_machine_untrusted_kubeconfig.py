"""CAPI's `<cluster>-kubeconfig` Secret is not trusted with the machine controller (issue 36, F1).

Against a real API server, with the machine controller running as its own ServiceAccount: a
ScheduledMachine whose schedule closes makes the controller read its cluster's kubeconfig Secret
to drain the node. Secrets that would make the `kubernetes` client run a command (`exec`, an
auth provider's `cmd-path`), read a local file and send it as a token (`tokenFile`), read file
paths, skip the certificate check or go through a proxy are refused: the command never runs,
the listener standing in for the attacker on 127.0.0.1 gets no connection, the ScheduledMachine
says `NodeDrained=False/KubeconfigRefused` naming the Secret and the field, a Warning event says
the same, and no planted value appears in the status, the event or the controller's log. Inline
credentials (a client certificate, a token) still drain the node.

One control plane plays both parts: the management cluster, and the workload cluster the good
kubeconfigs point at (its own nodes).
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socket import socket
from typing import Any

import pytest
import yaml

from fivespot.devcluster.certs import issue, new_ca
from fivespot.devcluster.clients import admin_client, ensure_service_account, service_account_token
from fivespot.runtime import kube
from tests.integration.capacity_world import eventually, unique
from tests.integration.machine_world import (
    NS,
    World,
    config_with,
    join_node,
    machine_world,
    publish,
    schedule,
)

pytestmark = pytest.mark.integration

SENTINEL = "s3cr3t-SENTINEL-7d1e"
"""Planted in every refused Secret (or the file it points at): it must never come back."""
REFUSED = ("exec", "gcp", "tokenfile", "files", "insecure", "malformed")
GOOD = ("good-cert", "good-token")


# --- the world ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The trading-desk example with one declared CAPI cluster per case (the controller may read
    exactly their `<cluster>-kubeconfig` Secrets), and the machine controller leading."""
    work = tmp_path_factory.mktemp("untrusted-kubeconfig")
    config = config_with(work, "", keep_builtin=True)
    machines = config / "machines.yaml"
    declared = "    - {namespace: trading, name: desk-cluster}\n"
    assert declared in machines.read_text()
    machines.write_text(machines.read_text().replace(declared, declared + "".join(
        f"    - {{namespace: trading, name: {cluster}}}\n" for cluster in REFUSED + GOOD)))
    with machine_world(work, config) as running:
        yield running


@dataclass
class Attacker:
    """An https listener on 127.0.0.1 with a certificate of its own CA: where a hostile
    kubeconfig sends the controller. Every TCP connection and every request is recorded."""

    port: int
    ca_pem: bytes
    connections: list[Any] = field(default_factory=list)
    requests: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


@pytest.fixture
def attacker(tmp_path: Path) -> Iterator[Attacker]:
    now = datetime.datetime.now(datetime.timezone.utc)
    ca, ca_key = new_ca("attacker-ca", now)
    serving = issue(ca, ca_key, "attacker", now, ip_addresses=("127.0.0.1",), server=True)
    (tmp_path / "attacker.pem").write_bytes(serving.cert_pem + serving.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "attacker.pem")
    seen = Attacker(0, ca.cert_pem)

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.requests.append((self.path, self.headers.get("Authorization")))
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_CONNECT = do_POST = do_PATCH = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Listener(ThreadingHTTPServer):
        def get_request(self) -> tuple[socket, Any]:
            raw, address = self.socket.accept()
            seen.connections.append(address)  # counted before any TLS handshake
            return context.wrap_socket(raw, server_side=True), address

    server = Listener(("127.0.0.1", 0), Recorder)
    seen.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any]) -> bytes:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx"}).encode()


def put_secret(world: World, cluster: str, data: bytes) -> None:
    """What CAPI (or whoever can write it) puts in `<cluster>-kubeconfig`, key `value`."""
    kube.request(world.api, "POST", kube.resource_path("", "v1", "secrets", NS), body={
        "metadata": {"name": f"{cluster}-kubeconfig",
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret", "data": {"value": base64.b64encode(data).decode()}})


def close_the_schedule_of_a_machine_with_a_node(world: World, cluster: str,
                                                node_in: Any = None) -> tuple[str, str]:
    """A ScheduledMachine on `cluster`, Active with a node (created in `node_in`, a workload
    cluster client, if given), whose schedule then closes: the drain reads the kubeconfig.
    Returns (its name, its node)."""
    name, sched, node = unique("rack"), unique("ms"), unique("node")
    schedule(world.api, sched, True)
    world.scheduled_machine(name, sched, cluster)
    eventually(lambda: world.machine(name), 60, "the Machine")
    join_node(world.api, node_in, name, node)
    world.wait_phase(name, "Active")
    publish(world.api, sched, False)
    return name, node


def node_drained(world: World, name: str) -> dict[str, Any]:
    """The NodeDrained condition once the drain has read the workload cluster (or tried to)."""
    def read() -> dict[str, Any] | None:
        for found in world.status(name).get("conditions") or []:
            if found["type"] == "NodeDrained" and found["reason"] not in ("GracefulShutdown",
                                                                          "NotDraining"):
                return dict(found)
        return None
    return eventually(read, 60, f"{name}'s drain to read its kubeconfig")


def warnings(world: World, name: str) -> list[dict[str, Any]]:
    events = kube.request(world.api, "GET", kube.resource_path("events.k8s.io", "v1", "events", NS))
    return [e for e in events.get("items") or [] if e.get("type") == "Warning"
            and (e.get("regarding") or {}).get("name") == name]


# --- refused ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    cluster: str
    secret: Callable[[Path, Attacker], bytes]
    """The Secret's kubeconfig, given the test's folder (for a marker or a token file)."""
    fields: tuple[str, ...]


def _exec(tmp: Path, attacker: Attacker) -> bytes:
    credential = json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1",
                             "kind": "ExecCredential", "status": {"token": SENTINEL}})
    return kubeconfig(
        {"server": attacker.url, "certificate-authority-data": base64.b64encode(attacker.ca_pem).decode()},
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/bin/sh",
                  "args": ["-c", f"touch {tmp / 'marker'}; echo '{credential}'"]}})


def _gcp(tmp: Path, attacker: Attacker) -> bytes:
    return kubeconfig(
        {"server": attacker.url, "certificate-authority-data": base64.b64encode(attacker.ca_pem).decode()},
        {"auth-provider": {"name": "gcp", "config": {"cmd-path": "/usr/bin/touch",
                                                     "cmd-args": str(tmp / "marker")}}})


def _token_file(tmp: Path, attacker: Attacker) -> bytes:
    (tmp / "token").write_text(SENTINEL)  # stands in for the controller's ServiceAccount token
    return kubeconfig(
        {"server": attacker.url, "certificate-authority-data": base64.b64encode(attacker.ca_pem).decode()},
        {"tokenFile": str(tmp / "token")})


def _files(tmp: Path, attacker: Attacker) -> bytes:
    now = datetime.datetime.now(datetime.timezone.utc)
    ca, ca_key = new_ca("stolen-ca", now)
    stolen = issue(ca, ca_key, "stolen", now, client=True)
    (tmp / "ca.crt").write_bytes(attacker.ca_pem)
    (tmp / "tls.crt").write_bytes(stolen.cert_pem)
    (tmp / "tls.key").write_bytes(stolen.key_pem)
    return kubeconfig({"server": attacker.url, "certificate-authority": str(tmp / "ca.crt")},
                      {"client-certificate": str(tmp / "tls.crt"), "client-key": str(tmp / "tls.key")})


def _insecure(tmp: Path, attacker: Attacker) -> bytes:
    return kubeconfig({"server": attacker.url, "insecure-skip-tls-verify": True,
                       "proxy-url": f"http://127.0.0.1:{attacker.port}"}, {"token": SENTINEL})


def _malformed(tmp: Path, attacker: Attacker) -> bytes:
    return (f"clusters:\n- name: c\n  cluster:\n    server: {attacker.url}\nusers:\n- name: u\n"
            f"  user:\n    token: {SENTINEL}: [\n").encode()


CASES = {
    "exec": Case("exec", _exec, ("users[0].user.exec",)),
    "auth-provider cmd-path": Case("gcp", _gcp, ("users[0].user.auth-provider",)),
    "tokenFile": Case("tokenfile", _token_file, ("users[0].user.tokenFile",)),
    "file paths": Case("files", _files, ("clusters[0].cluster.certificate-authority",
                                         "clusters[0].cluster.certificate-authority-data",
                                         "users[0].user.client-certificate",
                                         "users[0].user.client-key")),
    "insecure-skip-tls-verify and proxy-url": Case(
        "insecure", _insecure, ("clusters[0].cluster.insecure-skip-tls-verify",
                                "clusters[0].cluster.proxy-url",
                                "clusters[0].cluster.certificate-authority-data")),
    "malformed YAML": Case("malformed", _malformed, ("(document)",)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_kubeconfig_runs_nothing_sends_nothing_and_reports_the_field(
        world: World, attacker: Attacker, tmp_path: Path, case: str) -> None:
    given = CASES[case]
    secret = f"Secret {NS}/{given.cluster}-kubeconfig"
    put_secret(world, given.cluster, given.secret(tmp_path, attacker))
    name, _ = close_the_schedule_of_a_machine_with_a_node(world, given.cluster)
    drained = node_drained(world, name)
    assert not (tmp_path / "marker").exists(), "the kubeconfig's command ran in the controller"
    assert attacker.connections == [] and attacker.requests == [], \
        "the controller connected where the kubeconfig said"
    assert drained["status"] == "False" and drained["reason"] == "KubeconfigRefused", drained
    assert f"{secret}: the kubeconfig is refused: {given.fields[0]}: " in drained["message"]
    for path in given.fields:
        assert path in drained["message"]
    warning = eventually(lambda: [e for e in warnings(world, name)
                                  if e["reason"] == "KubeconfigRefused"], 30, "the Warning")[0]
    assert secret in warning["note"] and given.fields[0] in warning["note"]
    assert world.status(name)["phase"] == "ShuttingDown"
    assert (world.machine(name) or {}).get("metadata", {}).get("deletionTimestamp") is None, \
        "the Machine waits for nodeDrainTimeout, as for an unreachable cluster"
    planted = (SENTINEL, str(tmp_path))
    shown = json.dumps(world.status(name)) + json.dumps(warnings(world, name))
    log = world.controller.log_file.read_text()
    for value in planted:
        assert value not in shown, f"{value} in the status or an event"
        assert value not in log, f"{value} in the controller's log"


# --- still drained with inline credentials -------------------------------------------------------


def _good_cert(world: World) -> bytes:
    """The control plane's admin kubeconfig, as CAPI writes one: inline CA, certificate, key."""
    return world.kubeconfig.read_bytes()


def _good_token(world: World) -> bytes:
    """An inline ServiceAccount token allowed to drain (cluster-admin in this workload)."""
    ensure_service_account(world.api, "default", "drainer")
    kube.request(world.api, "POST", kube.resource_path(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings"), body={
            "metadata": {"name": unique("drainer")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "drainer", "namespace": "default"}]})
    admin = yaml.safe_load(world.kubeconfig.read_text())
    return kubeconfig(admin["clusters"][0]["cluster"],
                      {"token": service_account_token(world.api, "default", "drainer")})


@pytest.mark.parametrize("cluster,secret", [("good-cert", _good_cert), ("good-token", _good_token)])
def test_inline_credentials_still_drain_the_node_and_the_machine_leaves(
        world: World, cluster: str, secret: Callable[[World], bytes]) -> None:
    put_secret(world, cluster, secret(world))
    workload = admin_client(world.kubeconfig)
    try:
        name, node = close_the_schedule_of_a_machine_with_a_node(world, cluster, workload)
        world.wait_phase(name, "Inactive")
        drained = next(c for c in world.status(name)["conditions"] if c["type"] == "NodeDrained")
        assert (drained["status"], drained["reason"]) == ("True", "Drained"), drained
        cordoned = kube.request(workload, "GET", kube.resource_path("", "v1", "nodes", None, node))
        assert cordoned["spec"].get("unschedulable") is True
        assert any(t["key"] == "5spot.finos.org/shutting-down" for t in cordoned["spec"]["taints"])
        assert world.machine(name) is None
        assert not [e for e in warnings(world, name) if e["reason"] == "KubeconfigRefused"]
    finally:
        workload.close()
