"""The compiled example applied in wave order on the real control plane, the way Argo CD or Flux
would, with the webhook started only when its wave comes: no ScheduledCapacity write is refused
at any point.

A writer tries a ScheduledCapacity create (server-side dry run, so admission and every webhook run
but nothing is stored) every 50 ms from the moment a tenant could first write one — the CRDs
established and the tenant namespace created (the rbac wave) — to the end, and also once after
each of those waves. The webhook process (run locally as its own ServiceAccount, its compiled
configuration pointed at it by URL, as in test_webhook_admission) starts after the workloads
wave — where its Deployment would become ready — with the default certificate-check interval, so
it must notice on its own that its configuration has arrived. Each wave waits for what Argo CD
and Flux wait for: the webhook wave until the emitted health (the Lua, and the Flux CEL) reads
every caBundle as injected.

Stages: the staged rollout the docs document (docs/how-to/webhook-rollout.md) — first `failurePolicy: Ignore`, then `Fail` (an
upgrade, re-applying every wave over the first) — with the continuous writer; then a first
install straight to Fail, with a create after each healthy wave.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from fivespot.compiler.emit import health
from fivespot.compiler.emit.webhook import TARGET_GUARD
from fivespot.compiler.output import write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.devcluster.clients import service_account_kubeconfig
from fivespot.devcluster.kubectl import install
from fivespot.policies.cel.engine import compile_expression
from tests.integration.test_control_plane_is_real import eventually
from tests.integration.test_webhook_admission import (
    CONFIGURATION,
    EXAMPLE,
    INSTALL_NS,
    ROOT,
    SCAP,
    TENANT,
    Server,
    _rewrite_to_local_url,
    free_port,
    ready,
    scap,
)
from tests.unit.test_health_lua import argo_health

pytestmark = pytest.mark.integration

CONSUMER_CRD: Final = EXAMPLE / "consumer" / "virtualmachinepools.yaml"
SYNC_WAVE_DELAY_S: Final = 2.0
"""Argo CD's pause between a healthy wave and the next (ARGOCD_SYNC_WAVE_DELAY, 2 s by default):
what follows the webhook wave starts no sooner, and by then the API server's admission plugin has
the configuration with the injected caBundle that the health check read (it learns of the
injection through its informer, a moment after the write)."""


@dataclass
class Writer:
    """Tries a ScheduledCapacity create every `period_s` and remembers every refusal."""

    objects: client.CustomObjectsApi
    period_s: float = 0.05
    attempts: int = 0
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    wave: str = "rbac"
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def once(self) -> str | None:
        self.attempts += 1
        try:
            self.objects.create_namespaced_custom_object(
                *SCAP[:2], TENANT, SCAP[2], scap(f"probe-{uuid.uuid4().hex[:8]}"), dry_run="All")
        except ApiException as error:
            message = str(json.loads(error.body).get("message", error.body)) if error.body else str(error)
            self.refused.append((self.wave, error.status, message[:300]))
            return message
        return None

    def start(self) -> "Writer":
        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.once()
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def _compile(work: Path, failure_policy: str) -> Path:
    config = work / f"config-{failure_policy}"
    shutil.copytree(EXAMPLE / "config", config)
    platform = yaml.safe_load((config / "platform.yaml").read_text())
    platform["spec"]["webhook"]["failurePolicy"] = failure_policy
    (config / "platform.yaml").write_text(yaml.safe_dump(platform))
    out = work / f"out-{failure_policy}"
    write_tree(compile_repo(config).files, out)
    return out


def _configuration(admin: client.ApiClient) -> dict[str, Any] | None:
    try:
        found = client.AdmissionregistrationV1Api(admin).read_validating_webhook_configuration(CONFIGURATION)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(admin.sanitize_for_serialization(found))


def _healthy(admin: client.ApiClient) -> bool | None:
    """What Argo CD (the emitted Lua) and Flux (the emitted CEL) wait for on the webhook wave."""
    configuration = _configuration(admin)
    if configuration is None:
        return None
    lua, _ = argo_health(health.WEBHOOK_CONFIGURATION_LUA, configuration)
    flux = compile_expression(health.WEBHOOK_CONFIGURATION_CURRENT, ["webhooks"]).evaluate(
        {"webhooks": configuration["webhooks"]})
    assert (lua == "Healthy") == flux, (lua, flux)
    return True if flux else None


class Rollout:
    """Applies one compiled output wave by wave, starting the webhook when its wave comes."""

    def __init__(self, kubeconfig: Path, admin: client.ApiClient, work: Path, port: int,
                 writer: Writer | None, servers: list[Server]) -> None:
        self.kubeconfig, self.admin, self.work, self.port = kubeconfig, admin, work, port
        self.writer, self.servers = writer, servers
        self.probes: dict[str, str | None] = {}

    def _start_webhook(self, out: Path) -> None:
        if self.servers and self.servers[-1].process.poll() is None:
            return
        identity = service_account_kubeconfig(self.kubeconfig, INSTALL_NS, "fivespot-webhook",
                                              self.work / "webhook.kubeconfig")
        log = self.work / f"webhook-{len(self.servers)}.log"
        command = [sys.executable, "-m", "fivespot.webhook", "serve", "--port", str(self.port), "--bind",
                   "127.0.0.1", "--metrics-port", "0", "--bundle", str(out / "bundle.json"),
                   "--kubeconfig", str(identity), "--tls-san", "127.0.0.1", "--workers", "1"]
        with log.open("wb") as handle:
            process = subprocess.Popen(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.servers.append(Server(process, self.port, log))
        eventually(lambda: ready(self.port), timeout_s=90)

    def after(self, out: Path, layer: str) -> None:
        if layer == "workloads":
            self._start_webhook(out)  # its Deployment is ready: the wave is healthy
        if layer == "webhook":
            eventually(lambda: _healthy(self.admin), timeout_s=60)
            time.sleep(SYNC_WAVE_DELAY_S)
        if self.writer is not None and layer != "crds":  # no tenant namespace before rbac
            self.probes[layer] = self.writer.once()
            self.writer.wave = layer

    def apply(self, out: Path) -> None:
        _rewrite_to_local_url(out, self.port)
        install(self.kubeconfig, out, [CONSUMER_CRD], after_layer=lambda layer: self.after(out, layer))


@pytest.fixture
def servers(admin: client.ApiClient) -> Iterator[list[Server]]:
    started: list[Server] = []
    _delete_configuration(admin)
    yield started
    for server in started:
        server.stop()
    _delete_configuration(admin)


def _delete_configuration(admin: client.ApiClient) -> None:
    try:
        client.AdmissionregistrationV1Api(admin).delete_validating_webhook_configuration(CONFIGURATION)
    except ApiException as error:
        if error.status != 404:
            raise
    eventually(lambda: _configuration(admin) is None or None, timeout_s=30)


def test_the_staged_rollout_applied_wave_by_wave_refuses_no_write_at_any_point(
        kubeconfig: Path, admin: client.ApiClient, tmp_path: Path, servers: list[Server]) -> None:
    objects = client.CustomObjectsApi(admin)
    writer = Writer(objects)
    port = free_port()
    ignore, fail = _compile(tmp_path, "Ignore"), _compile(tmp_path, "Fail")
    rollout = Rollout(kubeconfig, admin, tmp_path, port, writer, servers)
    started = False

    def start_writer_once_a_tenant_could_write(out: Path, layer: str) -> None:
        nonlocal started
        rollout.after(out, layer)
        if layer == "rbac" and not started:
            writer.start()
            started = True

    try:
        for out in (ignore, fail):
            _rewrite_to_local_url(out, port)
            install(kubeconfig, out, [CONSUMER_CRD],
                    after_layer=functools.partial(start_writer_once_a_tenant_could_write, out))
            configuration = _configuration(admin)
            assert configuration is not None
            policy = "Ignore" if out == ignore else "Fail"
            # The target guard fails closed at every step (it sees only the capacity
            # controller's own writes); the others follow the rollout's step.
            assert {h["name"]: h["failurePolicy"] for h in configuration["webhooks"]} == {
                h["name"]: "Fail" if h["name"] == TARGET_GUARD else policy
                for h in configuration["webhooks"]}
            assert all(h["clientConfig"].get("caBundle") for h in configuration["webhooks"]), \
                "re-applying the configuration must not drop the injected caBundle"
        time.sleep(1.0)
    except BaseException:
        for server in servers:
            print(server.output())
        raise
    finally:
        writer.stop()
    assert writer.attempts > 50
    assert writer.refused == [], writer.refused[:5]
    assert set(rollout.probes) == {"rbac", "admission", "workloads", "webhook", "schedules"}


def test_a_first_install_straight_to_fail_refuses_no_write_after_any_healthy_wave(
        kubeconfig: Path, admin: client.ApiClient, tmp_path: Path, servers: list[Server]) -> None:
    objects = client.CustomObjectsApi(admin)
    writer = Writer(objects)
    rollout = Rollout(kubeconfig, admin, tmp_path, free_port(), writer, servers)
    try:
        rollout.apply(_compile(tmp_path, "Fail"))
    except BaseException:
        for server in servers:
            print(server.output())
        raise
    assert rollout.probes == {layer: None for layer in
                              ("rbac", "admission", "workloads", "webhook", "schedules")}
    assert writer.refused == []
    # ...and the webhook really is in the path, failing closed: without it the same write is refused.
    configuration = _configuration(admin)
    assert configuration is not None and all(h["failurePolicy"] == "Fail" for h in configuration["webhooks"])
    servers[-1].stop()
    refused = writer.once()
    assert refused is not None and "failed calling webhook" in refused, refused
