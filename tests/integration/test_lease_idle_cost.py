"""What a partition lease costs, against the real API server (decisions 0034 and 0043).

A lone holder writes the long solo lease and renews it at a third of it; a standby announces
itself and the holder, which watches its lease, switches to the short lease at once, so a crash
of the holder is taken over within the short lease duration. A lone holder with nothing to write
rests: it releases the lease, writes nothing while idle, and takes the lease again before its
next write; a replica that takes the free lease meanwhile ends the rest. The elector here is the
one every controller runs (`fivespot.runtime.leaderelection.LeaderElector`), with short timings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from kubernetes import client, config

from fivespot.runtime import kube
from fivespot.runtime.leaderelection import LEASE_GROUP, LEASE_VERSION, STANDBY, LeaderElector, Timing
from tests.integration.capacity_world import eventually, unique

TIMING = Timing(lease_duration_s=4.0, renew_deadline_s=3.0, retry_period_s=1.0, poll_s=0.25,
                solo_lease_duration_s=12.0, idle_release_s=None)
RESTING = replace(TIMING, idle_release_s=2.0, retake_ahead_s=1.0)


def lease(admin: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kube.request(admin, "GET", kube.resource_path(
            LEASE_GROUP, LEASE_VERSION, "leases", namespace, name))
        return found
    except kube.ApiError as error:
        if error.not_found:
            return None
        raise


def elector(api: client.ApiClient, namespace: str, name: str, identity: str,
            timing: Timing = TIMING) -> LeaderElector:
    return LeaderElector(api, namespace, {"p": name}, identity, timing=timing,
                         controller=unique("lease-cost"))


class CountingClient(client.ApiClient):  # type: ignore[misc]
    """Counts the GETs and the writes of one Lease (a watch lists and watches the collection,
    not counted)."""

    def __init__(self, configuration: client.Configuration, lease_name: str) -> None:
        super().__init__(configuration)
        self.name, self.gets, self.writes = lease_name, 0, 0
        # at the connection pool, where `fivespot.runtime.kube` sends every request
        self._send = self.rest_client.pool_manager.urlopen
        self.rest_client.pool_manager.urlopen = self.urlopen

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        path = url.split("?")[0]
        if method == "GET" and path.endswith(f"/leases/{self.name}"):
            self.gets += 1
        if (method == "PUT" and path.endswith(f"/leases/{self.name}")) or (
                method == "POST" and path.endswith("/leases")):
            self.writes += 1
        return self._send(method, url, *args, **kwargs)


def counting_client(kubeconfig: Path, lease_name: str) -> CountingClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return CountingClient(configuration, lease_name)


def test_a_lone_holder_writes_the_solo_lease_and_renews_it_a_third_as_often(
    admin: client.ApiClient, namespace: str
) -> None:
    name = unique("lease")
    alone = elector(admin, namespace, name, unique("alone"))
    alone.start()
    try:
        eventually(lambda: alone.is_leading("p"), 20, "the lone replica leads")
        first = lease(admin, namespace, name)
        assert first is not None and first["spec"]["leaseDurationSeconds"] == 12
        renewals = set()
        watched_until = time.monotonic() + 10.0
        while time.monotonic() < watched_until:
            current = lease(admin, namespace, name)
            assert current is not None
            renewals.add(current["spec"]["renewTime"])
            time.sleep(0.2)
        # a 12 s solo lease is renewed every 4 s: 2 or 3 renewals seen in 10 s (a 4 s lease
        # renewed as before, every retry period of 1 s, would show 10)
        assert 2 <= len(renewals) <= 4, sorted(renewals)
        assert alone.is_leading("p")
    finally:
        alone.stop()


def test_a_standby_is_heard_at_once_reads_nothing_while_it_waits_and_replaces_a_crashed_holder(
    kubeconfig: Path, admin: client.ApiClient, namespace: str
) -> None:
    name = unique("lease")
    holder = elector(admin, namespace, name, unique("holder"))
    holder.start()
    standby_api = counting_client(kubeconfig, name)
    standby = elector(standby_api, namespace, name, unique("standby"))
    try:
        eventually(lambda: holder.is_leading("p"), 20, "the first replica leads")
        eventually(lambda: (l := lease(admin, namespace, name)) and l["spec"]["leaseDurationSeconds"] == 12,
                   10, "a solo lease")
        standby.start()
        announced = eventually(lambda: (l := lease(admin, namespace, name))
                               and STANDBY in (l["metadata"].get("annotations") or {}) and time.monotonic(),
                               10, "the standby announces itself")
        short = eventually(lambda: (l := lease(admin, namespace, name))
                           and l["spec"]["leaseDurationSeconds"] == 4 and time.monotonic(),
                           10, "the holder switches to the short lease")
        # heard through the holder's watch, not at its next solo renewal (4 s away at most)
        assert short - announced < 2.0, f"switched {short - announced:.2f} s after the announcement"
        assert holder.is_leading("p") and not standby.is_leading("p")
        # the holder renews its short lease every 4/3 s; the standby sees each renewal through
        # its watch and reads the Lease only to acquire it (it polled every 0.25 s before)
        time.sleep(1.0)
        gets = standby_api.gets
        time.sleep(8.0)
        assert standby_api.gets - gets <= 2, f"{standby_api.gets - gets} GETs in 8 s"
        assert holder.is_leading("p") and not standby.is_leading("p")
        crashed = time.monotonic()
        holder.stop(release=False)  # no release: the standby must wait the lease out
        eventually(lambda: standby.is_leading("p"), 15, "the standby takes over")
        took = time.monotonic() - crashed
        assert took <= TIMING.lease_duration_s + 2.0, f"took over {took:.2f} s after the crash"
    finally:
        holder.stop()
        standby.stop()


def holder(admin: client.ApiClient, namespace: str, name: str) -> str | None:
    found = lease(admin, namespace, name)
    return (found or {}).get("spec", {}).get("holderIdentity") or None


@contextmanager
def resting_alone(kubeconfig: Path, admin: client.ApiClient,
                  namespace: str) -> Iterator[tuple[str, "CountingClient", LeaderElector]]:
    """A lone replica that took its lease and, idle, released it again: (lease name, its
    counting client, its elector), stopped when the block ends."""
    name = unique("lease")
    api = counting_client(kubeconfig, name)
    alone = elector(api, namespace, name, unique("alone"), RESTING)
    alone.start()
    try:
        eventually(lambda: holder(admin, namespace, name) == alone.identity, 20, "the lone replica leads")
        eventually(lambda: holder(admin, namespace, name) is None, 10, "the idle holder releases")
        yield name, api, alone
    finally:
        alone.stop()


def test_a_lone_holder_rests_writes_nothing_while_idle_and_takes_the_lease_again_for_a_write(
    kubeconfig: Path, admin: client.ApiClient, namespace: str
) -> None:
    with resting_alone(kubeconfig, admin, namespace) as (name, api, alone):
        assert alone.is_leading("p"), "it leads on at rest"
        version = (lease(admin, namespace, name) or {})["metadata"]["resourceVersion"]
        writes = api.writes
        time.sleep(10.0)  # five idle releases, more than two solo renewals of 4 s
        assert api.writes == writes, f"{api.writes - writes} lease writes while idle"
        assert (lease(admin, namespace, name) or {})["metadata"]["resourceVersion"] == version
        assert alone.is_leading("p")
        with alone.writing("p") as may:
            assert may
            assert holder(admin, namespace, name) == alone.identity, "taken again before the write"
            time.sleep(6.0)  # a slow write: not released under it
            assert holder(admin, namespace, name) == alone.identity
        assert api.writes == writes + 1 + 1, "the retake, then one solo renewal during the write"
        eventually(lambda: holder(admin, namespace, name) is None, 10, "released again once idle")


def test_a_resting_holder_told_a_write_is_due_takes_its_lease_back_before_it(
    kubeconfig: Path, admin: client.ApiClient, namespace: str
) -> None:
    with resting_alone(kubeconfig, admin, namespace) as (name, api, alone):
        writes = api.writes
        due = datetime.now(timezone.utc) + timedelta(seconds=4)
        alone.expect_write("p", due)
        time.sleep(4 - RESTING.retake_ahead_s - 0.5)
        assert holder(admin, namespace, name) is None and api.writes == writes, "at rest until shortly before"
        eventually(lambda: holder(admin, namespace, name) == alone.identity, 2,
                   "taken back ahead of the due write")
        assert datetime.now(timezone.utc) < due
        with alone.writing("p") as may:
            assert may and api.writes == writes + 1, "the due write waits for no lease write"
        eventually(lambda: holder(admin, namespace, name) is None, 10, "released again once idle")


def test_a_replica_that_takes_a_resting_lease_leads_and_the_rester_stops_without_writing(
    admin: client.ApiClient, namespace: str
) -> None:
    name = unique("lease")
    first = elector(admin, namespace, name, unique("first"), RESTING)
    first.start()
    second = elector(admin, namespace, name, unique("second"), RESTING)
    try:
        eventually(lambda: holder(admin, namespace, name) == first.identity, 20, "the first leads")
        eventually(lambda: holder(admin, namespace, name) is None, 10, "the first rests")
        second.start()
        eventually(lambda: holder(admin, namespace, name) == second.identity, 10,
                   "the second takes the free lease at once")
        eventually(lambda: not first.is_leading("p"), 5, "the first hears it and stops leading")
        with first.writing("p") as may:
            assert not may, "the first sends nothing"
        assert holder(admin, namespace, name) == second.identity
        assert second.is_leading("p")
    finally:
        first.stop()
        second.stop()
