"""A deposed leader's write lands after the new leader's, and is refused: for each controller.

Replica A runs in this process on a client that can hold a request on its way (a write sent,
not yet at the API server: a slow network, a paused process) and fail its lease renewals. A
decides a write and sends it; the write is held; A's renewals fail, so A stops leading, and
replica B (its own process) takes the Lease and writes the same object; then A's write is
released and reaches the API server. Every write is conditional on the resourceVersion its
decision read (`fivespot.runtime.manager`), so A's late write gets 409 and B's value stays — what the
leader election guarantee now rests on, instead of how long a write may take.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from fivespot.api.bundle import load_bundle
from fivespot.controllers.capacity.controller import capacity_manager
from fivespot.controllers.spotschedules.controller import PROVIDER_TYPES
from fivespot.controllers.spotschedules.managers import provider_manager
from fivespot.devcluster import localrun
from fivespot.devcluster.clients import service_account_kubeconfig
from fivespot.runtime import kube
from fivespot.runtime.manager import Manager, Settings
from fivespot.runtime.partitions import Partitions
from tests.integration.capacity_world import (
    FAST_LEASES,
    FAST_TIMING,
    MANUAL,
    ControllerProcess,
    World,
    eventually,
    path,
    unique,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TIMING = FAST_TIMING
NS = "agents"


@dataclass
class Hold:
    """Requests matching `method` and `url_part` wait until `release` is set; their answers are
    recorded."""

    method: str
    url_part: str
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    answers: list[int] = field(default_factory=list)


class HoldingClient(client.ApiClient):  # type: ignore[misc]
    """An ApiClient whose chosen requests can be held on their way, and whose Lease writes can
    be made to fail (the API server unreachable for renewals): at its connection pool, where
    `fivespot.runtime.kube` sends every request."""

    def __init__(self, configuration: client.Configuration) -> None:
        super().__init__(configuration)
        self.holds: list[Hold] = []
        self.leases_fail = threading.Event()
        self._send = self.rest_client.pool_manager.urlopen
        self.rest_client.pool_manager.urlopen = self.urlopen

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self.leases_fail.is_set() and "/leases" in url and method in ("PUT", "POST"):
            raise ConnectionError("renewals cut off (test)")
        hold = next((h for h in self.holds if h.method == method and h.url_part in url
                     and not h.arrived.is_set()), None)
        if hold is None:
            return self._send(method, url, *args, **kwargs)
        hold.arrived.set()
        hold.release.wait(120)
        answer = self._send(method, url, *args, **kwargs)
        hold.answers.append(int(answer.status))
        return answer


def holding_client(kubeconfig: Path) -> HoldingClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return HoldingClient(configuration)


@contextmanager
def replica(mgr: Manager) -> Iterator[Manager]:
    stop = threading.Event()
    assert mgr.start(stop, sync_timeout_s=30)
    try:
        yield mgr
    finally:
        stop.set()
        mgr.stop()


def lease_holder(admin: client.ApiClient, lease: str) -> str | None:
    found = kube.request(admin, "GET", kube.resource_path(
        "coordination.k8s.io", "v1", "leases", localrun.INSTALL_NAMESPACE, lease))
    holder = (found.get("spec") or {}).get("holderIdentity")
    return str(holder) if holder else None


def deposed(admin: client.ApiClient, a: Manager, held: Hold, start_b: Callable[[], object],
            b_identity: str, partition: str) -> None:
    """A's write is on its way and held; A's renewals fail; B takes the partition's Lease."""
    eventually(held.arrived.is_set, 30, "A's write sent (and held)")
    api = a.api
    assert isinstance(api, HoldingClient)
    api.leases_fail.set()
    eventually(lambda: not a.elector.is_leading(partition), 30, "A no longer leading")
    start_b()
    eventually(lambda: lease_holder(admin, f"{a.component}-{partition}") == b_identity, 60,
               "B holding the Lease")


def test_a_deposed_capacity_leaders_target_write_landing_late_is_refused(
        kubeconfig: Path, admin: client.ApiClient, tmp_path: Path) -> None:
    bundle_path = localrun.compile_and_install(kubeconfig, tmp_path / "out")
    bundle = load_bundle(bundle_path)
    sa = localrun.controller_kubeconfig(kubeconfig, tmp_path / "sa.kubeconfig")
    world = World(admin)
    pool, sched = unique("pool"), unique("ms")
    world.pool(pool)
    world.schedule(sched, False)
    world.scap(unique("cap"), sched, pool, 7)
    api = holding_client(sa)
    held = Hold("PATCH", f"/virtualmachinepools/{pool}")
    api.holds.append(held)
    settings = Settings(bundle=bundle, identity=unique("a"), namespace=bundle.namespace,
                        partitions=Partitions.from_bundle(bundle).only(["agents"]), timing=TIMING)
    b = ControllerProcess(sa, bundle_path, unique("b"), tmp_path / "b.log", partitions=("agents",),
                          extra=FAST_LEASES)
    with replica(capacity_manager(api, settings)) as a:
        eventually(lambda: a.elector.is_leading("agents"), 60, "A leading agents")
        world.set_active(sched, True)  # A decides to write 7; the write is held on its way
        try:
            deposed(admin, a, held, b.start, b.identity, "agents")
            eventually(lambda: world.warm(pool) == 7, 30, "B wrote the active value")
            world.set_active(sched, False)  # B hands back: 0
            eventually(lambda: world.warm(pool) == 0, 30, "B wrote 0")
            held.release.set()  # A's write of 7, decided on the target before B's writes, lands
            eventually(lambda: held.answers, 30, "A's late write answered")
            assert held.answers == [409], "refused: the target changed since A decided"
            assert world.warm(pool) == 0, "B's value stands"
        finally:
            held.release.set()
            b.terminate()


