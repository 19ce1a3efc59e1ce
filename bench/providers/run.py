"""Benchmark: a provider controller over 1,000 schedules costs nothing while nothing is due, and
writes each status within a second of its boundary.

Not a test. Against the real control plane (started here), with the compiled example installed,
the capital-markets provider runs as its own process and ServiceAccount (`python -m
controllers.spotschedules capital-markets`, default flags) over 1,000 CapitalMarketsSchedule objects,
each with one session a day in a fixed-offset zone (local noon-ish, so no midnight falls inside
the run). After every object has its first status:

1. quiet minutes: no schedule has a boundary in them; the provider process's CPU time
   (utime + stime from /proc/PID/stat) is read at the start and end of each. Target: < 1 s.
   What it still does in that minute: lease renewals for its partitions, watch bookmarks.
2. boundary rounds: `--groups` rounds of objects open at consecutive whole minutes after the
   quiet minutes (the last round takes every remaining object, a burst such as every schedule
   following one exchange's open). The delay of each write is the provider's own `status
   written` log timestamp minus the boundary. Target: p99 <= 1 s.

Also reported: the in-process CPU cost of evaluating every object once (what a resync, or a
boundary shared by all, costs in decisions alone).

Market open (`--burst N`, issue 16) instead: N CapitalMarketsSchedules, half in partition
`default`, half in `agents`, all open at one whole minute and close at the next; `--replicas`
provider processes (default flags but `--partitions default,agents`) lead the two partitions.
After each of the two bursts, the limit in the same run: a bare client (the provider's
ServiceAccount, `fivespot.runtime.kube.load_client`'s pool, as many threads as the provider has workers)
sends the same flip's status patches (bodies computed by the provider's own `plan`, with the
resourceVersion precondition) to N objects in a partition nobody leads. Printed per boundary:
the bare client's time, the provider's boundary -> last status written, their ratio, status
writes, reconciles and CPU per replica; the run fails unless every object was written exactly
once per boundary with the boundary's value and no bare object was touched.

    .venv/bin/python bench/providers/run.py [--objects 1000] [--quiet-minutes 2] [--groups 100 100 100]
    .venv/bin/python bench/providers --burst 1000 [--replicas 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fivespot.compiler.output import write_tree  # noqa: E402
from fivespot.compiler.pipeline import compile_repo  # noqa: E402
from fivespot.controllers.spotschedules import capital_markets  # noqa: E402
from fivespot.controllers.spotschedules.controller import DEFAULT_WORKERS as DEFAULT_PROVIDER_WORKERS  # noqa: E402
from fivespot.devcluster.build import cached_binaries, ensure_binaries  # noqa: E402
from fivespot.devcluster.clients import admin_client, service_account_kubeconfig  # noqa: E402
from fivespot.devcluster.controlplane import ControlPlane  # noqa: E402
from fivespot.devcluster.kubectl import install, kubectl  # noqa: E402

EXAMPLE = ROOT / "examples" / "agent-sandbox"
GROUP, VERSION, PLURAL = "spotschedules.5spot.finos.org", "v1alpha1", "capitalmarketsschedules"
NAMESPACE = "bench-providers"
INSTALL_NS = "5spot-system"
COMPONENT = "fivespot-provider-capital-markets"
UTC = dt.timezone.utc
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def zone_for(instant: dt.datetime) -> tuple[str, dt.timezone]:
    """A fixed-offset IANA zone (`Etc/GMT±N`) in which `instant` is between 09:00 and 15:00."""
    for hours in range(-12, 15):
        local = instant + dt.timedelta(hours=hours)
        if 9 <= local.hour < 15:
            # POSIX sign convention: Etc/GMT-3 is UTC+3.
            name = "Etc/GMT" if hours == 0 else f"Etc/GMT{'-' if hours > 0 else '+'}{abs(hours)}"
            return name, dt.timezone(dt.timedelta(hours=hours))
    raise AssertionError("no Etc/GMT zone puts this instant at midday")


def schedule(name: str, opens: dt.datetime, zone: str, offset: dt.timezone) -> dict[str, Any]:
    local = opens.astimezone(offset)
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "CapitalMarketsSchedule",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"timezone": zone, "sessions": [
            {"days": "mon-sun", "open": local.strftime("%H:%M"), "close": "20:00"}]},
    }


class LogReader(threading.Thread):
    """Collects the provider's JSON log lines (status writes with their timestamps)."""

    def __init__(self, stream: IO[str]):
        super().__init__(daemon=True)
        self.stream = stream
        self.writes: list[tuple[dt.datetime, str, Any]] = []
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        for line in self.stream:
            with self.lock:
                self.lines.append(line)
            if not line.startswith("{"):
                continue
            entry = json.loads(line)
            if entry.get("msg") == "status written":
                with self.lock:
                    self.writes.append((dt.datetime.fromisoformat(entry["ts"]), entry["key"],
                                        entry.get("active")))

    def writes_after(self, since: dt.datetime) -> list[tuple[dt.datetime, str, Any]]:
        with self.lock:
            return [w for w in self.writes if w[0] >= since]


