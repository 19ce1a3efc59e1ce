"""Start and stop a real etcd + kube-apiserver (+ kube-controller-manager) on loopback, the way
envtest does.

Each process runs in its own process group. When the control plane belongs to a test run it is
also tied to that process with PR_SET_PDEATHSIG, and every start records itself in a registry,
so a killed test run leaves nothing behind: the kernel ends the children at once, and the next
start reaps anything whose owner has died anyway.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from fivespot.devcluster.build import Binaries, cache_root
from fivespot.devcluster.certs import ControlPlaneCerts, KeyPair, write_control_plane_certs
from fivespot.runtime.processes import die_with_parent

START_ATTEMPTS = 3
READY_TIMEOUT_S = 90.0


class ControlPlaneError(RuntimeError):
    """The control plane could not be started; the message carries the tail of its logs."""


@dataclass
class RunningProcess:
    name: str
    pid: int


@dataclass
class Record:
    """What a running control plane needs to be found and stopped again."""

    owner_pid: int | None
    state_dir: str
    processes: list[RunningProcess]
    server: str

    def dump(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> "Record":
        raw = json.loads(path.read_text())
        return cls(
            owner_pid=raw["owner_pid"],
            state_dir=raw["state_dir"],
            processes=[RunningProcess(**p) for p in raw["processes"]],
            server=raw["server"],
        )


def _registry() -> Path:
    folder = cache_root() / "run"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_group(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the process group led by `pid`, then SIGKILL what is left after the grace time."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            finished = 0 if _alive(pid) else pid
        if finished == pid or not _alive(pid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def reap_orphans() -> list[str]:
    """Stop control planes whose owning process has died (a killed test run); return what was reaped."""
    reaped = []
    for entry in sorted(_registry().glob("*.json")):
        try:
            record = Record.load(entry)
        except (OSError, ValueError, KeyError):
            entry.unlink(missing_ok=True)
            continue
        if record.owner_pid is None or _alive(record.owner_pid):
            continue
        for process in reversed(record.processes):
            _kill_group(process.pid, grace_s=3)
        shutil.rmtree(record.state_dir, ignore_errors=True)
        entry.unlink(missing_ok=True)
        reaped.append(record.state_dir)
    return reaped


def write_webhook_client_config(folder: Path, clients: Mapping[str, KeyPair]) -> Path:
    """The AdmissionConfiguration that makes kube-apiserver present a client certificate to
    webhooks: a WebhookAdmissionConfiguration whose kubeConfigFile has one user per webhook
    host it calls (`host:port`, a DNS name or `*`, as the API server matches them) with that
    certificate; for the validating webhooks only, as fivespot has no mutating one. Returns the
    file for `--admission-control-config-file`."""
    folder.mkdir(parents=True, exist_ok=True)
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": host, "user": {
            "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
            "client-key-data": base64.b64encode(pair.key_pem).decode()}}
            for host, pair in sorted(clients.items())],
    }
    kubeconfig_path = folder / "webhook-clients.kubeconfig"
    descriptor = os.open(kubeconfig_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(yaml.safe_dump(kubeconfig))
    admission = {
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(kubeconfig_path)}}],
    }
    path = folder / "admission.yaml"
    path.write_text(yaml.safe_dump(admission))
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ControlPlane:
    """An etcd + kube-apiserver pair; `start()` returns once `/readyz` is ok and `default` exists.

    `owned=True` (tests) ties the processes to this Python process; `owned=False` (`make cluster`)
    leaves them running after it exits, to be stopped by `stop()` from a later process.
    """

    def __init__(self, binaries: Binaries, state_dir: Path | None = None, *, owned: bool = True,
                 bind_address: str = "127.0.0.1", apiserver_args: Sequence[str] = (),
                 controllers: Sequence[str] = ("validatingadmissionpolicy-status-controller",),
                 webhook_clients: Mapping[str, KeyPair] | None = None):
        """`bind_address`, `apiserver_args` and `controllers` (kube-controller-manager's) are for
        tests that need more of a cluster, e.g. pods on their own network (0.0.0.0, the
        deployment and endpoint controllers, webhooks routed to endpoints). `webhook_clients`
        (webhook host -> client certificate) makes kube-apiserver present those certificates to
        the webhooks it calls (`write_webhook_client_config`)."""
        self.binaries = binaries
        self.owned = owned
        self.bind_address = bind_address
        self.apiserver_args = tuple(apiserver_args)
        self.webhook_clients = dict(webhook_clients or {})
        self.controllers = tuple(controllers)
        self._tmp_state = state_dir is None
        self.state_dir = state_dir or Path(tempfile.mkdtemp(prefix="fivespot-cp-"))
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.server = ""
        self.etcd_url = ""
        self.certs: ControlPlaneCerts | None = None
        self._apiserver_argv: list[str] = []
        self._record_path = _registry() / f"{os.getpid()}-{self.state_dir.name}.json"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def start(self) -> None:
        reap_orphans()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.certs = write_control_plane_certs(
            self.state_dir / "pki", datetime.datetime.now(datetime.timezone.utc)
        )
        if self.webhook_clients:
            admission = write_webhook_client_config(self.state_dir / "admission",
                                                    self.webhook_clients)
            self.apiserver_args += (f"--admission-control-config-file={admission}",)
        last_error: Exception | None = None
        for _attempt in range(START_ATTEMPTS):
            try:
                self._start_once()
                return
            except ControlPlaneError as error:  # port races: another process took a port
                last_error = error
                self._stop_processes()
        raise ControlPlaneError(f"control plane did not start after {START_ATTEMPTS} attempts: {last_error}")

    def _start_once(self) -> None:
        assert self.certs is not None
        client_port, peer_port, secure_port = _free_port(), _free_port(), _free_port()
        etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        data_dir = self.state_dir / "etcd"
        shutil.rmtree(data_dir, ignore_errors=True)
        self._spawn("etcd", [
            str(self.binaries.etcd),
            "--name=fivespot", f"--data-dir={data_dir}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=fivespot={peer_url}",
            "--unsafe-no-fsync=true", "--log-level=warn",
        ])
        self._wait_for(lambda: _http_ok(f"{etcd_url}/health"), "etcd /health", 30)
        self.etcd_url = etcd_url
        self.server = f"https://127.0.0.1:{secure_port}"
        c = self.certs
        self._apiserver_argv = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={etcd_url}",
            f"--secure-port={secure_port}", f"--bind-address={self.bind_address}",
            "--advertise-address=127.0.0.1",
            # No reconciler for the `kubernetes` Service's endpoints: 1.37 refuses a loopback
            # address there, and nothing here routes through that Service (pods reach the server
            # at their gateway, tests/integration/kubelet.py).
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.state_dir / 'apiserver-certs'}",
            f"--tls-cert-file={c.serving_cert}", f"--tls-private-key-file={c.serving_key}",
            f"--client-ca-file={c.client_ca}",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            f"--service-account-issuer={self.server}/",
            f"--service-account-key-file={c.sa_public}",
            f"--service-account-signing-key-file={c.sa_private}",
            "--v=1", *self.apiserver_args,
        ]
        self._spawn("kube-apiserver", self._apiserver_argv)
        self._write_kubeconfig()
        self._record()
        self._wait_for(self._ready, "kube-apiserver /readyz", READY_TIMEOUT_S)
        self._wait_for(self._default_namespace_exists, "namespace default", 30)
        # Only the controller that writes ValidatingAdmissionPolicy status.typeChecking: without
        # it a policy's type warnings are never reported, as on a real cluster they are.
        self._spawn("kube-controller-manager", [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={self.kubeconfig}",
            f"--controllers={','.join(self.controllers)}",
            "--leader-elect=false", "--secure-port=0",
            "--use-service-account-credentials=false", "--v=1",
        ])
        self._record()

    # --- faults, for tests: what a real control plane does to its clients ------------------------

    def _process(self, name: str) -> subprocess.Popen[bytes]:
        return next(p for n, p in self.processes if n == name)

    def restart_apiserver(self, down_s: float = 0.0) -> float:
        """Stop kube-apiserver (SIGTERM, as a rolling restart does), wait `down_s`, start it
        again on the same port and etcd; returns the monotonic time it was ready again."""
        process = self._process("kube-apiserver")
        _kill_group(process.pid)
        self.processes = [(n, p) for n, p in self.processes if p is not process]
        time.sleep(down_s)
        self._spawn("kube-apiserver", self._apiserver_argv)
        self._record()
        self._wait_for(self._ready, "kube-apiserver /readyz after a restart", READY_TIMEOUT_S)
        return time.monotonic()

    def pause_apiserver(self) -> None:
        """SIGSTOP kube-apiserver: connections stay open and nothing answers (a stalled server,
        a partition, a long GC pause) until `resume_apiserver`."""
        os.kill(self._process("kube-apiserver").pid, signal.SIGSTOP)

    def resume_apiserver(self) -> None:
        os.kill(self._process("kube-apiserver").pid, signal.SIGCONT)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (as the API server does every five
        minutes); a watch resumed from before it gets 410 Gone. Returns that revision."""
        def post(path: str, body: dict[str, object]) -> dict[str, object]:
            request = urllib.request.Request(f"{self.etcd_url}{path}", data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                found: dict[str, object] = json.loads(answer.read())
                return found

        header = post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
        assert isinstance(header, dict)
        revision = int(str(header["revision"]))
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def etcd_watch(self, prefix: str, since: int) -> "EtcdRecord":
        """Record every write under `prefix` (an etcd key, `/registry/GROUP/PLURAL/NS/`) from
        revision `since` on, read from etcd itself while it runs: a record that no API server
        restart interrupts and no later compaction takes away. Stop it with `stop()`."""
        return EtcdRecord(self.etcd_url, prefix, since)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.state_dir / f"{name}.log", "ab")
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent if self.owned else None,
        )
        log.close()
        self.processes.append((name, process))

    def _wait_for(self, check: Callable[[], bool], what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, process in self.processes:
                if process.poll() is not None:
                    raise ControlPlaneError(
                        f"{name} exited with {process.returncode} while waiting "
                        f"for {what}:\n{self._log_tail(name)}"
                    )
            if check():
                return
            time.sleep(0.1)
        raise ControlPlaneError(f"timed out after {timeout_s:.0f}s waiting for {what}:\n"
                                f"{self._log_tail('kube-apiserver')}")

    def _log_tail(self, name: str, lines: int = 25) -> str:
        path = self.state_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.certs is not None
        context = ssl.create_default_context(cafile=str(self.certs.serving_ca))
        context.load_cert_chain(str(self.certs.admin_cert), str(self.certs.admin_key))
        return context

    def _ready(self) -> bool:
        return _http_ok(f"{self.server}/readyz", self._ssl_context())

    def _default_namespace_exists(self) -> bool:
        return _http_ok(f"{self.server}/api/v1/namespaces/default", self._ssl_context())

    def _write_kubeconfig(self) -> None:
        assert self.certs is not None
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fivespot-dev", "cluster": {
                "server": self.server,
                "certificate-authority-data": b64(self.certs.serving_ca)}}],
            "users": [{"name": "admin", "user": {
                "client-certificate-data": b64(self.certs.admin_cert),
                "client-key-data": b64(self.certs.admin_key)}}],
            "contexts": [{"name": "fivespot-dev", "context": {"cluster": "fivespot-dev", "user": "admin"}}],
            "current-context": "fivespot-dev",
        }
        tmp = self.kubeconfig.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(config))
        tmp.chmod(0o600)
        os.replace(tmp, self.kubeconfig)

    def _record(self) -> None:
        record = Record(
            owner_pid=os.getpid() if self.owned else None,
            state_dir=str(self.state_dir),
            processes=[RunningProcess(name, p.pid) for name, p in self.processes],
            server=self.server,
        )
        record.dump(self._record_path)
        record.dump(self.state_dir / "record.json")

    def _stop_processes(self) -> None:
        for _name, process in reversed(self.processes):
            _kill_group(process.pid)
        self.processes.clear()

    def stop(self) -> None:
        self._stop_processes()
        self._record_path.unlink(missing_ok=True)
        if self._tmp_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)


