"""fivespot beside the tools a platform team would pick instead (issue 39), on one local control
plane: kube-green and GoKubeDownscaler, built from the Go module proxy (`fivespot.devcluster.peers`,
pinned in tools/peers/versions) and run as processes with their documented configuration. Not a
test. `make bench-peers`.

The control plane is the one `fivespot dev` starts (`fivespot.devcluster.dev.DevSession`, the bench's own
config in bench/peers/config: a CapacityConsumer for Deployments' spec.replicas, one tenant of 20
namespaces, the CapitalMarketsSchedule provider), with the kube-apiserver's audit log on. fivespot's
components run as `dev` runs them (the compiled Deployments' arguments, each its own
ServiceAccount, the local webhook with the compiled webhook configuration). Each tool gets the
same work, in its own 20 namespaces so that all can run at once without fighting over a field:
`--targets` Deployments at 1 replica, spread evenly;

- fivespot: one CapitalMarketsSchedule per namespace (minute-precision sessions; the awake
  windows) and one ScheduledCapacity per Deployment (spec.replicas, activeValue 1);
- kube-green: one SleepInfo per namespace (`sleepAt`/`wakeUpAt`, every weekday), its defaults
  (`--max-concurrent-reconciles` 20, `--sleep-delta` 60 s), as a cluster-admin ServiceAccount,
  with `--leader-elect` as its shipped manifests (config/manager, the Helm chart) run it: its
  Lease's namespace comes from the Pod's service-account namespace file, which the bench gives it
  in a mount namespace of its own (`--no-kube-green-leader-elect`: its flag's default, no Lease);
- GoKubeDownscaler: a `downscaler/downtime` annotation per namespace (relative timespans), its
  default `--interval` 30 s and `--grace-period 0` (its default 15 minutes would ignore the
  bench's freshly created Deployments), as a cluster-admin ServiceAccount;
- a bare client (bench/capacity's: `--workers` threads, the capacity controller's 4) sending
  the same merge patches to Deployments nobody governs, as its own cluster-admin ServiceAccount
  (its writes do not pass fivespot's target-guard webhook; the capacity controller's do).

What it measures (times from the API server: its audit log's timestamps and this process's
watches, never the tools' logs):

1. boundary: `--rounds` whole-minute boundaries per tool (sleep, wake, sleep, ...), each tool in
   its own minute so no two tools' write bursts meet: seconds from the boundary to the first
   and the last of its Deployments written (the audit log's ResponseComplete time of each
   tool's first write of each Deployment; a watch confirms each reads the boundary's value),
   and to its own status saying so (fivespot: every ScheduledCapacity's last status write;
   kube-green: every SleepInfo's status write, which it makes before its Deployment writes;
   GoKubeDownscaler keeps no status); the bare client's time for the same writes (client side),
   in kube-green's minute after its writes (the first recorded run sent them in fivespot's
   minute, 25 s after its boundary, where fivespot's own status writes were still running in
   three rounds of five). Each round also says where the machine's cores went up to its last
   write (`CpuTrace`: every process's CPU seconds, read every 0.1 s from a second before the
   boundary and interpolated between readings; the bare client's runs are read before and
   after), so the table can name the bound: the API server, or a tool's own processes.
2. outage: every tool's processes are killed 20 s before one shared (wake) boundary and started
   again 70 s after it (90 s down); 60 s after they are back, how many of each tool's
   Deployments are right.
3. idle: before the first boundary, with nothing due, each tool's writes, API requests (from the
   audit log, by identity) and CPU seconds (its processes' utime + stime), scaled to an hour
   (`--only-idle` stops after it: `--lead 400` idles about five minutes at 1,000 targets). The
   window opens `IDLE_AFTER_S` (20 s) after the set-up settled; what each tool sent in those
   20 s is reported apart (`settle_tail`).
4. memory: each tool's resident set (VmRSS, and the peak VmHWM) at `--targets` after the rounds,
   and at `--grow-to` targets after one more boundary shared by all (one round; contended, so
   its times are reported but are not the boundary figure), with each process's CPU seconds
   (the control plane's and the bench's too) from the start of growing to that boundary and
   from the boundary to the reading, and each tool's writes in each 5 s after it.

Every tool's processes are supervised as the kubelet would (`Kubelet`): one that exits on its own
is started again after the kubelet's back-off (10 s, doubling), and the table counts restarts.

    .venv/bin/python bench/peers/run.py [--targets 1000] [--rounds 5] [--grow-to 10000] [--json F]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fivespot.api.identities import CAPACITY_CONTROLLER  # noqa: E402
from fivespot.controllers.cli import CAPACITY_WORKERS  # noqa: E402  (the bare client's threads)
from fivespot.devcluster.clients import service_account_kubeconfig  # noqa: E402
from fivespot.devcluster.dev import DevSession  # noqa: E402
from fivespot.devcluster.kubectl import apply, wait_established  # noqa: E402
from fivespot.devcluster.peers import PeerProcess as Peer, cluster_admin, ensure_peers, peer_processes  # noqa: E402
from fivespot.runtime import kube  # noqa: E402
from fivespot.runtime.informer import Informer  # noqa: E402

HERE: Final = Path(__file__).resolve().parent
UTC: Final = dt.timezone.utc
NAMESPACES: Final = 20
TOOLS: Final = ("fivespot", "kube-green", "gokubedownscaler")
PREFIX: Final = {"fivespot": "fs", "kube-green": "kg", "gokubedownscaler": "kd", "bare": "bare"}
PEERS_NS: Final = "peers-system"
DEPLOYMENTS: Final = ("apps", "v1", "deployments")
SCAP: Final = ("5spot.finos.org", "v1alpha1", "scheduledcapacities")
CMS: Final = ("spotschedules.5spot.finos.org", "v1alpha1", "capitalmarketsschedules")
SLEEPINFO: Final = ("kube-green.com", "v1alpha1", "sleepinfos")
DOWNTIME: Final = "downscaler/downtime"
FIVESPOT_CONTROLLERS: Final = ("fivespot-capacity-controller", "fivespot-provider-capital-markets",
                               "fivespot-audit-controller")
"""What the outage kills of fivespot: its controllers (the webhook is a separate Deployment)."""
OUTAGE_BEFORE_S: Final = 20.0
OUTAGE_AFTER_S: Final = 70.0
RIGHT_AFTER_S: Final = 60.0
FIVESPOT_NS: Final = "5spot-system"
"""fivespot's install namespace in the bench (bench/peers/config/platform.yaml)."""
BARE: Final = ("bare", "bare-guarded")
"""The bare client's two runs each round: as itself (cluster-admin: no webhook sees its writes)
and as fivespot's capacity identity, whose writes fivespot's target guard reviews."""
GUARDED_VALUE: Final = 2
"""What the guarded run writes: never the 0 or 1 the plain run just wrote, so each patch is a
change (the API server skips the storage write of a patch that changes nothing)."""
IDLE_AFTER_S: Final = 20.0
"""The idle window opens this long after the set-up settled, for every tool: the set-up's tail
(the last status writes, and what a tool does once after its last write, such as fivespot's
lease release 10 s later, decision 0043) is reported apart (`settle_tail`), not counted as idle."""
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
TRACE_EVERY_S: Final = 0.1
"""How often a round's `CpuTrace` reads every process's CPU seconds."""


