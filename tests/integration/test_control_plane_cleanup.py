"""A control plane never outlives the run that owns it, even when that run is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fivespot.devcluster.build import cached_binaries, ensure_binaries
from fivespot.devcluster.controlplane import ControlPlane

_OWNER = """
import json, sys, time
from fivespot.devcluster.build import cached_binaries
from fivespot.devcluster.controlplane import ControlPlane
plane = ControlPlane(cached_binaries(), owned=True)
plane.start()
print(json.dumps([p.pid for _, p in plane.processes]), flush=True)
time.sleep(600)
"""


def _gone(pids: list[int], timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def test_killing_the_owning_process_ends_every_control_plane_process() -> None:
    cached_binaries() or ensure_binaries()
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    assert owner.stdout is not None
    pids = json.loads(owner.stdout.readline())
    assert len(pids) == 3 and all(Path(f"/proc/{pid}").exists() for pid in pids)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    assert _gone(pids), f"control-plane processes {pids} survived their owner"


def test_stop_ends_every_process_and_removes_temporary_state() -> None:
    plane = ControlPlane(cached_binaries() or ensure_binaries(), owned=True)
    plane.start()
    pids = [p.pid for _, p in plane.processes]
    state = plane.state_dir
    plane.stop()
    assert _gone(pids, timeout_s=2)
    assert not state.exists()
