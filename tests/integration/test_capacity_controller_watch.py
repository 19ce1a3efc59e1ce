"""The runtime's informer against the real API server, including the failure kopf users hit: a
watch connection that goes silent without closing. A TCP proxy between the informer and the API
server freezes (keeps the sockets open, forwards nothing); the informer must notice within its
stall threshold, fail its health check, count the stall, restart the watch on a new connection,
and deliver what changed meanwhile. A resourceVersion the server has forgotten (410) relists."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from prometheus_client import REGISTRY

from fivespot.runtime import kube
from fivespot.runtime.informer import Informer
from tests.integration.capacity_world import eventually


class FreezingProxy:
    """Forwards TCP to `target`. `freeze()` stops forwarding on the connections open now (no
    FIN); `freeze(partition=True)` also holds every new connection until `thaw()`, a network
    partition that keeps a restarted watch from proving life until it ends."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.generation = 0
        self.partitioned = False
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self, partition: bool = False) -> None:
        """Every connection open now stops forwarding; new ones work unless `partition`."""
        self.partitioned = partition
        self.generation += 1

    def thaw(self) -> None:
        """New connections (and those opened during the partition) forward again."""
        self.partitioned = False

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            born = self.generation
            threading.Thread(target=self._pump, args=(downstream, upstream, born), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket, born: int) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([a, b], [], [], 0.2)
                if self.generation != born or self.partitioned:
                    time.sleep(0.2)  # frozen: hold both sockets open, forward nothing
                    continue
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (b if sock is a else a).sendall(data)
        except OSError:
            return
        finally:
            a.close()
            b.close()

    def close(self) -> None:
        self._stop.set()
        self.listener.close()


@pytest.fixture
def proxied(admin: client.ApiClient) -> Iterator[tuple[client.ApiClient, FreezingProxy]]:
    host = admin.configuration.host.removeprefix("https://")
    server, port = host.rsplit(":", 1)
    proxy = FreezingProxy((server, int(port)))
    configuration = client.Configuration()
    for field in ("ssl_ca_cert", "cert_file", "key_file", "verify_ssl"):
        setattr(configuration, field, getattr(admin.configuration, field))
    configuration.host = f"https://127.0.0.1:{proxy.port}"
    api = client.ApiClient(configuration)
    yield api, proxy
    api.close()
    proxy.close()


def _metric(name: str, resource: str, **labels: str) -> float:
    value = REGISTRY.get_sample_value(name, {"resource": resource, **labels})
    return value or 0.0


def _configmap(admin: client.ApiClient, namespace: str, name: str) -> None:
    kube.request(admin, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
                 body={"metadata": {"name": name}, "data": {"k": "v"}})


def test_a_silently_stalled_watch_is_detected_reported_and_restarted_and_nothing_is_lost(
    admin: client.ApiClient, namespace: str, proxied: tuple[client.ApiClient, FreezingProxy]
) -> None:
    api, proxy = proxied
    seen: list[str] = []
    # The server sends a bookmark 2 s before a watch's timeout and then closes it, so with a
    # 4-5 s timeout a healthy quiet watch shows life at least every ~3 s plus a reconnect: well
    # below the 8 s threshold even when a loaded machine makes the reconnect slow.
    informer = Informer(api, "", "v1", "configmaps", namespace, resync_s=0, stall_after_s=8.0,
                        watch_timeout_s=4)
    informer.add_handler(lambda event, obj, old: seen.append(f"{event} {obj['metadata']['name']}"))
    stalls_before = _metric("fivespot_watch_stalls_total", "configmaps")
    informer.start()
    try:
        assert informer.wait_synced(30)
        _configmap(admin, namespace, "before")
        eventually(lambda: "ADDED before" in seen, 30, "the first event")
        proxy.freeze(partition=True)
        _configmap(admin, namespace, "during")  # sent on the frozen connection: never arrives there
        eventually(lambda: not informer.healthy(), 30, "the stall to fail the health check")
        eventually(lambda: _metric("fivespot_watch_stalls_total", "configmaps") > stalls_before, 30,
                   "the stall counter")
        assert "ADDED during" not in seen
        assert not informer.healthy(), "a stall is reported until a restarted watch proves life"
        proxy.thaw()
        eventually(lambda: "ADDED during" in seen, 60, "the change made during the stall")
        eventually(informer.healthy, 30, "health after the watch restarted")
        time.sleep(12)  # more than one 4-5 s watch, each closed by the server and reconnected
        assert informer.healthy(), "a quiet but live watch stays healthy (bookmarks, reconnects)"
    finally:
        informer.stop()