class EtcdRecord:
    """Writes under a key prefix as etcd's own watch delivers them: (revision, key, JSON value or
    None for a delete), in order."""

    def __init__(self, etcd_url: str, prefix: str, since: int):
        key = prefix.encode()
        end = key[:-1] + bytes([key[-1] + 1])
        body = json.dumps({"create_request": {
            "key": base64.b64encode(key).decode(), "range_end": base64.b64encode(end).decode(),
            "start_revision": since}}).encode()
        request = urllib.request.Request(f"{etcd_url}/v3/watch", data=body,
                                         headers={"Content-Type": "application/json"})
        self.events: list[tuple[int, str, Any]] = []
        self._lock = threading.Lock()
        self._stream = urllib.request.urlopen(request, timeout=600)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._stream:
                result = json.loads(line).get("result") or {}
                for event in result.get("events") or []:
                    kv = event.get("kv") or {}
                    raw = base64.b64decode(kv["value"]) if kv.get("value") else b""
                    value = json.loads(raw) if raw and event.get("type") != "DELETE" else None
                    with self._lock:
                        self.events.append((int(kv.get("mod_revision", 0)),
                                            base64.b64decode(kv["key"]).decode(), value))
        except (OSError, ValueError):
            return  # closed by stop()

    def written(self) -> list[tuple[int, str, Any]]:
        with self._lock:
            return list(self.events)

    def stop(self) -> None:
        fp = getattr(self._stream, "fp", None)
        raw = getattr(getattr(fp, "raw", None), "_sock", None)
        if raw is not None:
            try:
                raw.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(10)
        self._stream.close()


def stop_recorded(state_dir: Path) -> bool:
    """Stop a detached control plane started with `owned=False` in `state_dir`; True if one ran."""
    record_file = state_dir / "record.json"
    if not record_file.exists():
        return False
    record = Record.load(record_file)
    for process in reversed(record.processes):
        _kill_group(process.pid)
    for entry in _registry().glob(f"*-{state_dir.name}.json"):
        try:
            if Record.load(entry).state_dir == str(state_dir):
                entry.unlink(missing_ok=True)
        except (OSError, ValueError, KeyError):
            entry.unlink(missing_ok=True)
    return True


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False
