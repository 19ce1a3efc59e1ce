"""Benchmark: `fivespot audit` over N stored ScheduledCapacities, against listing them with
kubectl alone, in the same run (docs/design/numbers.md: ≤ 1.5× the listing).

A local control plane gets the agent-sandbox example installed with tenant `agents` allowed up to
10, and N ScheduledCapacities in `agents` (activeValue 1..10, so about half break the tightened
policy). Then, alternating, as whole processes from a cold start:

A. `fivespot audit OUT_DIR --kubeconfig K -o json` with OUT_DIR the same example compiled with the
   limit lowered to 5: it lists every object of the output's kinds (pages of 500, as kubectl)
   and decides each (exit 1: some are denied);
B. `kubectl get scheduledcapacities -A -o json`: the listing alone, the lower bound of any audit
   that reads the cluster.

Prints the median, minimum and maximum wall time of each and the A/B ratio pair by pair.

    .venv/bin/python bench/audit/run.py [--objects 10000] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from fivespot.devcluster import localrun  # noqa: E402
from fivespot.devcluster.build import cached_binaries, ensure_binaries  # noqa: E402
from fivespot.devcluster.clients import admin_client  # noqa: E402
from fivespot.devcluster.controlplane import ControlPlane  # noqa: E402
from fivespot.runtime import kube  # noqa: E402

EXAMPLE = ROOT / "examples" / "agent-sandbox" / "config"
NS = "agents"
SCAP = kube.resource_path("5spot.finos.org", "v1alpha1", "scheduledcapacities", NS)


def config(work: Path, limit: int) -> Path:
    folder = work / f"config-{limit}"
    shutil.copytree(EXAMPLE, folder)
    tenants = folder / "tenants.yaml"
    documents = list(yaml.safe_load_all(tenants.read_text()))
    for document in documents:
        if document and document["metadata"]["name"] == "agents":
            document["spec"]["maxActiveValue"] = limit
    tenants.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return folder


def create(api: Any, count: int) -> None:
    def one(index: int) -> None:
        kube.request(api, "POST", SCAP, body={
            "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": f"cap-{index:05d}", "labels": {"bench": "audit"}},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": "never"},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": f"pool-{index}"},
                     "capacity": {"path": "spec.warmReplicas", "activeValue": 1 + index % 10},
                     "enabled": False}})
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of the whole process (its exit code was checked once, before timing)."""
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    return time.perf_counter() - started


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    api = admin_client(plane.kubeconfig)
    try:
        localrun.compile_and_install(plane.kubeconfig, work / "out-10", config(work, 10))
        started = time.perf_counter()
        create(api, args.objects)
        print(f"created {args.objects} ScheduledCapacities in {time.perf_counter() - started:.0f}s")
        tightened = work / "out-5"
        from fivespot.compiler.output import write_tree
        from fivespot.compiler.pipeline import compile_repo

        write_tree(compile_repo(config(work, 5)).files, tightened)
        env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig)}
        audit = [sys.executable, "-m", "fivespot", "audit", str(tightened), "--kubeconfig",
                 str(plane.kubeconfig), "-o", "json"]
        listing = ["kubectl", "--kubeconfig", str(plane.kubeconfig), "get",
                   "scheduledcapacities", "-A", "-o", "json"]
        code = subprocess.run(audit, capture_output=True, text=True, env=env, cwd=ROOT)
        assert code.returncode == 1, code.stderr
        denied = code.stdout.count('"operation": "CREATE"')
        timed(audit, env), timed(listing, env)  # warm-up: caches, page cache
        a_times, b_times, ratios = [], [], []
        for _ in range(args.runs):
            a = timed(audit, env)
            b = timed(listing, env)
            a_times.append(a)
            b_times.append(b)
            ratios.append(a / b)
        load = os.getloadavg()
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}; load {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
        print(f"objects: {args.objects} stored, {denied} denied by the tightened output; "
              f"{args.runs} alternating runs after one warm-up, whole processes, wall seconds")
        print(f"| fivespot audit (A) | {spread(a_times)} |")
        print(f"| kubectl get -A -o json (B) | {spread(b_times)} |")
        print(f"| A/B pair by pair | median {statistics.median(ratios):.2f} "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f}) |")
    finally:
        api.close()
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
