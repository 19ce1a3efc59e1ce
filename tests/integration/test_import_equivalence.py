"""`fivespot import`'s output flips the same Deployments at the same minutes as the peer it was
imported from, checked by running both on one local control plane (issue 39's acceptance).

The real kube-green and GoKubeDownscaler (built from the Go module proxy, pinned, cached:
`fivespot.devcluster.peers`, as `make bench-peers` runs them) act on their own objects in their own
namespaces (`*-peer`); fivespot runs as `fivespot dev` runs it on the config `fivespot import`
wrote from the same objects, with the imported tenant objects applied, on a twin set of
Deployments (`*-fivespot`). "The same week" is compressed to the boundaries that matter: each
peer sleeps at a whole minute a minute or two ahead and wakes two minutes later; one Deployment
of each peer is exempt (kube-green's `excludeRef`, the downscaler's `exclude` annotation) and
must never flip. A watch per namespace from a known resourceVersion records every change of
`spec.replicas` with its arrival time, and each Deployment's changes, by minute, must be the
peer's twin's. GoKubeDownscaler runs in a network namespace of its own (`fivespot.devcluster.netbridge`:
its health server binds :8081, hard-coded) and scans every `--interval` (10 s here, its default 30 s) and
kube-green fires at the cron instant, so minutes are compared, not seconds.

KEDA's cron scaler is not run (no KEDA here: it needs the HPA controller and an external-metrics
APIService, decision 0030); its import is checked offline on its documented examples
(tests/unit/test_import.py).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fivespot.devcluster.dev import DevSession
from fivespot.devcluster.kubectl import apply, wait_established
from fivespot.devcluster.peers import PeerProcess, cached_peers, cluster_admin, ensure_peers, peer_processes
from fivespot.runtime import kube
from tests.integration.capacity_world import History, current_revision

pytestmark = [pytest.mark.integration, pytest.mark.peers, pytest.mark.timeout(1500)]

UTC = dt.timezone.utc
DEPLOYMENTS = ("apps", "v1", "deployments")
KUBE_GREEN, DOWNSCALER = "kg", "kd"
REPLICAS = {"web": 2, "api": 3, "keep": 1}
"""Per pair of namespaces: two Deployments the peer sleeps and wakes, and `keep`, exempt."""
PEERS_NS = "peers-system"


def _deployment(name: str, namespace: str, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": REPLICAS[name], "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def _sleepinfo(namespace: str, sleep: dt.datetime, wake: dt.datetime) -> dict[str, Any]:
    """kube-green's README example, in UTC at the test's minutes, every day."""
    return {"apiVersion": "kube-green.com/v1alpha1", "kind": "SleepInfo",
            "metadata": {"name": "working-hours", "namespace": namespace},
            "spec": {"weekdays": "*", "sleepAt": f"{sleep:%H:%M}", "wakeUpAt": f"{wake:%H:%M}",
                     "timeZone": "UTC",
                     "excludeRef": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "keep"}]}}


def _downtime(sleep: dt.datetime, wake: dt.datetime) -> str:
    """GoKubeDownscaler's night-time guide's form (`Mon-Sun HH:MM-HH:MM UTC`), at the test's
    minutes."""
    return f"Mon-Sun {sleep:%H:%M}-{wake:%H:%M} UTC"


def _namespace(name: str, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, **({"annotations": annotations} if annotations else {})}}


def _fivespot_inputs(sleep: dt.datetime, wake: dt.datetime) -> list[dict[str, Any]]:
    """What is imported: the peers' objects as written for the `*-fivespot` twins, with the
    twins' Deployments (what each wakes to)."""
    kg, kd = f"{KUBE_GREEN}-fivespot", f"{DOWNSCALER}-fivespot"
    return [_sleepinfo(kg, sleep, wake), *(_deployment(n, kg) for n in REPLICAS),
            _namespace(kd, **{"downscaler/downtime": _downtime(sleep, wake)}),
            _deployment("web", kd), _deployment("api", kd),
            _deployment("keep", kd, **{"downscaler/exclude": "true"})]


