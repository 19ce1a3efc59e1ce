"""Benchmark: the CompositeSchedule provider over 1,000 composites whose children flip at one
instant; how long after the flip each composite's status is written.

Not a test. Against the real control plane (started here), with the compiled example installed,
the time-based and the composite providers run as their own processes and ServiceAccounts
(`python -m fivespot.controllers.spotschedules time-based|composite`, default flags). There are `--objects`
TimeBasedSpotSchedules that all open at the same whole minute, and as many CompositeSchedules,
each `allOf: [its own TimeBasedSpotSchedule, not: <a shared ManualSchedule that stays off>]`.
At the boundary the time-based provider writes 1,000 statuses at once, and each write is an
event the composite provider turns into its own status write. Reported, per composite, from the
composite provider's `status written` log line:

- boundary -> composite status: what a ScheduledCapacity following the composite waits for;
- child status -> composite status: the composite provider's own share (the child's write time
  from the time-based provider's log).

    .venv/bin/python bench/providers/composite.py [--objects 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.providers.run import LogReader, percentile, schedule, zone_for  # noqa: E402
from fivespot.compiler.output import write_tree  # noqa: E402
from fivespot.compiler.pipeline import compile_repo  # noqa: E402
from fivespot.devcluster.build import cached_binaries, ensure_binaries  # noqa: E402
from fivespot.devcluster.clients import admin_client, service_account_kubeconfig  # noqa: E402
from fivespot.devcluster.controlplane import ControlPlane  # noqa: E402
from fivespot.devcluster.kubectl import install, kubectl  # noqa: E402

EXAMPLE = ROOT / "examples" / "agent-sandbox"
GROUP, VERSION = "spotschedules.5spot.finos.org", "v1alpha1"
NAMESPACE = "bench-composite"
INSTALL_NS = "5spot-system"
UTC = dt.timezone.utc


def provider(command: str, out: Path, kubeconfig: Path, work: Path) -> tuple[subprocess.Popen[str], LogReader]:
    config = service_account_kubeconfig(kubeconfig, INSTALL_NS, f"fivespot-provider-{command}",
                                        work / f"{command}.kubeconfig")
    process = subprocess.Popen(
        [sys.executable, "-m", "fivespot.controllers.spotschedules", command, "--bundle", str(out / "bundle.json"),
         "--kubeconfig", str(config), "--lease-namespace", INSTALL_NS, "--identity", "bench",
         "--metrics-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    reader = LogReader(process.stdout)
    reader.start()
    return process, reader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=1000)
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at start", flush=True)
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    processes: list[subprocess.Popen[str]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            kubeconfig = plane.kubeconfig
            out = work / "out"
            write_tree(compile_repo(EXAMPLE / "config").files, out)
            kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all([
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                for n in ("agents", NAMESPACE)]))
            install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])

            boundary = (dt.datetime.now(UTC) + dt.timedelta(minutes=4)).replace(second=0, microsecond=0)
            zone, offset = zone_for(boundary)
            objects: list[dict[str, Any]] = [{
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "ManualSchedule",
                "metadata": {"name": "freeze", "namespace": NAMESPACE}, "spec": {"enabled": False}}]
            for index in range(args.objects):
                child = schedule(f"t{index:04d}", boundary, zone, offset)
                child["metadata"]["namespace"] = NAMESPACE
                objects.append(child)
                objects.append({
                    "apiVersion": f"{GROUP}/{VERSION}", "kind": "CompositeSchedule",
                    "metadata": {"name": f"c{index:04d}", "namespace": NAMESPACE},
                    "spec": {"allOf": [
                        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "CapitalMarketsSchedule",
                         "name": f"t{index:04d}"},
                        {"not": {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManualSchedule",
                                 "name": "freeze"}}]}})
            manifest = work / "objects.yaml"
            manifest.write_text(yaml.safe_dump_all(objects))
            kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
            print(f"created {args.objects} CapitalMarketsSchedules opening at "
                  f"{boundary:%H:%M:%SZ} ({zone}), {args.objects} CompositeSchedules over them and "
                  "one ManualSchedule", flush=True)
            started = {}
            for command in ("manual", "capital-markets", "composite"):
                process, reader = provider(command, out, kubeconfig, work)
                processes.append(process)
                started[command] = reader
            print("providers: python -m fivespot.controllers.spotschedules manual|capital-markets|composite "
                  "--bundle OUT/bundle.json --kubeconfig SA.kubeconfig --lease-namespace "
                  "5spot-system --identity bench --metrics-port 0 (other flags default)", flush=True)

            from kubernetes import client

            api = client.CustomObjectsApi(admin_client(kubeconfig))
            deadline = time.monotonic() + 150
            while True:
                items = api.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE,
                                                          "compositeschedules")["items"]
                ready = sum(1 for i in items if (i.get("status") or {}).get("active") is False)
                if ready == args.objects:
                    break
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise SystemExit(f"only {ready} composites published their first status:\n"
                                     + "".join(started["composite"].lines[-20:]))
                time.sleep(1)
            print(f"first statuses: all {args.objects} composites inactive "
                  f"{(boundary - dt.datetime.now(UTC)).total_seconds():.0f} s before the boundary",
                  flush=True)
            if dt.datetime.now(UTC) > boundary - dt.timedelta(seconds=5):
                raise SystemExit("setup took past the boundary; run again")
            time.sleep(max(0.0, (boundary + dt.timedelta(seconds=60) - dt.datetime.now(UTC)).total_seconds()))

            since = boundary - dt.timedelta(seconds=5)
            child_at = {key.replace("/t", "/c", 1): when
                        for when, key, active in started["capital-markets"].writes_after(since) if active}
            from_boundary, from_child = [], []
            for when, key, active in started["composite"].writes_after(since):
                if active is True and key in child_at:
                    from_boundary.append((when - boundary).total_seconds())
                    from_child.append((when - child_at[key]).total_seconds())
            print(f"\n{len(child_at)} children and {len(from_boundary)} composites flipped active "
                  f"within 60 s of the boundary (of {args.objects})")
            for label, values in (("boundary -> composite status", from_boundary),
                                  ("child status -> composite status", from_child)):
                if values:
                    print(f"{label}: p50 {statistics.median(values):.3f} s, p99 "
                          f"{percentile(values, 0.99):.3f} s, max {max(values):.3f} s")
            print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        plane.stop()


if __name__ == "__main__":
    main()