def _script(relative: str) -> ModuleType:
    """Another bench script as a module (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(relative.replace("/", "_"), ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CAPACITY: Final = _script("bench/capacity/run.py")
PROVIDERS: Final = _script("bench/providers/run.py")


def namespaces(tool: str) -> list[str]:
    return [f"{PREFIX[tool]}-{i:02d}" for i in range(NAMESPACES)]


def targets(tool: str, start: int, stop: int) -> list[tuple[str, str]]:
    """Deployments start..stop-1 of a tool, (namespace, name), spread evenly over its namespaces."""
    return [(f"{PREFIX[tool]}-{i % NAMESPACES:02d}", f"d-{i:05d}") for i in range(start, stop)]


def whole_minute_after(instant: dt.datetime) -> dt.datetime:
    return (instant + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def with_descendants(root: int) -> list[int]:
    """`root` and every process below it (from /proc's parent ids)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


# --- what the watches saw ------------------------------------------------------------------------


@dataclass
class Seen:
    """Every change this process's watches delivered, with its arrival time (time.time()): the
    check that each target reads the boundary's value, and the outage's times."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    replicas: list[tuple[float, str, str, int | None]] = field(default_factory=list)
    phases: list[tuple[float, str, str, str]] = field(default_factory=list)

    def on_deployment(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        value = (obj.get("spec") or {}).get("replicas")
        if old is not None and (old.get("spec") or {}).get("replicas") == value:
            return
        meta = obj["metadata"]
        with self.lock:
            self.replicas.append((time.time(), meta["namespace"], meta["name"], value))

    def on_scap(self, event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        phase = (obj.get("status") or {}).get("phase")
        if old is not None and (old.get("status") or {}).get("phase") == phase:
            return
        meta = obj["metadata"]
        with self.lock:
            self.phases.append((time.time(), meta["namespace"], meta["name"], str(phase)))

    def written(self, tool: str, since: float, value: int,
                which: set[tuple[str, str]]) -> dict[tuple[str, str], float]:
        """When each of `which` first read `value` after `since`."""
        found: dict[tuple[str, str], float] = {}
        with self.lock:
            for when, namespace, name, replicas in self.replicas:
                key = (namespace, name)
                if when >= since and replicas == value and key in which and key not in found:
                    found[key] = when
        return found

    def fivespot_status(self, since: float, phase: str, which: set[tuple[str, str]]) -> float | None:
        found: dict[tuple[str, str], float] = {}
        with self.lock:
            for when, namespace, name, seen in self.phases:
                key = (namespace, name)
                if when >= since and seen == phase and key in which and key not in found:
                    found[key] = when
        return max(found.values()) if len(found) == len(which) else None



# --- the world -----------------------------------------------------------------------------------


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def scheduled_capacity(name: str) -> dict[str, Any]:
    return {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
            "metadata": {"name": name},
            "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                  "kind": "CapitalMarketsSchedule", "name": "bench"},
                     "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "capacity": {"path": "spec.replicas", "activeValue": 1}}}


def local(instant: dt.datetime, offset: dt.timezone) -> str:
    return instant.astimezone(offset).strftime("%H:%M")


def market_sessions(awake: list[tuple[dt.datetime, dt.datetime]],
                    offset: dt.timezone) -> list[dict[str, str]]:
    return [{"days": "mon-sun", "open": local(a, offset), "close": local(b, offset)} for a, b in awake]


def downtime(asleep: list[tuple[dt.datetime, dt.datetime]], zone: str, offset: dt.timezone) -> str:
    return ",".join(f"Mon-Sun {local(a, offset)}-{local(b, offset)} {zone}" for a, b in asleep)


class World:
    """The objects of the bench, created and changed as the admin."""

    def __init__(self, kubeconfig: Path, threads: int = 8):
        self.kubeconfig = kubeconfig
        self.api = kube.load_client(kubeconfig, pool_size=threads * 2)
        self.pool = ThreadPoolExecutor(threads)

    def namespace(self, name: str) -> None:
        try:
            kube.request(self.api, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
        except kube.ApiError as error:
            if not error.conflict:
                raise

    def deployments(self, which: list[tuple[str, str]], replicas: int = 1) -> None:
        def one(key: tuple[str, str]) -> None:
            kube.request(self.api, "POST", kube.resource_path(*DEPLOYMENTS, namespace=key[0]),
                         body=deployment(key[1], replicas))
        list(self.pool.map(one, which))

    def scheduled_capacities(self, which: list[tuple[str, str]]) -> None:
        def one(key: tuple[str, str]) -> None:
            kube.request(self.api, "POST", kube.resource_path(*SCAP, namespace=key[0]),
                         body=scheduled_capacity(key[1]))
        list(self.pool.map(one, which))

    def market(self, namespace: str, zone: str, sessions: list[dict[str, str]]) -> None:
        body = {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                "kind": "CapitalMarketsSchedule", "metadata": {"name": "bench"},
                "spec": {"timezone": zone, "sessions": sessions}}
        path = kube.resource_path(*CMS, namespace=namespace)
        try:
            kube.request(self.api, "POST", path, body=body)
        except kube.ApiError as error:
            if not error.conflict:
                raise
            kube.merge_patch(self.api, f"{path}/bench", {"spec": {"sessions": sessions}})

    def sleepinfo(self, namespace: str, zone: str, sleep_at: str, wake_up_at: str) -> None:
        spec = {"weekdays": "*", "sleepAt": sleep_at, "wakeUpAt": wake_up_at, "timeZone": zone}
        path = kube.resource_path(*SLEEPINFO, namespace=namespace)
        try:
            kube.request(self.api, "POST", path, body={
                "apiVersion": "kube-green.com/v1alpha1", "kind": "SleepInfo",
                "metadata": {"name": "bench"}, "spec": spec})
        except kube.ApiError as error:
            if not error.conflict:
                raise
            kube.merge_patch(self.api, f"{path}/bench", {"spec": spec})

    def annotate(self, namespace: str, value: str) -> None:
        kube.merge_patch(self.api, f"/api/v1/namespaces/{namespace}",
                         {"metadata": {"annotations": {DOWNTIME: value}}})

    def replicas(self, which: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
        found: dict[tuple[str, str], int] = {}
        for namespace in sorted({n for n, _ in which}):
            items = kube.request(self.api, "GET", kube.resource_path(*DEPLOYMENTS, namespace=namespace))
            for item in items["items"]:
                found[(namespace, item["metadata"]["name"])] = item["spec"].get("replicas")
        return {key: found[key] for key in which if key in found}

    def cluster_admin(self, name: str) -> Path:
        """A kubeconfig for ServiceAccount peers-system/NAME bound to cluster-admin."""
        return cluster_admin(self.kubeconfig, self.api, PEERS_NS, name)

    def capacity_identity(self, namespace: str) -> Path:
        """A kubeconfig for fivespot's capacity controller's ServiceAccount, which may also
        patch the bare client's Deployments here (a Role in each bare namespace, the bench's
        only): its patches pass fivespot's target guard exactly as the controller's do."""
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        for bare in namespaces("bare"):
            for path, body in (
                (f"{rbac}/namespaces/{bare}/roles", {
                    "metadata": {"name": "bench-guarded-bare"},
                    "rules": [{"apiGroups": ["apps"], "resources": ["deployments"],
                               "verbs": ["get", "patch"]}]}),
                (f"{rbac}/namespaces/{bare}/rolebindings", {
                    "metadata": {"name": "bench-guarded-bare"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                "name": "bench-guarded-bare"},
                    "subjects": [{"kind": "ServiceAccount", "name": CAPACITY_CONTROLLER,
                                  "namespace": namespace}]})):
                try:
                    kube.request(self.api, "POST", path, body=body)
                except kube.ApiError as error:
                    if not error.conflict:
                        raise
        return service_account_kubeconfig(self.kubeconfig, namespace, CAPACITY_CONTROLLER,
                                          self.kubeconfig.parent / "bench-guarded-bare.kubeconfig")


# --- the bench -----------------------------------------------------------------------------------


@dataclass
class Bench:
    session: DevSession
    world: World
    seen: Seen
    peers: dict[str, Peer]
    audit_log: Path
    targets: int
    zone: str = "UTC"
    offset: dt.timezone = UTC
    results: dict[str, Any] = field(default_factory=dict)

    def pids(self, tool: str) -> list[int]:
        """The tool's running processes and their descendants (the webhook's workers are
        children of its master)."""
        if tool == "fivespot":
            roots = [p.pid for _, p in self.session.processes if p.poll() is None]
        else:
            process = self.peers[tool].process
            roots = [process.pid] if process is not None and process.poll() is None else []
        return [pid for root in roots for pid in with_descendants(root)]

    def cpu(self, tool: str) -> float:
        """CPU seconds so far of the tool's running processes and their descendants."""
        return sum(cpu_seconds(pid) for pid in self.pids(tool))

    def fivespot_groups(self) -> dict[str, list[int]]:
        """Each running fivespot component's process ids (its process and descendants)."""
        return {name: with_descendants(p.pid)
                for name, p in self.session.processes if p.poll() is None}

    def fivespot_cpu(self) -> dict[str, float]:
        """CPU seconds so far of each running fivespot component (its process and descendants)."""
        return {name: sum(cpu_seconds(pid) for pid in pids)
                for name, pids in self.fivespot_groups().items()}

    def process_groups(self) -> dict[str, list[int]]:
        """Everything that shares the machine's cores, by name, with its process ids: each
        fivespot component, each peer (processes and children), the control plane's processes
        (kube-apiserver, etcd). This bench's own process is read apart (`cpu_of`)."""
        plane = self.session.plane
        return {**{f"fivespot {name}": pids for name, pids in self.fivespot_groups().items()},
                **{tool: self.pids(tool) for tool in TOOLS if tool != "fivespot"},
                **{name: [process.pid] for name, process in
                   (plane.processes if plane is not None else [])}}

    def users(self, tool: str) -> tuple[str, ...]:
        if tool == "fivespot":
            return ("system:serviceaccount:5spot-system:",)
        return (f"system:serviceaccount:{PEERS_NS}:{tool}",)

    def stop(self, tool: str) -> None:
        if tool == "fivespot":
            for name in FIVESPOT_CONTROLLERS:
                self.session.stop_component(name)
        else:
            self.peers[tool].kill()

    def start(self, tool: str) -> None:
        if tool == "fivespot":
            for name in FIVESPOT_CONTROLLERS:
                self.session.restart_component(name)
        else:
            self.peers[tool].start()

    def memory(self, tool: str) -> dict[str, float]:
        values = [memory_mb(pid) for pid in self.pids(tool)]
        return {"rss_mb": round(sum(v[0] for v in values), 1),
                "peak_mb": round(sum(v[1] for v in values), 1), "processes": len(values)}