def test_a_deposed_providers_status_write_landing_late_is_refused(
        kubeconfig: Path, admin: client.ApiClient, tmp_path: Path) -> None:
    bundle_path = localrun.compile_and_install(kubeconfig, tmp_path / "out")
    bundle = load_bundle(bundle_path)
    provider = PROVIDER_TYPES["manual"]
    sa = service_account_kubeconfig(kubeconfig, localrun.INSTALL_NAMESPACE, provider.component,
                                    tmp_path / "provider.kubeconfig")
    sched = unique("ms")
    api = holding_client(sa)
    held = Hold("PATCH", f"/manualschedules/{sched}/status")
    api.holds.append(held)
    settings = Settings(bundle=bundle, identity=unique("a"), namespace=bundle.namespace,
                        partitions=Partitions.from_bundle(bundle).only(["agents"]), timing=TIMING,
                        workers=2)
    b_identity = unique("b")
    b: list[subprocess.Popen[bytes]] = []

    def start_b() -> None:
        with open(tmp_path / "b.log", "ab") as log:
            b.append(subprocess.Popen(
                [sys.executable, "-m", "fivespot.controllers.spotschedules", "manual", "--bundle", str(bundle_path),
                 "--kubeconfig", str(sa), "--identity", b_identity, "--metrics-port", "0",
                 "--partitions", "agents", *FAST_LEASES], stdout=log, stderr=subprocess.STDOUT,
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True))
    mgr, _ = provider_manager(api, provider, settings)
    with replica(mgr) as a:
        eventually(lambda: a.elector.is_leading("agents"), 60, "A leading agents")
        kube.request(admin, "POST", path(MANUAL, ns=NS), body={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
            "metadata": {"name": sched}, "spec": {"enabled": True}})  # A publishes active: held
        try:
            deposed(admin, a, held, start_b, b_identity, "agents")

            def status() -> dict[str, Any]:
                return dict(kube.request(admin, "GET", path(MANUAL, sched, ns=NS)).get("status") or {})

            eventually(lambda: status().get("active") is True, 30, "B published active")
            kube.merge_patch(admin, path(MANUAL, sched, ns=NS), {"spec": {"enabled": False}})
            eventually(lambda: status().get("active") is False, 30, "B published inactive")
            held.release.set()
            eventually(lambda: held.answers, 30, "A's late write answered")
            assert held.answers == [409]
            assert status()["active"] is False, "B's status stands"
        finally:
            held.release.set()
            for process in b:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(15)


def test_a_deposed_machine_leaders_status_write_landing_late_is_refused(tmp_path: Path) -> None:
    from fivespot.controllers.machine.controller import machine_manager
    from tests.integration.machine_world import NS as TRADING, SM, config_with, machine_world

    with machine_world(tmp_path, config_with(tmp_path, "", keep_builtin=True), leading=False) as world:
        bundle = load_bundle(world.out / "bundle.json")
        name = unique("rack")
        api = holding_client(world.identity)
        held = Hold("PATCH", f"/scheduledmachines/{name}/status")
        api.holds.append(held)
        settings = Settings(bundle=bundle, identity=unique("a"), namespace=bundle.namespace,
                            partitions=Partitions.from_bundle(bundle), timing=TIMING)
        b = world.controller
        with replica(machine_manager(api, settings)) as a:
            eventually(lambda: a.elector.is_leading("default"), 60, "A leading")
            world.scheduled_machine(name, "never-published")
            try:
                deposed(world.api, a, held, b.start, b.identity, "default")
                world.wait_phase(name, "Inactive")
                kube.merge_patch(world.api, kube.resource_path(*SM, namespace=TRADING, name=name),
                                 {"spec": {"enabled": False}})
                disabled = world.wait_phase(name, "Disabled")
                held.release.set()
                eventually(lambda: held.answers, 30, "A's late write answered")
                assert held.answers == [409], "refused: the object changed since A decided"
                assert world.status(name) == disabled, "B's status stands"
            finally:
                held.release.set()
