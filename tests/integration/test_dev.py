"""`fivespot dev` runs a config repo that is not the bundled example, end to end, and Ctrl-C
leaves nothing behind."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from fivespot.runtime import kube
from fivespot.runtime.processes import die_with_parent
from tests.integration import leaks

CONFIG = {
    "platform.yaml": """
apiVersion: config.5spot.finos.org/v1alpha1
kind: Platform
metadata: {name: batch-platform}
spec:
  namespace: fivespot-dev-test
  controllerReplicas: 1
  webhook: {replicas: 1}
""",
    "queues.yaml": """
apiVersion: config.5spot.finos.org/v1alpha1
kind: CapacityConsumer
metadata: {name: queues}
spec:
  group: jobs.example.com
  version: v1
  kind: Queue
  resource: queues
  capacityPaths: [spec.workers]
  maxActiveValue: 50
---
apiVersion: config.5spot.finos.org/v1alpha1
kind: ScheduleProvider
metadata: {name: manual-only}
spec:
  builtin: [ManualSchedule]
---
apiVersion: config.5spot.finos.org/v1alpha1
kind: TenantPolicy
metadata: {name: batch}
spec:
  namespaces: [batch]
  consumers: [queues]
  maxActiveValue: 12
""",
}

QUEUE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "queues.jobs.example.com"},
    "spec": {"group": "jobs.example.com", "scope": "Namespaced",
             "names": {"plural": "queues", "singular": "queue", "kind": "Queue"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "properties": {"spec": {
                                   "type": "object", "properties": {
                                       "workers": {"type": "integer"},
                                       "queueName": {"type": "string"}}}}}}}]},
}


class Output:
    """The lines a process prints, read by a thread so a wait can time out between lines."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} in {timeout_s:.0f}s:\n{self.text()}")

    def text(self) -> str:
        return "".join(self.lines)

    def drain(self, timeout_s: float = 10.0) -> str:
        """Everything up to the end of the output (the process has exited)."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        return self.text()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def _start_dev(tmp_path: Path) -> tuple[subprocess.Popen[str], Output, Path]:
    config = tmp_path / "config"
    config.mkdir()
    for name, text in CONFIG.items():
        (config / name).write_text(text.lstrip())
    crd = tmp_path / "queue-crd.yaml"
    crd.write_text(yaml.safe_dump(QUEUE_CRD))
    state = tmp_path / "state"
    process = subprocess.Popen(
        [sys.executable, "-m", "fivespot", "dev", str(config), "--state-dir", str(state),
         "--crd", str(crd)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=die_with_parent)
    return process, Output(process), state


def test_dev_runs_another_config_flips_a_manual_schedule_and_ctrl_c_leaves_no_process(
    tmp_path: Path,
) -> None:
    process, output, state = _start_dev(tmp_path)
    children: list[int] = []
    try:
        output.wait_for(r"^ready\.", 180)
        children = [int(pid) for pid in re.findall(r"\(pid (\d+);", output.text())]
        assert len(children) == 4, output.text()  # manual provider, capacity and audit controllers, webhook
        line = output.wait_for("export KUBECONFIG=", 5)
        kubeconfig = Path(line.split("=", 1)[1].strip())
        api = kube.load_cli_client(kubeconfig)
        queues = "/apis/jobs.example.com/v1/namespaces/batch/queues"
        kube.request(api, "POST", queues, body={"apiVersion": "jobs.example.com/v1", "kind": "Queue",
                                                "metadata": {"name": "nightly"},
                                                "spec": {"queueName": "nightly", "workers": 0}})
        schedules = "/apis/spotschedules.5spot.finos.org/v1alpha1/namespaces/batch/manualschedules"
        kube.request(api, "POST", schedules, body={
            "apiVersion": "spotschedules.5spot.finos.org/v1alpha1", "kind": "ManualSchedule",
            "metadata": {"name": "night"}, "spec": {"enabled": False}})
        scaps = "/apis/5spot.finos.org/v1alpha1/namespaces/batch/scheduledcapacities"
        too_big = {"apiVersion": "5spot.finos.org/v1alpha1", "kind": "ScheduledCapacity",
                   "metadata": {"name": "nightly"},
                   "spec": {"schedule": {"apiVersion": "spotschedules.5spot.finos.org/v1alpha1",
                                         "kind": "ManualSchedule", "name": "night"},
                            "targetRef": {"apiVersion": "jobs.example.com/v1", "kind": "Queue",
                                          "name": "nightly"},
                            "capacity": {"path": "spec.workers", "activeValue": 20}}}
        try:
            kube.request(api, "POST", scaps, body=too_big)
            raise AssertionError("a value over the tenant limit was admitted")
        except kube.ApiError as error:
            assert "fivespot-tenant-limits" in error.message
        too_big["spec"]["capacity"]["activeValue"] = 7  # type: ignore[index]
        kube.request(api, "POST", scaps, body=too_big)
        output.wait_for(r"scheduledcapacity batch/nightly: Inactive", 60)
        kube.merge_patch(api, f"{schedules}/night", {"spec": {"enabled": True}})
        output.wait_for(r"batch/nightly: Active, spec.workers=7 written to Queue nightly", 60)
        assert kube.request(api, "GET", f"{queues}/nightly")["spec"]["workers"] == 7
        api.close()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert process.returncode == 0, output.text()
    record = (state / "cluster").glob("*.log")
    assert list(record)  # the control plane ran in the state dir
    for pid in children:
        assert not _alive(pid), f"pid {pid} outlived fivespot dev"
    leftovers = subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout
    assert leftovers.strip() == "", f"processes still using {state}: {leftovers}"


def test_killing_dev_outright_ends_every_process_it_started(tmp_path: Path) -> None:
    """SIGKILL runs no cleanup: the control plane, the components and the webhook's gunicorn
    workers end by their death signal alone."""
    process, output, _ = _start_dev(tmp_path)
    try:
        output.wait_for(r"^ready\.", 180)
        started = leaks.descendants(process.pid)
        commands = " ".join(p.command for p in started)
        assert "etcd" in commands and "webhook serve" in commands, commands
        assert sum("webhook serve" in p.command for p in started) >= 2, "no gunicorn worker"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    left = leaks.still_running(started, timeout_s=10)
    leaks.kill(left)
    assert left == [], "outlived fivespot dev:\n" + "\n".join(map(str, left))


def test_ctrl_c_while_dev_starts_stops_at_once_and_leaves_no_process(tmp_path: Path) -> None:
    process, output, _ = _start_dev(tmp_path)
    started: list[leaks.Proc] = []
    try:
        output.wait_for(r"^starting a local control plane", 60)
        deadline = time.monotonic() + 30
        while not any("kube-apiserver" in p.command for p in started):
            assert time.monotonic() < deadline, "the control plane never started"
            time.sleep(0.05)
            started = leaks.descendants(process.pid)
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0, output.drain()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert "ready." not in output.drain() and "stopping" in output.text(), output.text()
    left = leaks.still_running(started, timeout_s=10)
    leaks.kill(left)
    assert left == [], "outlived fivespot dev:\n" + "\n".join(map(str, left))