CRASH_BACKOFF_S: Final = (10.0, 20.0, 40.0, 80.0, 160.0, 300.0)
"""The kubelet's delays before restarting a container that exited (restartPolicy Always; its
CrashLoopBackOff: 10 s, doubling, capped at 5 minutes)."""


class Kubelet:
    """Restarts a tool's process that exits on its own, as the kubelet restarts a Pod's container:
    each tool's shipped manifests run it under a Deployment, so a process that exits (kube-green's
    controller-runtime manager exits when it cannot renew its Lease in time, as it did under load
    in an earlier run) is back after the kubelet's back-off, not gone for the rest of the run.
    Every restart is recorded (tool, process, exit code, when), and the table counts them. The
    outage's deliberate stops are not restarts: the bench marks a tool down while it is out."""

    def __init__(self, bench: "Bench") -> None:
        self.bench = bench
        self.lock = threading.Lock()
        self.down: set[str] = set()
        self.restarts: list[dict[str, Any]] = []
        self._due: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def out(self, tool: str) -> None:
        """The tool is stopped on purpose (the outage): its processes are not restarted."""
        with self.lock:
            self.down.add(tool)
            self.bench.stop(tool)

    def back(self, tool: str) -> None:
        with self.lock:
            self.bench.start(tool)
            self.down.discard(tool)

    def _exited(self, tool: str) -> list[tuple[str, int]]:
        if tool == "fivespot":
            return [(name, p.returncode) for name, p in self.bench.session.processes
                    if p.poll() is not None]
        process = self.bench.peers[tool].process
        if process is not None and process.poll() is not None:
            return [(tool, process.returncode)]
        return []

    def _restart(self, tool: str, name: str) -> None:
        if tool == "fivespot":
            session = self.bench.session
            session.processes[:] = [(n, p) for n, p in session.processes if n != name]
            session.restart_component(name)
        else:
            self.bench.peers[tool].kill()
            self.bench.peers[tool].start()

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            with self.lock:
                for tool in TOOLS:
                    if tool in self.down:
                        continue
                    for name, code in self._exited(tool):
                        key = (tool, name)
                        if key not in self._due:
                            count = sum(1 for r in self.restarts if r["process"] == name)
                            delay = CRASH_BACKOFF_S[min(count, len(CRASH_BACKOFF_S) - 1)]
                            self._due[key] = time.monotonic() + delay
                            print(f"kubelet: {name} exited ({code}) at "
                                  f"{dt.datetime.now(UTC):%H:%M:%S}; restart in {delay:.0f} s", flush=True)
                        elif time.monotonic() >= self._due[key]:
                            del self._due[key]
                            self._restart(tool, name)
                            self.restarts.append({"tool": tool, "process": name, "exit_code": code,
                                                  "restarted": f"{dt.datetime.now(UTC):%H:%M:%SZ}"})