def evaluate_cost(objects: list[dict[str, Any]]) -> float:
    """CPU seconds to evaluate every object once in this process (decisions only)."""
    now = dt.datetime.now(UTC)
    started = time.process_time()
    for obj in objects:
        capital_markets.evaluate(obj["spec"], 1, None, now)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--quiet-minutes", type=int, default=2)
    parser.add_argument("--groups", type=int, nargs="+", default=[100, 100, 100],
                        help="objects opening at each of the first boundaries; the rest open "
                             "together at one more")
    parser.add_argument("--workers", type=int, default=None,
                        help="the provider's --workers (default: its own default)")
    parser.add_argument("--burst", type=int, default=0, metavar="N",
                        help="market open instead (issue 16): N schedules open at one boundary "
                             "and close at the next, each burst against a bare client's N status "
                             "patches in the same run; prints both times and the ratio")
    parser.add_argument("--replicas", type=int, default=1,
                        help="with --burst: provider replicas (each campaigns for both partitions)")
    parser.add_argument("--lead", type=float, default=120.0, metavar="S",
                        help="with --burst: seconds of set-up before the first boundary")
    parser.add_argument("--json", type=Path, help="with --burst: also write the results here")
    args = parser.parse_args()
    if args.burst:
        raise SystemExit(market_open(args))
    if sum(args.groups) >= args.objects:
        parser.error("--groups must leave objects for the final burst")

    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at start", flush=True)
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    process: subprocess.Popen[str] | None = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            kubeconfig = plane.kubeconfig
            out = work / "out"
            write_tree(compile_repo(EXAMPLE / "config").files, out)
            namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                          for n in ("agents", NAMESPACE)]
            kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(namespaces))
            install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])

            # Boundaries: after the setup (generously 2 minutes) and the quiet minutes.
            start = dt.datetime.now(UTC)
            first = (start + dt.timedelta(minutes=2 + args.quiet_minutes + 1)).replace(
                second=0, microsecond=0)
            rest = args.objects - sum(args.groups)
            sizes = [*args.groups, rest]
            boundaries = [first + dt.timedelta(minutes=i) for i in range(len(sizes))]
            zone, offset = zone_for(first)
            objects: list[dict[str, Any]] = []
            group_of: dict[str, int] = {}
            for index, (size, boundary) in enumerate(zip(sizes, boundaries)):
                for _ in range(size):
                    name = f"s{len(objects):04d}"
                    objects.append(schedule(name, boundary, zone, offset))
                    group_of[f"{NAMESPACE}/{name}"] = index
            manifest = work / "schedules.yaml"
            manifest.write_text(yaml.safe_dump_all(objects))
            kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
            print(f"created {len(objects)} CapitalMarketsSchedules in {zone}; boundaries at "
                  f"{', '.join(b.strftime('%H:%M:%SZ') for b in boundaries)} (sizes {sizes})",
                  flush=True)

            sa_config = service_account_kubeconfig(kubeconfig, INSTALL_NS, COMPONENT,
                                                   work / "provider.kubeconfig")
            command = [sys.executable, "-m", "fivespot.controllers.spotschedules", "capital-markets",
                       "--bundle", str(out / "bundle.json"), "--kubeconfig", str(sa_config),
                       "--lease-namespace", INSTALL_NS, "--identity", "bench",
                       "--metrics-port", "0"]
            if args.workers is not None:
                command += ["--workers", str(args.workers)]
            print("provider: python -m fivespot.controllers.spotschedules capital-markets --bundle "
                  "OUT/bundle.json --kubeconfig SA.kubeconfig --lease-namespace 5spot-system "
                  "--identity bench --metrics-port 0"
                  + (f" --workers {args.workers}" if args.workers is not None else "")
                  + " (other flags default)", flush=True)
            process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
            assert process.stdout is not None
            reader = LogReader(process.stdout)
            reader.start()

            admin = admin_client(kubeconfig)
            from kubernetes import client

            api = client.CustomObjectsApi(admin)
            deadline = time.monotonic() + 120
            while True:
                items = api.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]
                published = sum(1 for i in items if (i.get("status") or {}).get("observedGeneration") == 1)
                if published == len(objects):
                    break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit(f"only {published} statuses published:\n"
                                     + "".join(reader.lines[-20:]))
                time.sleep(1)
            synced = dt.datetime.now(UTC)
            print(f"initial statuses: {len(objects)} in {(synced - start).total_seconds():.1f} s "
                  f"since creation", flush=True)

            quiet: list[float] = []
            for _ in range(args.quiet_minutes):
                if dt.datetime.now(UTC) + dt.timedelta(seconds=62) > boundaries[0]:
                    print("not enough time left before the first boundary for another quiet "
                          "minute", flush=True)
                    break
                before = cpu_seconds(process.pid)
                window_start = dt.datetime.now(UTC)
                time.sleep(60)
                quiet.append(cpu_seconds(process.pid) - before)
                late = reader.writes_after(window_start)
                print(f"quiet minute: {quiet[-1]:.2f} CPU-s, {len(late)} status writes",
                      flush=True)

            # Provider CPU over each boundary round: from 2 s before it to 30 s after the burst.
            round_cpu: list[float] = []
            for boundary in boundaries:
                time.sleep(max(0.0, (boundary - dt.timedelta(seconds=2)
                                     - dt.datetime.now(UTC)).total_seconds()))
                before = cpu_seconds(process.pid)
                horizon = boundary + dt.timedelta(seconds=50)
                time.sleep(max(0.0, (horizon - dt.datetime.now(UTC)).total_seconds()))
                round_cpu.append(cpu_seconds(process.pid) - before)
            delays: dict[int, list[float]] = {i: [] for i in range(len(sizes))}
            for when, key, active in reader.writes_after(boundaries[0] - dt.timedelta(seconds=5)):
                group = group_of.get(key)
                if group is not None and active is True:
                    delays[group].append((when - boundaries[group]).total_seconds())
            print("\nround  objects  written  p50_s  p99_s  max_s  min_s  provider_cpu_s")
            all_delays: list[float] = []
            for group, size in enumerate(sizes):
                values = delays[group]
                all_delays += values
                if values:
                    print(f"{group + 1:5d}  {size:7d}  {len(values):7d}  "
                          f"{statistics.median(values):5.3f}  {percentile(values, 0.99):5.3f}  "
                          f"{max(values):5.3f}  {min(values):5.3f}  {round_cpu[group]:14.2f}")
                else:
                    print(f"{group + 1:5d}  {size:7d}  {0:7d}  (no writes seen)")
            small = [d for g in range(len(args.groups)) for d in delays[g]]
            if quiet:
                print(f"\nquiet-minute CPU: median {statistics.median(quiet):.2f} s "
                      f"(min {min(quiet):.2f}, max {max(quiet):.2f}) over {len(quiet)} minute(s)")
            if small:
                print(f"boundary -> status write, rounds of {args.groups}: p50 "
                      f"{statistics.median(small):.3f} s, p99 {percentile(small, 0.99):.3f} s")
            print(f"boundary -> status write, all {len(all_delays)} writes: p50 "
                  f"{statistics.median(all_delays):.3f} s, p99 {percentile(all_delays, 0.99):.3f} s")
            print(f"evaluate every object once (in-process, decisions only): "
                  f"{evaluate_cost(objects):.2f} CPU-s for {len(objects)} objects")
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        plane.stop()


