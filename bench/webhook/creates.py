"""A burst of ScheduledCapacity creates through fivespot's webhook, and the capacity controller's
writes meanwhile (decision 0042). Not a test. `make bench-webhook-creates`.

`fivespot dev` on the peers bench's config (bench/peers/config: one tenant of 20 namespaces,
Deployments as the consumer kind) with its webhook as installed, and the PolicyReport CRDs.
Then `--targets` Deployments, and one ScheduledCapacity for each created by `--threads` client
threads, as a GitOps sync of a large config repo would: every create passes the
field-governance check, which reads the namespace's autoscalers from the API server (decision
0029). Meanwhile one thread patches those Deployments' `spec.replicas` one after another as the
capacity controller's own identity, so each patch passes the target guard, as a schedule
boundary's writes do.

Printed: the creates' wall time, the field-governance reviews' count and mean time (the
webhook's `fivespot_webhook_admission_duration_seconds`), and the target-guard patches' count
and latency (p50, p99, max) during the creates. Then the audit controller's side of the same
burst (decision 0046): seconds from the end of the creates until every namespace's PolicyReport
lists each of its objects, and the controller's CPU seconds, reconciles and report writes from
the first create to then.

    .venv/bin/python bench/webhook/creates.py [--targets 1000] [--threads 8] [--profile DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fivespot.api.identities import AUDIT_CONTROLLER  # noqa: E402
from fivespot.controllers.policyreports import reports as policy_reports  # noqa: E402
from fivespot.devcluster.dev import DevSession  # noqa: E402
from fivespot.devcluster.localrun import http_get  # noqa: E402
from fivespot.runtime import kube  # noqa: E402


POLICY_REPORT_CRDS: Final = sorted(
    (ROOT / "tests" / "integration" / "testdata" / "policyreport-crds").glob("*.yaml"))
"""The upstream PolicyReport CRDs (wgpolicyk8s.io), so the audit controller writes its reports as
on a cluster with a policy-report viewer installed."""


def bench_module(name: str) -> ModuleType:
    """bench/NAME/run.py: the peers bench for its World (namespaces, Deployments,
    ScheduledCapacities) and per-process CPU, the capacity bench for its metric reader and
    profiler."""
    spec = importlib.util.spec_from_file_location(f"{name}_run", ROOT / "bench" / name / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"{name}_run"] = module
    spec.loader.exec_module(module)
    return module


def reviews(port: int, check: str) -> tuple[int, float]:
    """(count, seconds) of the webhook's reviews of `check` so far."""
    _, text = http_get(port, "/metrics")
    count = total = 0.0
    for line in text.splitlines():
        if line.startswith("fivespot_webhook_admission_duration_seconds_") and f'check="{check}"' in line:
            if "_count{" in line:
                count += float(line.split()[-1])
            elif "_sum{" in line:
                total += float(line.split()[-1])
    return int(count), total


def audit_counts(capacity_bench: ModuleType, port: int) -> tuple[int, int]:
    """(reconciles, PolicyReport writes) of the audit controller so far, from its /metrics."""
    return (int(capacity_bench.metric_value(port, "fivespot_reconcile_duration_seconds_count",
                                            f'controller="{AUDIT_CONTROLLER}"')),
            int(capacity_bench.metric_value(port, "fivespot_writes_total", 'what="policyreport"')))


def reported(api: object, namespaces: set[str]) -> int:
    """Objects the namespaces' PolicyReports list (passed or failed)."""
    listed = kube.request(api, "GET", kube.resource_path(
        policy_reports.GROUP, policy_reports.VERSION, policy_reports.PLURAL))
    return sum(int(summary.get("pass") or 0) + int(summary.get("fail") or 0)
               for item in listed.get("items") or []
               if (item.get("metadata") or {}).get("namespace") in namespaces
               and (item.get("metadata") or {}).get("name") == policy_reports.NAME
               for summary in [item.get("summary") or {}])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=8, help="client threads creating")
    parser.add_argument("--profile", type=Path, help="py-spy the audit controller's Python CPU "
                        "during the creates and until its reports are complete (collapsed stacks "
                        "into DIR/audit.txt)")
    args = parser.parse_args()
    peers, capacity_bench = bench_module("peers"), bench_module("capacity")
    work = Path(tempfile.mkdtemp(prefix="fivespot-bench-creates-"))
    session = DevSession(ROOT / "bench" / "peers" / "config", work / "dev", POLICY_REPORT_CRDS,
                         report=lambda line: print(f"[dev] {line}", flush=True))
    session.start()
    try:
        assert session.kubeconfig is not None
        world = peers.World(session.kubeconfig, threads=args.threads)
        which = peers.targets("fivespot", 0, args.targets)
        world.deployments(which)
        capacity = kube.load_client(work / "dev" / "fivespot-capacity-controller.kubeconfig")
        port = session.metrics_ports["fivespot-webhook"]
        latencies: list[float] = []
        stop = threading.Event()

        def guarded_writes() -> None:
            index = 0
            while not stop.is_set():
                namespace, name = which[index % len(which)]
                index += 1
                started = time.perf_counter()
                kube.merge_patch(capacity, kube.resource_path("apps", "v1", "deployments",
                                                              namespace, name),
                                 {"spec": {"replicas": index % 2}},
                                 field_manager="fivespot-capacity-controller")
                latencies.append(time.perf_counter() - started)

        audit_port = session.metrics_ports[AUDIT_CONTROLLER]
        audit_pid = next(p.pid for name, p in session.processes if name == AUDIT_CONTROLLER)
        spy = None
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            spy = capacity_bench.start_profile(audit_pid, args.profile / "audit.txt")
        audit_before = audit_counts(capacity_bench, audit_port), peers.cpu_seconds(audit_pid)
        before = reviews(port, "field-governance")
        writer = threading.Thread(target=guarded_writes, name="guarded-writes")
        started = time.monotonic()
        writer.start()
        world.scheduled_capacities(which)
        wall = time.monotonic() - started
        stop.set()
        writer.join()
        namespaces = {namespace for namespace, _ in which}
        created = time.monotonic()
        while reported(session.api, namespaces) < len(which) and time.monotonic() - created < 600:
            time.sleep(0.2)
        complete = time.monotonic() - created
        audit_cpu = peers.cpu_seconds(audit_pid) - audit_before[1]
        reconciles, writes = (a - b for a, b in zip(audit_counts(capacity_bench, audit_port),
                                                     audit_before[0]))
        capacity_bench.stop_profile(spy)
        count, total = (a - b for a, b in zip(reviews(port, "field-governance"), before))
        ordered = sorted(latencies)
        print(f"{args.targets} ScheduledCapacity creates ({args.threads} threads) in {wall:.1f} s; "
              f"{int(count)} field-governance reviews, mean {1000 * total / max(count, 1):.1f} ms; "
              f"target-guard patches meanwhile: {len(ordered)}, "
              f"p50 {1000 * statistics.median(ordered):.1f} ms, "
              f"p99 {1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]:.1f} ms, "
              f"max {1000 * ordered[-1]:.1f} ms", flush=True)
        print(f"audit controller: every object in its namespace's PolicyReport {complete:.1f} s "
              f"after the last create; from the first create to then {audit_cpu:.1f} CPU-s, "
              f"{reconciles} reconciles, {writes} report writes "
              f"({len(namespaces)} namespaces)", flush=True)
        return 0
    finally:
        session.stop()


if __name__ == "__main__":
    sys.exit(main())