def _import(work: Path, name: str, sleep: dt.datetime, wake: dt.datetime) -> Path:
    """`fivespot import` as a user runs it, on a file of the twins' objects; its output folder."""
    source = work / f"{name}.yaml"
    source.write_text(yaml.safe_dump_all(_fivespot_inputs(sleep, wake), sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "fivespot", "import", str(source), "--out",
                           str(work / name)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return work / name


class Replicas(History):
    """Every change of spec.replicas in one namespace from a known resourceVersion, with the
    wall-clock time its event arrived."""

    def __init__(self, admin: Any, namespace: str) -> None:
        self.arrivals: list[tuple[float, str, Any]] = []
        super().__init__(admin, DEPLOYMENTS, current_revision(admin, DEPLOYMENTS, namespace),
                         ns=namespace, timeout_s=1200)

    def _add(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        name = (obj.get("metadata") or {}).get("name")
        if event.get("type") in ("ADDED", "MODIFIED") and name:
            with self._lock:
                self.arrivals.append((time.time(), name, (obj.get("spec") or {}).get("replicas")))
        super()._add(event)

    def flips(self, name: str) -> list[tuple[str, Any]]:
        """Each change of the Deployment's replicas: (the UTC minute it arrived, the value)."""
        with self._lock:
            seen = [(t, v) for t, n, v in self.arrivals if n == name]
        found: list[tuple[str, Any]] = []
        last = REPLICAS[name]
        for when, value in seen:
            if value != last:
                found.append((dt.datetime.fromtimestamp(when, UTC).strftime("%H:%M"), value))
                last = value
        return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevSession, Path, dict[str, PeerProcess]]]:
    peers = cached_peers() or ensure_peers()
    work = tmp_path_factory.mktemp("import-equivalence")
    later = dt.datetime.now(UTC).replace(second=0, microsecond=0) + dt.timedelta(hours=3)
    first = _import(work, "provisional", later, later + dt.timedelta(minutes=2))
    session = DevSession(first / "config", work / "dev", report=lambda _: None)
    processes: dict[str, PeerProcess] = {}
    try:
        session.start()
        assert session.kubeconfig is not None
        apply(session.kubeconfig, peers.sleepinfo_crd)
        wait_established(session.kubeconfig, ["sleepinfos.kube-green.com"])
        for name in (PEERS_NS, f"{KUBE_GREEN}-peer", f"{DOWNSCALER}-peer"):
            kube.request(session.api, "POST", "/api/v1/namespaces", body=_namespace(name))
        processes.update(peer_processes(
            peers, work, cluster_admin(session.kubeconfig, session.api, PEERS_NS, "kube-green"),
            cluster_admin(session.kubeconfig, session.api, PEERS_NS, "gokubedownscaler"),
            session.state_dir / "tls", downscaler_flags=("--grace-period=0", "--interval=10")))
        yield session, work, processes
    finally:
        for process in processes.values():
            process.stop()
        session.stop()


def _create(api: Any, document: dict[str, Any]) -> None:
    meta = document["metadata"]
    group, _, version = document["apiVersion"].rpartition("/")
    plural = {"Deployment": "deployments", "SleepInfo": "sleepinfos"}[document["kind"]]
    kube.request(api, "POST", kube.resource_path(group, version, plural, namespace=meta["namespace"]),
                 body=document)


def _wait_answered(api: Any, namespaces: list[str], timeout_s: float = 60.0) -> None:
    """Until every TimeBasedSpotSchedule in `namespaces` has a status.active: a ScheduledCapacity
    whose schedule has never answered is inactive and writes 0 (the how-to's order)."""
    deadline = time.monotonic() + timeout_s
    path = ("spotschedules.5spot.finos.org", "v1alpha1", "timebasedspotschedules")
    while True:
        items = [item for namespace in namespaces for item in kube.request(
            api, "GET", kube.resource_path(*path, namespace=namespace))["items"]]
        if items and all("active" in (item.get("status") or {}) for item in items):
            return
        assert time.monotonic() < deadline, f"the imported schedules did not answer: {items}"
        time.sleep(0.5)


def _running(session: DevSession, processes: dict[str, PeerProcess]) -> None:
    session.check_processes()
    for process in processes.values():
        assert process.process is not None and process.process.poll() is None, \
            f"{process.name} exited: {process.log.read_text()[-2000:]}"


def test_the_imported_objects_flip_the_same_deployments_at_the_same_minutes_as_the_peers(
        world: tuple[DevSession, Path, dict[str, PeerProcess]]) -> None:
    session, work, processes = world
    api = session.api
    namespaces = [f"{tool}-{side}" for tool in (KUBE_GREEN, DOWNSCALER) for side in ("peer", "fivespot")]
    for namespace in namespaces:
        for name in REPLICAS:
            exempt = {"downscaler/exclude": "true"} if namespace == f"{DOWNSCALER}-peer" and name == "keep" else {}
            _create(api, _deployment(name, namespace, **exempt))
    watches = {namespace: Replicas(api, namespace) for namespace in namespaces}
    try:
        for process in processes.values():
            process.start()
        # The boundaries: a whole minute a minute or more ahead (the downscaler's first scans,
        # the import and the apply come first), the wake two minutes later.
        sleep = (dt.datetime.now(UTC) + dt.timedelta(seconds=80)).replace(second=0, microsecond=0)
        sleep += dt.timedelta(minutes=1)
        wake = sleep + dt.timedelta(minutes=2)
        _create(api, _sleepinfo(f"{KUBE_GREEN}-peer", sleep, wake))
        kube.merge_patch(api, f"/api/v1/namespaces/{DOWNSCALER}-peer",
                         {"metadata": {"annotations": {"downscaler/downtime": _downtime(sleep, wake)}}})
        imported = _import(work, "imported", sleep, wake)
        provisional = work / "provisional"
        for relative in sorted(p.relative_to(imported) for p in (imported / "config").rglob("*") if p.is_file()):
            assert (imported / relative).read_text() == (provisional / relative).read_text(), relative
        assert session.kubeconfig is not None
        apply(session.kubeconfig, imported / "tenant" / "schedules")
        _wait_answered(api, [(f"{tool}-fivespot") for tool in (KUBE_GREEN, DOWNSCALER)])
        apply(session.kubeconfig, imported / "tenant" / "capacities")
        assert dt.datetime.now(UTC) < sleep - dt.timedelta(seconds=15), "set up too late for the boundary"
        _running(session, processes)
        time.sleep(max(0.0, (wake - dt.datetime.now(UTC)).total_seconds() + 50))
        _running(session, processes)
    finally:
        for watch in watches.values():
            watch.stop()
    at_sleep, at_wake = f"{sleep:%H:%M}", f"{wake:%H:%M}"
    for tool in (KUBE_GREEN, DOWNSCALER):
        peer, ours = watches[f"{tool}-peer"], watches[f"{tool}-fivespot"]
        seen = {name: (peer.flips(name), ours.flips(name)) for name in REPLICAS}
        report = json.dumps(seen)
        for name in ("web", "api"):
            assert seen[name][0] == [(at_sleep, 0), (at_wake, REPLICAS[name])], (tool, name, report)
            assert seen[name][1] == seen[name][0], (tool, name, report)
        assert seen["keep"] == ([], []), (tool, report)


def test_importing_from_the_cluster_gives_what_importing_the_same_objects_from_files_gives(
        world: tuple[DevSession, Path, dict[str, PeerProcess]], tmp_path: Path) -> None:
    """`--from-cluster` reads the SleepInfos, Namespaces and Deployments the API server serves
    (and no ScaledObject: the kind is not served here) and writes what the files would."""
    session, _, _ = world
    assert session.kubeconfig is not None
    later = dt.datetime.now(UTC).replace(second=0, microsecond=0) + dt.timedelta(hours=5)
    kg, kd = "kg-cluster", "kd-cluster"
    objects = [_namespace(kg), _namespace(kd, **{"downscaler/downtime": _downtime(later, later + dt.timedelta(hours=1))}),
               _sleepinfo(kg, later, later + dt.timedelta(hours=2)),
               *(_deployment(n, kg) for n in REPLICAS), _deployment("web", kd), _deployment("api", kd),
               _deployment("keep", kd, **{"downscaler/exclude": "true"})]
    source = tmp_path / "objects.yaml"
    source.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    apply(session.kubeconfig, source)
    runs = {}
    for name, args in (("files", [str(source)]),
                       ("cluster", ["--from-cluster", "--kubeconfig", str(session.kubeconfig)])):
        done = subprocess.run([sys.executable, "-m", "fivespot", "import", *args, "--out",
                               str(tmp_path / name)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        runs[name] = tmp_path / name
    for namespace in (kg, kd):
        for step in ("schedules", "capacities"):
            from_files, from_cluster = (
                list(yaml.safe_load_all((runs[r] / "tenant" / step / f"{namespace}.yaml").read_text()))
                for r in ("files", "cluster"))
            assert from_cluster == from_files and from_files, (namespace, step)
    files_tenants = yaml.safe_load_all((runs["files"] / "config" / "tenants.yaml").read_text())
    cluster_tenants = yaml.safe_load_all((runs["cluster"] / "config" / "tenants.yaml").read_text())
    assert {t["metadata"]["name"]: t for t in files_tenants}.items() <= \
        {t["metadata"]["name"]: t for t in cluster_tenants}.items()