# --- market open: every schedule at one boundary, against a bare client (issue 16) --------------

BARE_NS = "bench-bare"
"""The bare client's objects: a namespace in a partition no provider replica campaigns for, so the
providers' informers still receive every event of the bare writes (the same watch fan-out) and
drop it."""
BURST_NAMESPACES = ("bench-providers", "agents")
"""The market-open objects, half in each: `default` and `agents`, the example's two partitions."""


def bench_config(tmp: Path) -> Path:
    """The example config with one more partition, `bare` (namespace bench-bare), for the bare
    client's objects; the providers campaign only for the example's own partitions."""
    config = tmp / "config"
    shutil.copytree(EXAMPLE / "config", config)
    platform_file = config / "platform.yaml"
    document = yaml.safe_load(platform_file.read_text())
    document["spec"]["partitions"].append({"name": "bare", "namespaces": [BARE_NS]})
    platform_file.write_text(yaml.safe_dump(document, sort_keys=False))
    return config


def market_schedule(name: str, namespace: str, opens: dt.datetime, closes: dt.datetime,
                    zone: str, offset: dt.timezone) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "CapitalMarketsSchedule",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"timezone": zone, "sessions": [
            {"days": "mon-sun", "open": opens.astimezone(offset).strftime("%H:%M"),
             "close": closes.astimezone(offset).strftime("%H:%M")}]},
    }


