"""A container the tests start from the built image never outlives what started it.

Earlier runs left dozens of `fivespot controller|provider|webhook serve` processes behind, as UID
65532 with PID 1 as parent: the launcher's change of user had cleared the death signal unshare
gives it, and the local node's pods were started from its worker thread, whose end killed their
unshare (PR_SET_PDEATHSIG's "parent" is the thread) before the node stopped them. Here a harness
process starts a container that forks a child of its own, as gunicorn does, then is killed
outright, or lets the starting thread end: nothing may be left. (Every integration module is
also checked by conftest's `no_process_outlives_its_module`.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration import leaks
from tests.integration.pod_sandbox import remove, scratch_dir, unpack

ROOT = Path(__file__).resolve().parents[2]
# The first test here may build the image (the session fixture `built_image`, up to 30 min
# cold on a loaded machine): the whole item, setup included, gets that long, not 10 min.
pytestmark = pytest.mark.timeout(1800)
UID = 65532

_HARNESS = """
import sys, threading, time
from pathlib import Path
from tests.integration.pod_sandbox import ProcessSpec, SandboxedProcess
rootfs, log, mode = sys.argv[1:4]
spec = ProcessSpec(argv=["/usr/bin/python3.11", "-c",
                         "import os, time; os.fork(); time.sleep(600)"],
                   uid=%d, gid=%d, env={"PATH": "/usr/bin"}, cwd="/", read_only_root=True)

def forked_as_the_user(process):
    pid = process.container_pid()
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, TypeError):
        return False
    return "Uid:\t%d\t" in status and bool(children)

def start():
    process = SandboxedProcess(Path(rootfs), spec, Path(log))
    while not forked_as_the_user(process):
        if not process.alive():
            print("the container exited:", process.output(), flush=True)
            return
        time.sleep(0.05)
    print("running", flush=True)
    if mode == "thread-lives":
        time.sleep(600)

threading.Thread(target=start, daemon=True).start()
time.sleep(600)
""" % (UID, UID, UID)


@pytest.fixture(scope="module")
def rootfs(built_image: dict[str, Any]) -> Iterator[Path]:
    scratch = scratch_dir()
    try:
        yield unpack(built_image["layout"], built_image["tag"], scratch / "bundle")
    finally:
        remove(scratch)


def _container_processes() -> list[leaks.Proc]:
    return [p for p in leaks.descendants(os.getpid()) if p.uid == UID]


def _harness(rootfs: Path, tmp_path: Path, mode: str) -> subprocess.Popen[str]:
    harness = subprocess.Popen([sys.executable, "-c", _HARNESS, str(rootfs),
                                str(tmp_path / "container.log"), mode],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert harness.stdout is not None
    line = harness.stdout.readline()
    if line != "running\n":
        harness.kill()
        harness.wait()
        pytest.fail(f"the harness did not start its container: {line}{harness.stdout.read()}")
    return harness


def test_killing_the_process_that_started_a_container_ends_all_of_the_containers_processes(
    rootfs: Path, tmp_path: Path
) -> None:
    harness = _harness(rootfs, tmp_path, "thread-lives")
    try:
        started = _container_processes()
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    left = leaks.still_running(started)
    leaks.kill(left)
    assert left == [], "outlived the process that started them:\n" + "\n".join(map(str, left))


def test_a_container_never_outlives_the_thread_that_started_it(
    rootfs: Path, tmp_path: Path
) -> None:
    harness = _harness(rootfs, tmp_path, "thread-ends")
    try:
        started = _container_processes()
        left = leaks.still_running(started)
        leaks.kill(left)
        assert left == [], "outlived the thread that started them:\n" + "\n".join(map(str, left))
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