def audit_counts(log: Path, start: int, stop: int, prefixes: tuple[str, ...]) -> tuple[int, int]:
    """(requests, writes) in the audit log between two byte offsets by users starting with one of
    `prefixes`, each request counted once (a watch logs when it starts and when it ends)."""
    requests: set[str] = set()
    writes: set[str] = set()
    with open(log, "rb") as handle:
        handle.seek(start)
        chunk = handle.read(stop - start).decode(errors="replace")
    for line in chunk.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        user = (entry.get("user") or {}).get("username", "")
        if not user.startswith(prefixes):
            continue
        requests.add(entry["auditID"])
        if entry.get("verb") in ("create", "update", "patch", "delete", "deletecollection"):
            writes.add(entry["auditID"])
    return len(requests), len(writes)


@dataclass(frozen=True)
class Write:
    """One successful write, as the API server's audit log records it."""

    at: float
    """stageTimestamp of ResponseComplete: when the API server answered (epoch seconds)."""
    user: str
    resource: str
    subresource: str
    namespace: str
    name: str


def audit_writes(log: Path, start: int) -> list[Write]:
    """Every successful create, update or patch in the audit log from byte offset `start`."""
    found = []
    with open(log, "rb") as handle:
        handle.seek(start)
        lines = handle.read().decode(errors="replace").splitlines()
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if (entry.get("stage") != "ResponseComplete"
                or entry.get("verb") not in ("create", "update", "patch")
                or not 200 <= int((entry.get("responseStatus") or {}).get("code", 0)) < 300):
            continue
        ref = entry.get("objectRef") or {}
        stamp = dt.datetime.fromisoformat(entry["stageTimestamp"].replace("Z", "+00:00"))
        found.append(Write(stamp.timestamp(), entry["user"]["username"], ref.get("resource", ""),
                           ref.get("subresource", ""), ref.get("namespace", ""), ref.get("name", "")))
    return found


def sleep_until(instant: dt.datetime) -> None:
    time.sleep(max(0.0, (instant - dt.datetime.now(UTC)).total_seconds()))