def metrics_of(port: int) -> dict[str, float]:
    """The provider's /metrics as {"name{labels}": value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                values[name] = float(value)
            except ValueError:
                continue
    return values


def counters(port: int) -> dict[str, float]:
    """Status writes and reconciles so far of one capital-markets provider process."""
    values = metrics_of(port)
    return {
        "writes": values.get(f'fivespot_writes_total{{controller="{COMPONENT}",what="status"}}', 0.0),
        "reconciles": values.get(
            f'fivespot_reconcile_duration_seconds_count{{controller="{COMPONENT}"}}', 0.0),
    }


def led(port: int) -> list[str]:
    """The partitions one provider process leads now (`fivespot_is_leader`)."""
    values = metrics_of(port)
    return sorted(p for p in ("agents", "default")
                  if values.get(f'fivespot_is_leader{{controller="{COMPONENT}",partition="{p}"}}') == 1.0)


def bare_status_patches(sa_config: Path, api: Any, instant: dt.datetime, threads: int) -> tuple[float, int]:
    """The limit: the status patches the provider would send for every bare object at `instant`
    (the same bodies, resourceVersion precondition included, computed beforehand), sent by the
    provider's own client configuration (`fivespot.runtime.kube.load_client`: its ServiceAccount, its
    connection pool) from as many threads as the provider has workers. Seconds, patches sent."""
    from fivespot.controllers.spotschedules.reconcile import plan
    from fivespot.runtime import kube

    items = api.list_namespaced_custom_object(GROUP, VERSION, BARE_NS, PLURAL)["items"]
    patches = [(item["metadata"]["name"], plan(item, capital_markets.evaluate, instant).patch)
               for item in items]
    to_send = [(name, patch) for name, patch in patches if patch is not None]
    client = kube.load_client(sa_config)

    def one(entry: tuple[str, dict[str, Any]]) -> None:
        name, patch = entry
        kube.merge_patch(client, kube.resource_path(GROUP, VERSION, PLURAL, BARE_NS, name, "status"),
                         patch, field_manager="bench-bare")

    try:
        with ThreadPoolExecutor(threads) as pool:
            started = time.monotonic()
            list(pool.map(one, to_send))
            return time.monotonic() - started, len(to_send)
    finally:
        client.close()


def market_open(args: argparse.Namespace) -> int:
    """`--burst N`: N CapitalMarketsSchedules open at one whole minute and close at the next (two
    bursts of N status writes), each burst followed by a bare client's N status patches of the
    same flip."""
    n = args.burst
    workers = args.workers or DEFAULT_PROVIDER_WORKERS
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} at start", flush=True)
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    processes: list[subprocess.Popen[str]] = []
    readers: list[LogReader] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            kubeconfig = plane.kubeconfig
            out = work / "out"
            write_tree(compile_repo(bench_config(work)).files, out)
            namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                          for ns in (*BURST_NAMESPACES, BARE_NS)]
            kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(namespaces))
            install(kubeconfig, out, [EXAMPLE / "consumer" / "virtualmachinepools.yaml"])

            opens = (dt.datetime.now(UTC) + dt.timedelta(seconds=args.lead + 59)).replace(
                second=0, microsecond=0)
            closes = opens + dt.timedelta(minutes=1)
            zone, offset = zone_for(opens)
            objects = [market_schedule(f"m{i:04d}", BURST_NAMESPACES[i % 2], opens, closes, zone, offset)
                       for i in range(n)]
            bare = [market_schedule(f"b{i:04d}", BARE_NS, opens, closes, zone, offset) for i in range(n)]
            manifest = work / "schedules.yaml"
            manifest.write_text(yaml.safe_dump_all(objects + bare))
            kubectl(kubeconfig, "apply", "--server-side", "-f", str(manifest))
            keys = {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objects}
            print(f"created {n} CapitalMarketsSchedules ({n // 2 + n % 2} in partition default, "
                  f"{n // 2} in agents) and {n} bare ones in {BARE_NS}; every one opens at "
                  f"{opens:%H:%M:%SZ} and closes at {closes:%H:%M:%SZ}", flush=True)

            sa_config = service_account_kubeconfig(kubeconfig, INSTALL_NS, COMPONENT,
                                                   work / "provider.kubeconfig")
            for replica in range(args.replicas):
                command = [sys.executable, "-m", "fivespot.controllers.spotschedules", "capital-markets",
                           "--bundle", str(out / "bundle.json"), "--kubeconfig", str(sa_config),
                           "--lease-namespace", INSTALL_NS, "--identity", f"bench-{replica}",
                           "--metrics-port", "0", "--partitions", "default,agents",
                           "--workers", str(workers)]
                process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)
                assert process.stdout is not None
                processes.append(process)
                readers.append(LogReader(process.stdout))
                readers[-1].start()
            print(f"provider: {args.replicas} x python -m fivespot.controllers.spotschedules capital-markets "
                  f"--partitions default,agents --workers {workers} (other flags default)", flush=True)

            admin = admin_client(kubeconfig)
            from kubernetes import client

            api = client.CustomObjectsApi(admin)
            def ours() -> list[dict[str, Any]]:
                """The market-open objects as the API server has them (the example's own
                schedules in `agents` left out)."""
                return [i for ns in BURST_NAMESPACES
                        for i in api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
                        if f"{ns}/{i['metadata']['name']}" in keys]

            deadline = time.monotonic() + 180
            while True:
                published = sum(1 for i in ours()
                                if (i.get("status") or {}).get("observedGeneration") == 1)
                if published == n:
                    break
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise SystemExit(f"only {published} statuses published:\n"
                                     + "".join(line for r in readers for line in r.lines[-10:]))
                time.sleep(1)
            ports = [int(json.loads(next(line for line in r.lines if '"provider starting"' in line))
                         ["metrics_port"]) for r in readers]
            # Leadership spreads (a replica holding two fewer asks for one): wait until every
            # partition has one leader and, with several replicas, no replica leads both.
            spread_deadline = time.monotonic() + 60
            while True:
                leading = [led(port) for port in ports]
                each = sorted(p for ps in leading for p in ps)
                if each == ["agents", "default"] and (len(ports) == 1 or max(map(len, leading)) == 1):
                    break
                if time.monotonic() > spread_deadline:
                    print("leadership did not spread within 60 s", flush=True)
                    break
                time.sleep(0.5)
            print(f"initial statuses published; partitions led: "
                  + ", ".join(f"bench-{i}: {','.join(ps) or '-'}" for i, ps in enumerate(leading)),
                  flush=True)
            # The bare objects' first status (the provider's initial publish), not timed.
            bare_status_patches(sa_config, api, opens - dt.timedelta(seconds=30), workers)

            rounds: list[dict[str, Any]] = []
            for boundary, active in ((opens, True), (closes, False)):
                margin = (boundary - dt.datetime.now(UTC)).total_seconds()
                if margin < 2:
                    raise SystemExit(f"{-margin:.1f} s late for the boundary {boundary:%H:%M:%SZ}: "
                                     f"the set-up took longer than --lead {args.lead}; pass a "
                                     "larger one")
                time.sleep(margin - 1.5)
                before = [counters(port) for port in ports]
                cpu_before = [cpu_seconds(process.pid) for process in processes]
                written: dict[str, list[tuple[dt.datetime, Any]]] = {}
                settle = time.monotonic() + 45
                while time.monotonic() < settle:
                    time.sleep(0.5)
                    written = {}
                    for reader in readers:
                        for when, key, value in reader.writes_after(boundary - dt.timedelta(seconds=1)):
                            written.setdefault(key, []).append((when, value))
                    if keys <= written.keys() and time.monotonic() > settle - 40:
                        break
                time.sleep(1.0)  # the echo reconciles of the last writes
                after = [counters(port) for port in ports]
                cpu = [cpu_seconds(process.pid) - was for process, was in zip(processes, cpu_before)]
                written = {}
                for reader in readers:
                    for when, key, value in reader.writes_after(boundary - dt.timedelta(seconds=1)):
                        written.setdefault(key, []).append((when, value))
                delays = [(w[0][0] - boundary).total_seconds() for k, w in written.items() if k in keys]
                # The limit, right after the burst: the same status patches (this boundary's flip)
                # to the bare objects, before the next boundary.
                bare_s, sent = bare_status_patches(sa_config, api, boundary + dt.timedelta(seconds=1),
                                                   workers)
                rounds.append({
                    "boundary": f"{boundary:%H:%M:%SZ}", "active": active,
                    "bare_s": round(bare_s, 2), "bare_patches": sent,
                    "written": len(delays),
                    "all_written_s": round(max(delays), 2) if delays else None,
                    "p50_s": round(statistics.median(delays), 3) if delays else None,
                    "p99_s": round(percentile(delays, 0.99), 3) if delays else None,
                    "ratio": round(max(delays) / bare_s, 2) if delays else None,
                    "status_writes_per_replica": [int(a["writes"] - b["writes"]) for a, b in zip(after, before)],
                    "reconciles_per_replica": [int(a["reconciles"] - b["reconciles"]) for a, b in zip(after, before)],
                    "cpu_s_per_replica": [round(c, 2) for c in cpu],
                    "partitions_led_per_replica": [led(port) for port in ports],
                    "invariants": {
                        "every_object_written": keys <= written.keys(),
                        "written_once": all(len(w) == 1 for k, w in written.items() if k in keys),
                        "the_boundary_value": all(v is active for k, w in written.items() if k in keys
                                                  for _, v in w),
                        "no_bare_object_written": not any(k.startswith(BARE_NS + "/") for k in written),
                    },
                })
                r = rounds[-1]
                print(f"boundary {r['boundary']} (active={active}): bare client {bare_s:.2f} s for "
                      f"{sent} status patches; provider: {r['written']} written, last after "
                      f"{r['all_written_s']} s, p50 {r['p50_s']} s, p99 {r['p99_s']} s; ratio "
                      f"{r['ratio']}; status writes per replica {r['status_writes_per_replica']}, "
                      f"reconciles per replica {r['reconciles_per_replica']}, CPU-s per replica "
                      f"{r['cpu_s_per_replica']}", flush=True)
            final = ours()
            closed = sum(1 for i in final if (i.get("status") or {}).get("active") is False)
            failed = sorted({key for r in rounds for key, held in r["invariants"].items() if not held})
            if closed != n:
                failed.append(f"only {closed} of {n} read active=false after the close")
            result = {"objects": n, "replicas": args.replicas, "workers": workers,
                      "partitions_led": leading, "rounds": rounds,
                      "all_written_s_median": statistics.median(
                          r["all_written_s"] or 0.0 for r in rounds),
                      "bare_s_median": statistics.median(r["bare_s"] for r in rounds),
                      "ratio_median": statistics.median(r["ratio"] or 0.0 for r in rounds),
                      "invariants_failed": failed}
            print(json.dumps(result, indent=2))
            if args.json:
                args.json.write_text(json.dumps(result, indent=2) + "\n")
            print(f"market open, {n} CapitalMarketsSchedules at one boundary, {args.replicas} "
                  f"replica(s) x 2 partitions, median of {len(rounds)} boundaries: bare client "
                  f"{result['bare_s_median']:.2f} s, provider {result['all_written_s_median']:.2f} s, "
                  f"ratio {result['ratio_median']:.2f}", flush=True)
            if failed:
                print(f"INVARIANTS BROKEN: {', '.join(failed)}", flush=True)
                return 1
            return 0
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        plane.stop()


if __name__ == "__main__":
    main()
