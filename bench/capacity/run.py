"""Capacity controller benchmark against a real kube-apiserver + etcd (not a test).

What it measures, with N ScheduledCapacity objects in the controller's caches (each with its own
VirtualMachinePool and ManualSchedule in namespace `agents`), the controller running as a
separate process with its compiled ServiceAccount:

- flip -> written: a provider publishes status.active=true; the time until the target's
  spec.warmReplicas reads the active value, as seen by a watch in this process (so it includes
  watch delivery both ways; an upper bound on the controller's own share). Flips are paced
  (`--rate` per second), one object each, in `--rounds` rounds.
- market open (`--burst N`, issue 16): N more ScheduledCapacities, each with its own pool, all
  following ONE ManualSchedule, which is flipped once: the time until every target reads the
  active value, against the limit measured in the same run — a bare client (the controller's
  client configuration and connection pool, its ServiceAccount, as many threads as it has
  workers) sending the same N merge patches to N other pools as fast as the API server takes
  them, just before the flip and again just after the statuses (so a load spike during one of
  the three shows as a spread between the two bare times). Reported: the times, the ratio to
  the mean of the two bare runs, when every object's status read Active (the statuses follow the
  target writes), the controller's API calls per flip (from its metrics), the API server's own
  mean time per pool patch in each run (from its metrics: the server's share against the
  client's), the controller's CPU up to the last target write, and the close (every status
  Inactive, and the status patches it took). `--conflicted K` of the pools get a second, younger ScheduledCapacity on the same
  field and schedule (the one-governor rule: it must never write). The invariants are checked
  from the controller's audit log over the open and the close of every round, and the run
  fails (exit 1) when one does not hold: only 0 or activeValue is ever written, every target
  is written exactly once per flip, and no conflicted (younger) object writes at all.
- separate schedules (`--burst-separate N`, the older `--burst`): N objects' own schedules
  flipped at once by client threads; per-object latency and time to the last write.
- drain -> Inactive: a HandingBack object's counter is set to 0; the time until its phase reads
  Inactive (again as seen by a watch).
- settle: time for the controller to give all N objects their first status after it starts.
- idle CPU: the settled controller's CPU time over `--idle` seconds with nothing changing
  (watches, lease renewals, metrics), as a share of one core.
- RSS of the controller process (`process_resident_memory_bytes` from its /metrics) at N
  objects and again after growing to `--grow-to` objects (the extra objects each have a pool
  but share one schedule, to keep the set-up to two requests per object).

    .venv/bin/python bench/capacity/run.py                 # own control plane, 1,000 then 10,000
    .venv/bin/python bench/capacity/run.py --objects 200 --grow-to 0 --rounds 1   # quick look
    .venv/bin/python bench/capacity --burst 1000          # the issue's invocation (everything)
    .venv/bin/python bench/capacity/run.py --objects 0 --rounds 0 --burst-separate 0 --grow-to 0 \
        --burst 1000 --burst-rounds 3                                    # market open only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fivespot.controllers.cli import CAPACITY_WORKERS  # noqa: E402
from fivespot.devcluster import localrun  # noqa: E402
from fivespot.runtime import kube  # noqa: E402
from fivespot.runtime.informer import Informer  # noqa: E402

NS = "agents"
ACTIVE = 10
POOLS = ("pools.agents.example.com", "v1alpha1", "virtualmachinepools")
MANUAL = ("spotschedules.5spot.finos.org", "v1alpha1", "manualschedules")
SCAP = ("5spot.finos.org", "v1alpha1", "scheduledcapacities")


def p(kind: tuple[str, str, str], name: str | None = None, sub: str | None = None) -> str:
    return kube.resource_path(*kind, namespace=NS, name=name, subresource=sub)


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class Bench:
    def __init__(self, api: Any, threads: int):
        self.api = api
        self.pool = ThreadPoolExecutor(threads)
        self.lock = threading.Lock()
        self.flipped: dict[str, float] = {}
        self.written: dict[str, float] = {}
        self.drained: dict[str, float] = {}
        self.inactive: dict[str, float] = {}
        self.phases: dict[str, str] = {}
        self.expect = ACTIVE

    def set_active(self, i: int, active: bool) -> None:
        kube.merge_patch(self.api, p(MANUAL, f"ms-{i:05d}", "status"), {"status": {
            "active": active, "observedGeneration": 1, "lastTransitionTime": stamp()}})

    def set_in_use(self, i: int, count: int) -> None:
        kube.merge_patch(self.api, p(POOLS, f"pool-{i:05d}", "status"), {"status": {"inUse": count}})

    def create_pool(self, name: str) -> None:
        kube.request(self.api, "POST", p(POOLS), body={
            "apiVersion": "pools.agents.example.com/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": name}, "spec": {"warmReplicas": 0}})

    def create_scap(self, name: str, schedule: str, pool: str) -> None:
        """A ScheduledCapacity of ACTIVE on `pool`'s spec.warmReplicas, following ManualSchedule
        `schedule`, handing back on status.inUse."""
        kube.request(self.api, "POST", p(SCAP), body={
            "apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "ManualSchedule", "name": schedule},
                     "targetRef": {"apiVersion": "pools.agents.example.com/v1alpha1",
                                   "kind": "VirtualMachinePool", "name": pool},
                     "capacity": {"path": "spec.warmReplicas", "activeValue": ACTIVE},
                     "handback": {"drainedPath": "status.inUse", "timeout": "1h"}}})

    def create(self, i: int) -> None:
        self.create_pool(f"pool-{i:05d}")
        self.set_in_use(i, 0)
        kube.request(self.api, "POST", p(MANUAL), body={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
            "metadata": {"name": f"ms-{i:05d}"}, "spec": {"enabled": False}})
        self.set_active(i, False)
        self.create_scap(f"cap-{i:05d}", f"ms-{i:05d}", f"pool-{i:05d}")

    def create_light(self, i: int) -> None:
        """For the RSS point only: a pool and a ScheduledCapacity following the shared (inactive)
        schedule ms-00000, without the counter (such objects wait in HandingBack)."""
        self.create_pool(f"pool-{i:05d}")
        self.create_scap(f"cap-{i:05d}", "ms-00000", f"pool-{i:05d}")

    def create_shared(self, i: int) -> None:
        """A market-open object: its own pool, the shared schedule ms-burst; and a bare pool
        for the baseline's patches. Both pools get the drain counter the same way, so the bare
        client's patches meet objects of the same shape and size as the controller's (the API
        server's work per patch grows with the object: a bare pool without the status and its
        managedFields entry was 725 bytes against 1,012, and took a third less of its CPU)."""
        for name in (f"bpool-{i:05d}", f"bare-{i:05d}"):
            self.create_pool(name)
            kube.merge_patch(self.api, p(POOLS, name, "status"), {"status": {"inUse": 0}})
        self.create_scap(f"bcap-{i:05d}", "ms-burst", f"bpool-{i:05d}")

    def create_conflicted(self, i: int) -> None:
        """A second, younger ScheduledCapacity on bpool-i's field, following ms-burst too: the
        one-governor rule gives the field to bcap-i (older; on a tie, the name sorts first), so
        this one must never write. (The bench installs no webhook, so admission lets it in and
        the controller's own check is what is exercised.)"""
        self.create_scap(f"bdup-{i:05d}", "ms-burst", f"bpool-{i:05d}")

    def set_shared(self, active: bool) -> None:
        kube.merge_patch(self.api, p(MANUAL, "ms-burst", "status"), {"status": {
            "active": active, "observedGeneration": 1, "lastTransitionTime": stamp()}})

    def shared_burst(self, n: int, value: int) -> float:
        """Flip ms-burst to active once; seconds until every bpool reads `value`."""
        names = [f"bpool-{i:05d}" for i in range(n)]
        with self.lock:
            for name in names:
                self.written.pop(name, None)
                self.flipped[name] = time.monotonic()
            self.expect = value
        started = time.monotonic()
        self.set_shared(value == ACTIVE)
        deadline = started + 120
        while time.monotonic() < deadline:
            with self.lock:
                if all(name in self.written for name in names):
                    return max(self.written[name] for name in names) - started
            time.sleep(0.01)
        raise TimeoutError("not every target was written within 120 s")

    def create_many(self, indices: range, light: bool = False) -> float:
        started = time.monotonic()
        list(self.pool.map(self.create_light if light else self.create, indices))
        return time.monotonic() - started

    # --- watches in this process ----------------------------------------------------------------

    def on_pool(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        if (obj.get("spec") or {}).get("warmReplicas") == (self.expect if name.startswith("bpool-")
                                                            else ACTIVE):
            with self.lock:
                if name in self.flipped and name not in self.written:
                    self.written[name] = time.monotonic()

    def on_scap(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = obj["metadata"]["name"]
        phase = (obj.get("status") or {}).get("phase")
        with self.lock:
            if phase:
                self.phases[name] = phase
            if phase == "Inactive" and name in self.drained and name not in self.inactive:
                self.inactive[name] = time.monotonic()

    def wait_phases(self, names: list[str], phases: set[str], timeout: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            with self.lock:
                missing = [n for n in names if self.phases.get(n) not in phases]
            if not missing:
                return time.monotonic() - started
            time.sleep(0.1)
        raise TimeoutError(f"{len(missing)} objects not in {phases} after {timeout}s, e.g. {missing[:3]}")

    # --- the measurements -----------------------------------------------------------------------

    def flip_round(self, indices: list[int], rate: float) -> list[float]:
        for i in indices:
            name = f"pool-{i:05d}"
            with self.lock:
                self.flipped[name] = time.monotonic()
            self.set_active(i, True)
            time.sleep(1.0 / rate)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self.lock:
                if all(f"pool-{i:05d}" in self.written for i in indices):
                    break
            time.sleep(0.05)
        with self.lock:
            return [self.written[f"pool-{i:05d}"] - self.flipped[f"pool-{i:05d}"]
                    for i in indices if f"pool-{i:05d}" in self.written]

    def burst(self, indices: list[int]) -> tuple[list[float], float]:
        """Flip every schedule in `indices` at once (client threads): per-object latencies and
        the time until the last target was written."""
        def one(i: int) -> None:
            with self.lock:
                self.flipped[f"pool-{i:05d}"] = time.monotonic()
            self.set_active(i, True)

        started = time.monotonic()
        list(self.pool.map(one, indices))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with self.lock:
                if all(f"pool-{i:05d}" in self.written for i in indices):
                    break
            time.sleep(0.05)
        with self.lock:
            done = [self.written[f"pool-{i:05d}"] for i in indices if f"pool-{i:05d}" in self.written]
            latencies = [self.written[f"pool-{i:05d}"] - self.flipped[f"pool-{i:05d}"]
                         for i in indices if f"pool-{i:05d}" in self.written]
        return latencies, max(done) - started

    def drain_round(self, indices: list[int], rate: float) -> list[float]:
        for i in indices:
            self.set_in_use(i, 1)
            self.set_active(i, False)
        self.wait_phases([f"cap-{i:05d}" for i in indices], {"HandingBack"}, 60)
        for i in indices:
            with self.lock:
                self.drained[f"cap-{i:05d}"] = time.monotonic()
            self.set_in_use(i, 0)
            time.sleep(1.0 / rate)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self.lock:
                if all(f"cap-{i:05d}" in self.inactive for i in indices):
                    break
            time.sleep(0.05)
        with self.lock:
            return [self.inactive[f"cap-{i:05d}"] - self.drained[f"cap-{i:05d}"]
                    for i in indices if f"cap-{i:05d}" in self.inactive]


def bare_patches(kubeconfig: Path, paths: list[str], threads: int, body: dict[str, Any], *,
                 field_manager: str = "bench-bare") -> float:
    """The limit: the same merge patches of one field a controller sends, from the same client
    configuration (`kubeconfig`'s identity, `fivespot.runtime.kube.load_client`'s pool), with as many
    threads as it has workers, to objects nobody governs. Seconds for all of them. (Also the
    peers' benchmark's bare client, bench/peers/run.py, which sends them a second time as the
    capacity controller's identity and field manager, through its target guard.)"""
    api = kube.load_client(kubeconfig)

    def one(path: str) -> None:
        kube.merge_patch(api, path, body, field_manager=field_manager)

    try:
        with ThreadPoolExecutor(threads) as pool:
            started = time.monotonic()
            list(pool.map(one, paths))
            return time.monotonic() - started
    finally:
        api.close()


SERVER_SERIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "patch": ("apiserver_request_duration_seconds",
              ('verb="PATCH"', 'resource="virtualmachinepools"', 'subresource=""')),
    "admission": ("apiserver_admission_step_admission_duration_seconds",
                  ('operation="UPDATE"', 'rejected="false"')),
    "vap": ("apiserver_validating_admission_policy_check_duration_seconds", ()),
}
"""What the API server says about the pool patches (sum and count of seconds): the whole
request, its admission steps (every UPDATE of the cluster, the controller's status patches
included), the ValidatingAdmissionPolicy checks."""


def server_totals(kubeconfig: Path) -> dict[str, tuple[float, float]]:
    """The API server's own time for each of SERVER_SERIES, as (sum s, count) so far."""
    text = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/metrics"],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    found = {what: [0.0, 0.0] for what in SERVER_SERIES}
    for line in text.splitlines():
        for what, (name, labels) in SERVER_SERIES.items():
            for suffix, slot in (("_sum{", 0), ("_count{", 1)):
                if line.startswith(name + suffix) and all(label in line for label in labels):
                    found[what][slot] += float(line.split()[-1])
    cpu = next((float(line.split()[-1]) for line in text.splitlines()
                if line.startswith("process_cpu_seconds_total ")), 0.0)
    return {**{what: (total, count) for what, (total, count) in found.items()}, "cpu": (cpu, 1.0)}


def server_ms(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]],
              ) -> dict[str, Any]:
    """Mean server milliseconds and count per series between two `server_totals`."""
    out: dict[str, Any] = {}
    for what in SERVER_SERIES:
        total, count = (after[what][0] - before[what][0]), (after[what][1] - before[what][1])
        out[what] = {"n": int(count), "mean_ms": round(1000 * total / count, 2) if count else None}
    out["cpu_s"] = round(after["cpu"][0] - before["cpu"][0], 2)
    return out


def metric_value(port: int, name: str, labels: str) -> float:
    status, body = localrun.http_get(port, "/metrics")
    for line in body.splitlines():
        if line.startswith(f"{name}{{") and all(part in line for part in labels.split(",")):
            return float(line.split()[-1])
    return 0.0


def audit_writes(log: Path, since: int) -> list[dict[str, Any]]:
    with open(log, "rb") as handle:
        handle.seek(since)
        lines = handle.read().decode(errors="replace").splitlines()
    found = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "target written":
            found.append(entry)
    return found


def conflicted_indices(n: int, k: int) -> list[int]:
    """Which market-open pools get a younger, conflicting ScheduledCapacity: k spread evenly."""
    return sorted({i * n // k for i in range(k)}) if k and n else []


def check_flip(writes: list[dict[str, Any]], n: int, value: int,
               conflicted: set[str]) -> dict[str, bool]:
    """The invariants of one flip of ms-burst, from the audit lines written during it."""
    per_target: dict[str, list[Any]] = {}
    for w in writes:
        per_target.setdefault(str(w["target"]), []).append(w["value"])
    return {
        "only_0_or_activeValue": all(w["value"] in (0, ACTIVE) for w in writes),
        "every_target_written_once": len(per_target) == n
        and all(len(v) == 1 for v in per_target.values()),
        "every_write_the_flip_value": all(v == [value] for v in per_target.values()),
        "no_conflicted_object_written": not any(w.get("key") in conflicted for w in writes),
    }


def start_profile(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy (`pip install py-spy`) sampling the controller's thread that holds the GIL (its
    Python CPU; not pausing it) until stopped, as collapsed stacks (one line per stack and its
    sample count) in `out`."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", "200", "--threads",
                             "--gil", "--nonblocking", "--format", "raw", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profile(spy: subprocess.Popen[bytes] | None) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def market_open(bench: "Bench", kubeconfig: Path, sa: Path, port: int, log: Path, n: int,
                workers: int, rounds: int, conflicted: set[str], profile: tuple[int, Path] | None = None,
                ) -> dict[str, Any]:
    """`rounds` market opens of n objects on one schedule, each after a bare-client run, each
    followed by the close (every target back to 0, drained, Inactive). `profile`: the
    controller's pid and a folder for py-spy's stacks of each open (target writes and statuses)."""
    results = []

    def market_writes(mark: int) -> list[dict[str, Any]]:
        return [w for w in audit_writes(log, mark)
                if str(w.get("target", "")).startswith("VirtualMachinePool/agents/bpool-")]

    for r in range(rounds):
        server_before = server_totals(kubeconfig)
        bare_paths = [p(POOLS, f"bare-{i:05d}") for i in range(n)]
        bench_cpu = sum(os.times()[:2])
        bare_s = bare_patches(sa, bare_paths, workers, {"spec": {"warmReplicas": ACTIVE}})
        bench_cpu = sum(os.times()[:2]) - bench_cpu
        bare_server = server_ms(server_before, server_totals(kubeconfig))
        mark = log.stat().st_size
        calls_before = {what: metric_value(port, "fivespot_writes_total", f'what="{what}"')
                        for what in ("target", "status")}
        reconciles_before = reconcile_totals(port)[1]
        cpu_before = process_metric(port, "process_cpu_seconds_total")
        spy = start_profile(profile[0], profile[1] / f"open-{r + 1}.txt") if profile else None
        if spy is not None:
            time.sleep(1.0)  # py-spy attached
        server_before = server_totals(kubeconfig)
        controller_s = bench.shared_burst(n, ACTIVE)
        burst_cpu = process_metric(port, "process_cpu_seconds_total") - cpu_before
        controller_server = server_ms(server_before, server_totals(kubeconfig))
        # the statuses follow the target writes: every object's phase reads Active
        status_s = controller_s + bench.wait_phases([f"bcap-{i:05d}" for i in range(n)], {"Active"}, 120)
        stop_profile(spy)
        time.sleep(1.0)  # let the last status patches and reconciles finish
        cpu = process_metric(port, "process_cpu_seconds_total") - cpu_before
        # The bare client again, right after (each of its patches a change: back to 0), so the
        # controller's burst is bracketed by two bare runs and a load spike during one of the
        # three shows as a spread between the two bare times instead of as a ratio.
        bare_after_s = bare_patches(sa, bare_paths, workers, {"spec": {"warmReplicas": 0}})
        bare_mean_s = (bare_s + bare_after_s) / 2
        opened = check_flip(market_writes(mark), n, ACTIVE, conflicted)
        calls = {what: metric_value(port, "fivespot_writes_total", f'what="{what}"') - before
                 for what, before in calls_before.items()}
        reconciles = int(reconcile_totals(port)[1] - reconciles_before)
        mark = log.stat().st_size
        status_before = metric_value(port, "fivespot_writes_total", 'what="status"')
        close_started = time.monotonic()
        bench.shared_burst(n, 0)
        bench.wait_phases([f"bcap-{i:05d}" for i in range(n)], {"Inactive"}, 300)
        inactive_s = time.monotonic() - close_started
        time.sleep(1.0)
        close_statuses = metric_value(port, "fivespot_writes_total", 'what="status"') - status_before
        closed = check_flip(market_writes(mark), n, 0, conflicted)
        results.append({
            "bare_s": round(bare_s, 2), "bare_after_s": round(bare_after_s, 2),
            "controller_s": round(controller_s, 2),
            "ratio": round(controller_s / bare_mean_s, 2),
            "ratio_to_bare_before": round(controller_s / bare_s, 2),
            "all_statuses_active_s": round(status_s, 2),
            "target_patches": int(calls["target"]), "status_patches": int(calls["status"]),
            "reconciles": reconciles, "controller_cpu_s": round(cpu, 2),
            "controller_cpu_s_to_last_target": round(burst_cpu, 2),
            "bench_cpu_s_during_bare": round(bench_cpu, 2),
            "server_ms": {"bare": bare_server, "controller": controller_server},
            "close_all_inactive_s": round(inactive_s, 2), "close_status_patches": int(close_statuses),
            "invariants": {key: opened[key] and closed[key] for key in opened},
        })
        print(f"  market open {r + 1}: bare client {bare_s:.2f} s / {bare_after_s:.2f} s, "
              f"controller {controller_s:.2f} s, ratio {controller_s / bare_mean_s:.2f}; "
              f"{results[-1]}", flush=True)
    failed = sorted({key for r in results for key, held in r["invariants"].items() if not held})
    return {"objects": n, "workers": workers, "conflicted": len(conflicted), "rounds": results,
            "controller_s_median": statistics.median(r["controller_s"] for r in results),
            "bare_s_median": statistics.median(r["bare_s"] for r in results),
            "ratio_median": statistics.median(r["ratio"] for r in results),
            "invariants_failed": failed}


def process_metric(port: int, name: str) -> float:
    status, body = localrun.http_get(port, "/metrics")
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise RuntimeError(f"no {name}")


def reconcile_totals(port: int) -> tuple[float, float]:
    label = '{controller="fivespot-capacity-controller"}'
    return (process_metric(port, f"fivespot_reconcile_duration_seconds_sum{label}"),
            process_metric(port, f"fivespot_reconcile_duration_seconds_count{label}"))


def rss_mb(port: int) -> float:
    return process_metric(port, "process_resident_memory_bytes") / 2**20


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "p50_ms": round(percentile(ms, 50), 1), "p99_ms": round(percentile(ms, 99), 1),
            "max_ms": round(max(ms), 1), "mean_ms": round(statistics.fmean(ms), 1)}


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{platform.node() or 'vm'}, {platform.machine()}, {os.cpu_count()} CPUs ({model}), "
            f"Python {platform.python_version()}, load average {load} at start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--grow-to", type=int, default=10000, help="0: skip the second RSS point")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sample", type=int, default=100, help="flips (and drains) per round")
    parser.add_argument("--rate", type=float, default=20.0, help="flips per second")
    parser.add_argument("--threads", type=int, default=8, help="client threads creating objects")
    parser.add_argument("--burst", "--burst-shared", dest="burst", type=int, default=1000,
                        metavar="N",
                        help="market open: N more objects on ONE ManualSchedule flipped at once, "
                             "against a bare client's N patches in the same run (0: skip)")
    parser.add_argument("--burst-rounds", type=int, default=3, help="market opens to run")
    parser.add_argument("--conflicted", type=int, default=10, metavar="K",
                        help="market-open pools that also get a younger, conflicting "
                             "ScheduledCapacity (which must never write)")
    parser.add_argument("--burst-separate", type=int, default=500, metavar="N",
                        help="then flip N objects' own schedules at once (0: skip)")
    parser.add_argument("--kubeconfig", type=Path, help="use a running cluster instead of starting one")
    parser.add_argument("--workers", type=int, default=CAPACITY_WORKERS,
                        help="the controller's --workers (default: its own default)")
    parser.add_argument("--idle", type=float, default=20.0, metavar="S",
                        help="measure the settled controller's CPU over this long (0: skip)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="py-spy the controller during each market open (stacks into DIR; "
                             "the sampling costs CPU, so no ratio from such a run)")
    args = parser.parse_args()
    started_machine = machine()
    work = Path(tempfile.mkdtemp(prefix="fivespot-bench-capacity-"))
    plane = None
    if args.kubeconfig is None:
        from fivespot.devcluster.build import cached_binaries, ensure_binaries
        from fivespot.devcluster.controlplane import ControlPlane

        plane = ControlPlane(cached_binaries() or ensure_binaries(), work / "cluster", owned=True)
        plane.start()
    kubeconfig = args.kubeconfig or work / "cluster" / "kubeconfig"
    controller = None
    informers: list[Informer] = []
    try:
        bundle = localrun.compile_and_install(kubeconfig, work / "out")
        admin = kube.load_client(kubeconfig)
        bench = Bench(admin, args.threads)
        print(f"creating {args.objects} ScheduledCapacities (+ pools + schedules)...", flush=True)
        created_s = bench.create_many(range(args.objects))
        print(f"  created in {created_s:.1f}s", flush=True)
        conflicted = conflicted_indices(args.burst, args.conflicted)
        if args.burst:
            kube.request(admin, "POST", p(MANUAL), body={
                "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
                "metadata": {"name": "ms-burst"}, "spec": {"enabled": False}})
            bench.set_shared(False)
            list(bench.pool.map(bench.create_shared, range(args.burst)))
            list(bench.pool.map(bench.create_conflicted, conflicted))
            print(f"  created {args.burst} market-open objects ({len(conflicted)} of their fields "
                  "with a second, younger governor)", flush=True)
        for kind, handler in ((POOLS, bench.on_pool), (SCAP, bench.on_scap)):
            informer = Informer(admin, kind[0], kind[1], kind[2], NS, resync_s=0)
            informer.add_handler(handler)
            informer.start()
            informer.wait_synced(60)
            informers.append(informer)
        sa = localrun.controller_kubeconfig(kubeconfig, work / "sa.kubeconfig")
        log = work / "controller.log"
        start = time.monotonic()
        controller = localrun.start_controller(sa, bundle, "bench", log,
                                                extra=["--workers", str(args.workers)])
        port = localrun.metrics_port_of(log)
        names = [f"cap-{i:05d}" for i in range(args.objects)]
        names += [f"bcap-{i:05d}" for i in range(args.burst)]
        bench.wait_phases(names, {"Inactive"}, 600)
        bench.wait_phases([f"bdup-{i:05d}" for i in conflicted],
                          {"Pending", "Inactive", "Active", "HandingBack", "Disabled", "Error"}, 120)
        settle_from_start = time.monotonic() - start
        print(f"  controller settled {args.objects} objects {settle_from_start:.1f}s after start", flush=True)
        time.sleep(2)
        rss_small = rss_mb(port)
        idle_cpu = None
        if args.idle > 0:
            cpu_before = process_metric(port, "process_cpu_seconds_total")
            time.sleep(args.idle)
            idle_cpu = (process_metric(port, "process_cpu_seconds_total") - cpu_before) / args.idle
            print(f"  idle: {100 * idle_cpu:.2f} % of a core over {args.idle:.0f} s", flush=True)
        rounds = []
        drains = []
        sample = min(args.sample, args.objects // max(args.rounds, 1))
        for r in range(args.rounds):
            indices = list(range(r * sample, (r + 1) * sample))
            flips = bench.flip_round(indices, args.rate)
            drained = bench.drain_round(indices, args.rate)
            rounds.append(summary(flips))
            drains.append(summary(drained))
            print(f"  round {r + 1}: flip->written {rounds[-1]}  drain->Inactive {drains[-1]}", flush=True)
        result: dict[str, Any] = {
            "machine": started_machine, "objects": args.objects, "created_s": round(created_s, 1),
            "settle_s": round(settle_from_start, 1), "rounds": rounds, "drains": drains,
            "flip_p50_ms_median": statistics.median(r["p50_ms"] for r in rounds) if rounds else None,
            "flip_p99_ms_median": statistics.median(r["p99_ms"] for r in rounds) if rounds else None,
            "drain_p50_ms_median": statistics.median(r["p50_ms"] for r in drains) if drains else None,
            "drain_p99_ms_median": statistics.median(r["p99_ms"] for r in drains) if drains else None,
            "rss_mb": {str(args.objects): round(rss_small, 1)},
            "idle_cpu_percent": None if idle_cpu is None else round(100 * idle_cpu, 2),
        }
        burst = list(range(args.rounds * sample,
                           min(args.objects, args.rounds * sample + args.burst_separate)))
        if burst:
            cpu_before = process_metric(port, "process_cpu_seconds_total")
            sum_before, count_before = reconcile_totals(port)
            latencies, total = bench.burst(burst)
            cpu = process_metric(port, "process_cpu_seconds_total") - cpu_before
            sum_after, count_after = reconcile_totals(port)
            result["burst_separate"] = {**summary(latencies), "objects": len(burst), "all_written_s": round(total, 2),
                               "controller_cpu_s": round(cpu, 2),
                               "reconciles": int(count_after - count_before),
                               "reconcile_mean_ms": round(1000 * (sum_after - sum_before)
                                                          / max(count_after - count_before, 1), 1)}
            print(f"  {len(burst)} separate schedules flipped at once: {result['burst_separate']}",
                  flush=True)
        if args.burst:
            if args.profile:
                args.profile.mkdir(parents=True, exist_ok=True)
            result["market_open"] = market_open(
                bench, kubeconfig, sa, port, log, args.burst, args.workers, args.burst_rounds,
                {f"{NS}/bdup-{i:05d}" for i in conflicted},
                (controller.pid, args.profile) if args.profile else None)
        if args.grow_to > args.objects:
            print(f"growing to {args.grow_to} objects...", flush=True)
            grow_start = time.monotonic()
            bench.create_many(range(args.objects, args.grow_to), light=True)
            bench.wait_phases([f"cap-{i:05d}" for i in range(args.objects, args.grow_to)],
                              {"Inactive", "HandingBack"}, 1800)
            result["grow_settle_s"] = round(time.monotonic() - grow_start, 1)
            time.sleep(2)
            result["rss_mb"][str(args.grow_to)] = round(rss_mb(port), 1)
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
        if "market_open" in result:
            opened = result["market_open"]
            print(f"market open, {opened['objects']} objects on one schedule, median of "
                  f"{len(opened['rounds'])}: bare client {opened['bare_s_median']:.2f} s, "
                  f"controller {opened['controller_s_median']:.2f} s, ratio "
                  f"{opened['ratio_median']:.2f}", flush=True)
            if opened["invariants_failed"]:
                print(f"INVARIANTS BROKEN: {', '.join(opened['invariants_failed'])}", flush=True)
                return 1
        return 0
    finally:
        for informer in informers:
            informer.stop()
        if controller is not None:
            controller.terminate()
            controller.wait(15)
        if plane is not None:
            plane.stop()


if __name__ == "__main__":
    sys.exit(main())