def boundary_figures(bench: Bench, tool: str, boundary: dt.datetime, value: int,
                     which: list[tuple[str, str]], mark: int, *,
                     timeline: bool = False) -> dict[str, Any]:
    """Seconds from the boundary to the tool's first and last Deployment write, and to its
    status saying so, from the API server's audit log (from byte offset `mark`, taken before the
    boundary); a watch in this process confirms every target reads `value`. `timeline`: also
    how many targets were first written in each 5 s after the boundary."""
    since = boundary.timestamp() - 1.0
    wanted = set(which)
    users = bench.users(tool)
    writes = [w for w in audit_writes(bench.audit_log, mark)
              if w.at >= since and w.user.startswith(users)]
    first_write: dict[tuple[str, str], float] = {}
    for w in writes:
        key = (w.namespace, w.name)
        if w.resource == "deployments" and key in wanted and key not in first_write:
            first_write[key] = w.at
    seen = bench.seen.written(tool, since, value, wanted)
    start = boundary.timestamp()
    figures: dict[str, Any] = {"boundary": boundary.strftime("%H:%M:%SZ"), "value": value,
                               "written": len(first_write), "reads_value": len(seen),
                               "of": len(which)}
    if timeline:
        per_5s = [0] * (int(max(first_write.values(), default=start) - start) // 5 + 1)
        for at in first_write.values():
            per_5s[max(0, int(at - start) // 5)] += 1
        figures["written_per_5s"] = per_5s
    if first_write:
        figures["first_s"] = round(min(first_write.values()) - start, 2)
        figures["last_s"] = (round(max(first_write.values()) - start, 2)
                             if len(first_write) == len(which) == len(seen) else None)
    status: dict[str, float] = {}
    if tool == "fivespot":
        # the last status write of each ScheduledCapacity after the boundary (its phase)
        for w in writes:
            if (w.resource == "scheduledcapacities" and w.subresource == "status"
                    and (w.namespace, w.name) in wanted):  # each named after its Deployment
                status[f"{w.namespace}/{w.name}"] = w.at
        complete = len(status) == len(which)
    elif tool == "kube-green":
        for w in writes:
            if w.resource == "sleepinfos" and w.subresource == "status" and w.namespace not in status:
                status[w.namespace] = w.at
        complete = len(status) == NAMESPACES
    else:
        complete = False
    figures["status_s"] = round(max(status.values()) - start, 2) if complete else None
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    machine = CAPACITY.machine()
    print(f"machine: {machine}", flush=True)
    peers = ensure_peers(sys.stdout)
    work = Path(tempfile.mkdtemp(prefix="fivespot-bench-peers-"))
    audit_log = work / "audit.log"
    session = DevSession(HERE / "config", work / "dev",
                         report=lambda line: print(f"[dev] {line}", flush=True),
                         apiserver_args=(f"--audit-policy-file={HERE / 'audit-policy.yaml'}",
                                         f"--audit-log-path={audit_log}",
                                         "--audit-log-format=json", "--audit-log-maxbackup=0",
                                         # never rotated (the default rotates at 100 MB, which
                                         # the 10,000-target point passes)
                                         "--audit-log-maxsize=1000000"))
    seen = Seen()
    informers: list[Informer] = []
    peer_map: dict[str, Peer] = {}
    kubelet: Kubelet | None = None
    try:
        session.start()
        assert session.kubeconfig is not None
        kubeconfig = session.kubeconfig
        world = World(kubeconfig)
        apply(kubeconfig, peers.sleepinfo_crd)
        wait_established(kubeconfig, ["sleepinfos.kube-green.com"])
        world.namespace(PEERS_NS)
        for tool in (*TOOLS, "bare"):
            for namespace in namespaces(tool):
                world.namespace(namespace)
        started = time.monotonic()
        for tool in (*TOOLS, "bare"):
            world.deployments(targets(tool, 0, args.targets))
        print(f"created {4 * args.targets} Deployments in {time.monotonic() - started:.0f} s", flush=True)
        for kind, handler in ((DEPLOYMENTS, seen.on_deployment), (SCAP, seen.on_scap)):
            informer = Informer(world.api, kind[0], kind[1], kind[2], None, resync_s=0)
            informer.add_handler(handler)
            informer.start()
            informer.wait_synced(120)
            informers.append(informer)

        # The timeline: each tool's boundaries in its own minutes, then one shared (outage).
        first = whole_minute_after(dt.datetime.now(UTC) + dt.timedelta(seconds=args.lead))
        zone, offset = PROVIDERS.zone_for(first)
        slots = {tool: [first + dt.timedelta(minutes=len(TOOLS) * r + k) for r in range(args.rounds)]
                 for k, tool in enumerate(TOOLS)}
        # a minute after the last round's, so its measurement (at --settle) precedes the stop
        outage = first + dt.timedelta(minutes=len(TOOLS) * args.rounds + 1)
        later = outage + dt.timedelta(minutes=60)
        bench = Bench(session, world, seen, peer_map, audit_log, args.targets, zone, offset)
        value_at = [0 if r % 2 == 0 else 1 for r in range(args.rounds)]
        print(f"zone {zone}; boundaries (UTC): " + "; ".join(
            f"{tool} {', '.join(b.strftime('%H:%M') for b in slots[tool])}" for tool in TOOLS)
            + f"; outage {outage:%H:%M}", flush=True)

        def windows(tool: str, asleep: bool) -> list[tuple[dt.datetime, dt.datetime]]:
            """The tool's awake (or asleep) windows: the rounds alternate sleep, wake, ...;
            after the rounds it wakes at the outage boundary."""
            edges = [first - dt.timedelta(minutes=30), *slots[tool]]
            if value_at[-1] == 0:
                edges.append(outage)
            edges.append(later)
            pairs = list(zip(edges, edges[1:]))
            return pairs[1::2] if asleep else pairs[0::2]

        for i, namespace in enumerate(namespaces("fivespot")):
            world.market(namespace, zone, market_sessions(windows("fivespot", False), offset))
        world.scheduled_capacities(targets("fivespot", 0, args.targets))
        green_plan = [(b, slots["kube-green"][r + 1] if r + 1 < args.rounds else outage)
                      for r, b in enumerate(slots["kube-green"]) if value_at[r] == 0]
        for namespace in namespaces("kube-green"):
            world.sleepinfo(namespace, zone, local(green_plan[0][0], offset),
                            local(green_plan[0][1], offset))
        for namespace in namespaces("gokubedownscaler"):
            world.annotate(namespace, downtime(windows("gokubedownscaler", True), zone, offset))
        tls_dir = session.state_dir / "tls"
        peer_map.update(peer_processes(
            peers, work, world.cluster_admin("kube-green"), world.cluster_admin("gokubedownscaler"),
            tls_dir, kube_green_lease_namespace=PEERS_NS if args.kube_green_leader_elect else None))
        bench.results["kube_green_leader_elect"] = args.kube_green_leader_elect
        bare_config = world.cluster_admin("bench-bare")
        guarded_config = world.capacity_identity(FIVESPOT_NS)
        for peer in peer_map.values():
            peer.start()
        kubelet = Kubelet(bench)
        kubelet.start()

        # Settled: every ScheduledCapacity Active (the Deployments are already at 1).
        fs_keys = set(targets("fivespot", 0, args.targets))
        deadline = time.monotonic() + 300
        while seen.fivespot_status(0.0, "Active", fs_keys) is None:
            if time.monotonic() > deadline:
                raise SystemExit("fivespot's ScheduledCapacities did not all read Active in 300 s")
            session.check_processes()
            time.sleep(1)
        print(f"settled {dt.datetime.now(UTC):%H:%M:%S}; idle until {first - dt.timedelta(seconds=10):%H:%M:%S}",
              flush=True)

        # 3. idle, from IDLE_AFTER_S after the set-up settled until 10 s before the first boundary.
        settled_offset = audit_log.stat().st_size
        time.sleep(IDLE_AFTER_S)
        idle_from, idle_offset = time.monotonic(), audit_log.stat().st_size
        bench.results["settle_tail"] = {
            tool: dict(zip(("requests", "writes"), audit_counts(
                audit_log, settled_offset, idle_offset, bench.users(tool))), seconds=IDLE_AFTER_S)
            for tool in TOOLS}
        print(f"settle tail over {IDLE_AFTER_S:g} s: {json.dumps(bench.results['settle_tail'])}",
              flush=True)
        cpu_before = {tool: bench.cpu(tool) for tool in TOOLS}
        cpu_parts_before = bench.fivespot_cpu()
        sleep_until(first - dt.timedelta(seconds=10))
        idle_s = time.monotonic() - idle_from
        idle_stop = audit_log.stat().st_size
        idle: dict[str, Any] = {"seconds": round(idle_s, 1)}
        for tool in TOOLS:
            cpu = bench.cpu(tool) - cpu_before[tool]
            requests, writes = audit_counts(audit_log, idle_offset, idle_stop, bench.users(tool))
            scale = 3600 / idle_s
            idle[tool] = {"writes_per_h": round(writes * scale), "requests_per_h": round(requests * scale),
                          "cpu_s_per_h": round(cpu * scale, 1), "writes": writes,
                          "requests": requests, "cpu_s": round(cpu, 2)}
        idle["fivespot"]["cpu_s_per_h_by_process"] = {
            name: round((cpu - cpu_parts_before.get(name, 0.0)) * 3600 / idle_s, 1)
            for name, cpu in bench.fivespot_cpu().items()}
        bench.results["idle"] = idle
        print(f"idle over {idle_s:.0f} s: {json.dumps(idle)}", flush=True)
        if args.only_idle:
            bench.results["machine"] = machine
            return bench.results
        bench.results["memory"] = {str(args.targets): {tool: bench.memory(tool) for tool in TOOLS}}

        # 1. the boundary rounds, in minute order.
        timeline = sorted((b, tool, r) for tool in TOOLS for r, b in enumerate(slots[tool]))
        rounds: dict[str, list[dict[str, Any]]] = {tool: [] for tool in (*TOOLS, *BARE)}
        bare_paths = [kube.resource_path(*DEPLOYMENTS, namespace=n, name=d)
                      for n, d in targets("bare", 0, args.targets)]
        mark = audit_log.stat().st_size
        for boundary, tool, r in timeline:
            sleep_until(boundary - dt.timedelta(seconds=1))
            trace = CpuTrace(bench.process_groups())
            if tool == "kube-green":
                # In kube-green's minute, once its writes are done (it keeps nothing running
                # after them, while fivespot's status writes can run for most of its minute):
                # the bare client's same writes, long before the next tool's boundary.
                sleep_until(boundary + dt.timedelta(seconds=args.bare_after))
                read0 = (time.monotonic(), cpu_of(trace.groups))
                bare_s = CAPACITY.bare_patches(bare_config, bare_paths, CAPACITY_WORKERS,
                                               {"spec": {"replicas": value_at[r]}})
                read1 = (time.monotonic(), cpu_of(trace.groups))
                rounds["bare"].append({"last_s": round(bare_s, 2),
                                       "cpu_to_last": spent_between(read0, read1)})
                # The same client as fivespot's capacity identity, so each patch passes its
                # target guard as the controller's do; a value the plain run did not just write.
                guarded_s = CAPACITY.bare_patches(guarded_config, bare_paths, CAPACITY_WORKERS,
                                                  {"spec": {"replicas": GUARDED_VALUE}},
                                                  field_manager=CAPACITY_CONTROLLER)
                read2 = (time.monotonic(), cpu_of(trace.groups))
                rounds["bare-guarded"].append({"last_s": round(guarded_s, 2),
                                               "cpu_to_last": spent_between(read1, read2)})
                print(f"  bare client round {r + 1}: {bare_s:.2f} s; through the target guard "
                      f"{guarded_s:.2f} s", flush=True)
            sleep_until(boundary + dt.timedelta(seconds=args.settle))
            which = targets(tool, 0, args.targets)
            trace.stop()
            figures = boundary_figures(bench, tool, boundary, value_at[r], which, mark)
            if figures.get("last_s") is not None:
                figures["cpu_to_last"] = trace.between(boundary.timestamp(),
                                                       boundary.timestamp() + figures["last_s"])
            mark = audit_log.stat().st_size
            rounds[tool].append(figures)
            print(f"  {tool} round {r + 1}: {figures}", flush=True)
            if tool == "kube-green" and value_at[r] == 1:
                plan = [p for p in green_plan if p[0] > boundary]
                for namespace in namespaces("kube-green"):
                    world.sleepinfo(namespace, zone, local(plan[0][0], offset), local(plan[0][1], offset))
        bench.results["rounds"] = rounds
        bench.results["memory"][str(args.targets)] = {
            tool: {**bench.results["memory"][str(args.targets)][tool],
                   "after_rounds": bench.memory(tool)} for tool in TOOLS}

        # 2. the outage: every tool down from 20 s before a shared (wake) boundary to 70 s after.
        sleep_until(outage - dt.timedelta(seconds=OUTAGE_BEFORE_S))
        stopped = time.time()
        for tool in TOOLS:
            kubelet.out(tool)
        print(f"outage: every tool stopped at {dt.datetime.now(UTC):%H:%M:%S}", flush=True)
        sleep_until(outage + dt.timedelta(seconds=OUTAGE_AFTER_S))
        back = time.time()
        for tool in TOOLS:
            kubelet.back(tool)
        print(f"outage: every tool started again at {dt.datetime.now(UTC):%H:%M:%S}", flush=True)
        sleep_until(outage + dt.timedelta(seconds=OUTAGE_AFTER_S + RIGHT_AFTER_S))
        result_outage: dict[str, Any] = {"boundary": f"{outage:%H:%M:%SZ}", "down_s": round(back - stopped, 1)}
        for tool in TOOLS:
            which = targets(tool, 0, args.targets)
            now = world.replicas(which)
            right = sum(1 for v in now.values() if v == 1)
            written = seen.written(tool, back, 1, set(which))
            result_outage[tool] = {"right_60s_after_back": right, "of": len(which),
                                   "last_written_after_back_s": round(max(written.values()) - back, 2)
                                   if len(written) == len(which) else None}
        bench.results["outage"] = result_outage
        print(f"outage: {json.dumps(result_outage)}", flush=True)
        # What an operator would do after a skipped wake: set the stragglers right by hand, so
        # every tool starts the last point alike.
        for tool in TOOLS:
            which = targets(tool, 0, args.targets)
            wrong = [key for key, v in world.replicas(which).items() if v != 1]
            list(world.pool.map(lambda key: kube.merge_patch(world.api, kube.resource_path(
                *DEPLOYMENTS, namespace=key[0], name=key[1]), {"spec": {"replicas": 1}}), wrong))

        # 4. memory at --grow-to targets, after one more boundary shared by all (sleep).
        if args.grow_to > args.targets:
            started = time.monotonic()
            cpu_at = [cpu_now(bench)]  # the grow's start, the boundary, the read
            for tool in TOOLS:
                world.deployments(targets(tool, args.targets, args.grow_to))
            world.scheduled_capacities(targets("fivespot", args.targets, args.grow_to))
            grown_s = time.monotonic() - started
            print(f"grew to {args.grow_to} targets per tool in {grown_s:.0f} s", flush=True)
            big = whole_minute_after(dt.datetime.now(UTC) + dt.timedelta(seconds=45))
            end = big + dt.timedelta(minutes=30)
            for namespace in namespaces("fivespot"):
                world.market(namespace, zone, market_sessions(
                    [*windows("fivespot", False)[:-1], (outage, big)], offset))
            for namespace in namespaces("kube-green"):
                world.sleepinfo(namespace, zone, local(big, offset), local(end, offset))
            for namespace in namespaces("gokubedownscaler"):
                world.annotate(namespace, downtime([*windows("gokubedownscaler", True), (big, end)],
                                                   zone, offset))
            mark = audit_log.stat().st_size
            sleep_until(big)
            cpu_at.append(cpu_now(bench))
            sleep_until(big + dt.timedelta(seconds=args.settle + 30))
            cpu_at.append(cpu_now(bench))
            grown: dict[str, Any] = {"boundary": f"{big:%H:%M:%SZ}", "grow_s": round(grown_s),
                                     "cpu_s_to_boundary": cpu_between(cpu_at[0], cpu_at[1]),
                                     "cpu_s_after_boundary": cpu_between(cpu_at[1], cpu_at[2])}
            for tool in TOOLS:
                grown[tool] = {**bench.memory(tool), **boundary_figures(
                    bench, tool, big, 0, targets(tool, 0, args.grow_to), mark, timeline=True)}
            bench.results["memory"][str(args.grow_to)] = grown
            print(f"at {args.grow_to}: {json.dumps(grown)}", flush=True)
        bench.results["restarts"] = kubelet.restarts
        bench.results["machine"] = machine
        bench.results["zone"] = zone
        bench.results["peers"] = {name: f"{pin.module}@{pin.version}" for name, pin in peers.pins.items()}
        return bench.results
    finally:
        if kubelet is not None:
            kubelet.stop()
        for informer in informers:
            informer.stop()
        for peer in peer_map.values():
            peer.stop()
        session.stop()


def cpu_now(bench: Bench) -> dict[str, float]:
    """CPU seconds so far of each fivespot component, each peer (processes and children), the
    control plane's processes (kube-apiserver, etcd) and this bench (its watches and clients):
    everything that shares the machine's cores."""
    return cpu_of(bench.process_groups())


def cpu_of(groups: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each group of processes, and of this bench's own process."""
    own = os.times()
    return {**{name: sum(cpu_seconds(pid) for pid in pids) for name, pids in groups.items()},
            "bench": own.user + own.system}


def spent_between(before: tuple[float, dict[str, float]],
                  after: tuple[float, dict[str, float]]) -> dict[str, Any]:
    """Each process's CPU seconds between two timed `cpu_of` readings, with the span between
    them (a client run's set-up included, in both)."""
    return {"span_s": round(after[0] - before[0], 2),
            "cpu_s": cpu_between(before[1], after[1], digits=2)}


class CpuTrace:
    """Every process's CPU seconds, read every `TRACE_EVERY_S` through one round, so that the
    round can say where the machine's two cores went between its boundary and its last write:
    which process is the bound. The process ids are found once, when the trace starts (a walk
    of /proc per reading would cost the bench what it measures); one started later is missed."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self.readings: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-trace", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            self.readings.append((time.time(), cpu_of(self.groups)))
            if self._stop.wait(TRACE_EVERY_S):
                return

    def stop(self) -> None:
        """Stop reading, with a last reading now."""
        self._stop.set()
        self._thread.join()
        self.readings.append((time.time(), cpu_of(self.groups)))

    def at(self, instant: float) -> dict[str, float] | None:
        """Each process's CPU seconds at `instant`, interpolated between the two readings
        around it (a status write burst starting just after a last write must not be counted
        to it whole); None outside the trace."""
        for (t0, cpu0), (t1, cpu1) in zip(self.readings, self.readings[1:]):
            if t0 <= instant <= t1:
                share = (instant - t0) / (t1 - t0) if t1 > t0 else 0.0
                return {name: cpu0.get(name, 0.0) + share * (cpu - cpu0.get(name, 0.0))
                        for name, cpu in cpu1.items()}
        return None

    def between(self, start: float, end: float) -> dict[str, Any] | None:
        """CPU seconds of each process from `start` to `end`, with the span they cover; None
        when the trace does not span them."""
        cpu0, cpu1 = self.at(start), self.at(end)
        if cpu0 is None or cpu1 is None:
            return None
        return spent_between((start, cpu0), (end, cpu1))


def cpu_between(before: dict[str, float], after: dict[str, float],
                digits: int = 1) -> dict[str, float]:
    """CPU seconds each process spent between two `cpu_now` readings (a restarted process
    counts from its start)."""
    return {name: round(cpu - before.get(name, 0.0) if cpu >= before.get(name, 0.0) else cpu, digits)
            for name, cpu in after.items()}


def table(results: dict[str, Any], targets_n: int, grow_to: int) -> str:
    """The one table `make bench-peers` prints."""
    rounds = results["rounds"]

    def p(tool: str, key: str, q: float) -> str:
        values = [r.get(key) for r in rounds[tool]]
        if not values or any(v is None for v in values):
            return "—" if key != "last_s" else "incomplete"
        return f"{CAPACITY.percentile([float(v) for v in values], q):.2f}"

    bare50 = float(p("bare", "last_s", 50))
    bare99 = float(p("bare", "last_s", 99))
    try:
        guarded = (float(p("bare-guarded", "last_s", 50)), float(p("bare-guarded", "last_s", 99)))
    except ValueError:
        guarded = None
    lines = [f"{'':18} {'last write p50/p99 s':>21} {'x bare':>11} {'status p50/p99 s':>17} "
             f"{'after outage':>13} {'idle writes/h':>13} {'requests/h':>10} {'CPU s/h':>8} "
             f"{'MiB@' + str(targets_n):>9} {'MiB@' + str(grow_to):>10} {'restarts':>8}"]
    for tool in (*TOOLS, "bare"):
        last = f"{p(tool, 'last_s', 50)}/{p(tool, 'last_s', 99)}"
        try:
            ratio = (f"{float(p(tool, 'last_s', 50)) / bare50:.2f}/"
                     f"{float(p(tool, 'last_s', 99)) / bare99:.2f}")
        except ValueError:
            ratio = "—"
        if tool == "bare":
            lines.append(f"{'bare client':18} {last:>21} {'1.00/1.00':>11}")
            if guarded is not None:
                lines.append(f"{'bare, guarded':18} {f'{guarded[0]:.2f}/{guarded[1]:.2f}':>21} "
                             f"{f'{guarded[0] / bare50:.2f}/{guarded[1] / bare99:.2f}':>11}")
                fs50, fs99 = float(p("fivespot", "last_s", 50)), float(p("fivespot", "last_s", 99))
                lines.append(f"fivespot / bare, guarded: {fs50 / guarded[0]:.2f}/{fs99 / guarded[1]:.2f}")
            continue
        status = f"{p(tool, 'status_s', 50)}/{p(tool, 'status_s', 99)}"
        outage = results["outage"][tool]
        idle = results["idle"][tool]
        mem = results["memory"][str(targets_n)][tool]["after_rounds"]["peak_mb"]
        big = results["memory"].get(str(grow_to), {}).get(tool, {}).get("peak_mb", "—")
        restarts = sum(1 for r in results.get("restarts", []) if r["tool"] == tool)
        lines.append(f"{tool:18} {last:>21} {ratio:>11} {status:>17} "
                     f"{str(outage['right_60s_after_back']) + '/' + str(outage['of']):>13} "
                     f"{idle['writes_per_h']:>13} {idle['requests_per_h']:>10} "
                     f"{idle['cpu_s_per_h']:>8} {mem:>9} {big:>10} {restarts:>8}")
    return "\n".join(lines)


def cpu_table(results: dict[str, Any]) -> str:
    """Where the two cores went from each tool's boundary to its last write, in its median
    round (by last write): each process's CPU seconds, and how many cores they kept busy."""
    lines = ["CPU s from the boundary to the last write, median round (cores busy of "
             f"{os.cpu_count()}):"]
    for tool, rounds in results["rounds"].items():
        traced = sorted(((r["last_s"], r["cpu_to_last"]) for r in rounds
                         if r.get("last_s") is not None and r.get("cpu_to_last")),
                        key=lambda pair: pair[0])  # two rounds may tie: never compare the dicts
        if not traced:
            continue
        _, median = traced[len(traced) // 2]
        cpu = {name: v for name, v in median["cpu_s"].items() if v >= 0.05}
        busy = sum(median["cpu_s"].values()) / median["span_s"]
        parts = ", ".join(f"{name} {v:.2f}" for name, v in sorted(cpu.items(), key=lambda i: -i[1]))
        lines.append(f"  {tool}: {median['span_s']:.2f} s, {busy:.2f} cores: {parts}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=1000, help="Deployments per tool")
    parser.add_argument("--rounds", type=int, default=5, help="boundaries per tool")
    parser.add_argument("--grow-to", type=int, default=10000,
                        help="targets per tool for the second memory point (0: skip)")
    parser.add_argument("--lead", type=float, default=165.0, metavar="S",
                        help="seconds from the set-up to the first boundary (settle and idle)")
    parser.add_argument("--settle", type=float, default=55.0, metavar="S",
                        help="seconds after a boundary before it is measured")
    parser.add_argument("--bare-after", type=float, default=35.0, metavar="S",
                        help="seconds after kube-green's boundary when the bare client sends")
    parser.add_argument("--kube-green-leader-elect", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="run kube-green with --leader-elect, as its shipped manifests do "
                             "(default; needs root for its Pod-like namespace file), or without, "
                             "its flag's default")
    parser.add_argument("--only-idle", action="store_true",
                        help="stop after the idle phase (3.) and report only it; --lead sets "
                             "how long it lasts")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.rounds % 2 == 0:
        parser.error("--rounds must be odd: the rounds alternate sleep and wake, starting and "
                     "ending with a sleep, so that the outage's boundary is a wake")
    results = run(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    if not args.only_idle:
        print()
        print(table(results, args.targets, args.grow_to))
        print(cpu_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
