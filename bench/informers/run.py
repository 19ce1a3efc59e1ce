"""Benchmark: what a controller pays to watch one kind per namespace instead of cluster-wide
(docs/design/decisions/0025-live-tenancy-and-namespaced-rights.md).

The capacity controller watches each consumer kind with one cluster-wide informer
(`fivespot.runtime.informer.Informer`), which needs list and watch on it everywhere. Namespaced rights
would need one informer per tenant namespace and kind. A local control plane gets N namespaces
with one ConfigMap each (a stand-in for a consumer's objects: any kind watches alike); then, in
this process, one cluster-wide informer, then N informers of one namespace each, as the runtime
builds them (the Manager's resync period: a watch thread and a resync thread each). For each:
wall time to synced, threads, resident memory (RSS) over the process before, and the API server's
watches they opened (`apiserver_longrunning_requests{verb="WATCH"}`).

    .venv/bin/python bench/informers/run.py [--namespaces 10,100,500]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fivespot.devcluster.build import cached_binaries, ensure_binaries  # noqa: E402
from fivespot.devcluster.clients import admin_client  # noqa: E402
from fivespot.devcluster.controlplane import ControlPlane  # noqa: E402
from fivespot.runtime import kube  # noqa: E402
from fivespot.runtime.informer import Informer  # noqa: E402
from fivespot.runtime.manager import Settings  # noqa: E402

_WATCHES = re.compile(r'^apiserver_longrunning_requests\{[^}]*resource="configmaps"[^}]*verb="WATCH"[^}]*\} (\S+)$',
                      re.MULTILINE)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def server_watches(kubeconfig: Path) -> int:
    """ConfigMap watches the API server holds open now."""
    text = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/metrics"],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    return int(sum(float(v) for v in _WATCHES.findall(text)))


def populate(api: Any, count: int) -> list[str]:
    names = [f"bench-ns-{i:04d}" for i in range(count)]

    def one(name: str) -> None:
        try:
            kube.request(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
            kube.request(api, "POST", f"/api/v1/namespaces/{name}/configmaps",
                         body={"metadata": {"name": "target"}, "data": {"replicas": "1"}})
        except kube.ApiError as error:
            if not error.conflict:
                raise
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, names))
    return names


def measure(kubeconfig: Path, namespaces: list[str | None]) -> dict[str, float]:
    """Start one informer per entry (None: cluster-wide) on one client with a connection for
    each (`kube.pool_for`, as a controller sizes its pool), wait until all synced, measure, stop."""
    api = kube.load_client(kubeconfig, pool_size=kube.pool_for(len(namespaces)))
    threads, rss, watches = threading.active_count(), rss_mib(), server_watches(kubeconfig)
    started = time.perf_counter()
    informers = [Informer(api, "", "v1", "configmaps", ns, resync_s=Settings.resync_s)
                 for ns in namespaces]
    for informer in informers:
        informer.start()
    for informer in informers:
        informer.wait_synced(300)
    synced = time.perf_counter() - started
    time.sleep(2)  # every watch request answered and open
    found = {"synced_s": synced, "threads": threading.active_count() - threads,
             "rss_mib": rss_mib() - rss, "server_watches": server_watches(kubeconfig) - watches}
    for informer in informers:
        informer.stop(1.0)
    api.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespaces", default="10,100,500")
    args = parser.parse_args()
    counts = [int(n) for n in args.namespaces.split(",")]
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    api = admin_client(plane.kubeconfig)
    try:
        names = populate(api, max(counts))
        load = os.getloadavg()
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}; load {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
        print("| informers | synced (s) | threads | RSS (MiB) | API server watches |")
        print("|---|---|---|---|---|")
        scopes: list[tuple[str, list[str | None]]] = [("1 cluster-wide", [None])]
        scopes += [(f"{n} namespaced", list[str | None](names[:n])) for n in counts]
        for label, scope in scopes:
            found = measure(plane.kubeconfig, scope)
            print(f"| {label} | {found['synced_s']:.2f} | {found['threads']:.0f} | "
                  f"{found['rss_mib']:.1f} | {found['server_watches']:.0f} |")
    finally:
        api.close()
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
