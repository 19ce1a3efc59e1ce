"""Which processes a test run started are still running: the check that none outlives its test.

The test process becomes a child subreaper (PR_SET_CHILD_SUBREAPER): a process whose parent dies
is then re-parented to it instead of to PID 1, so whatever a test started, however it was
orphaned (a killed launcher, a gunicorn master gone before its workers, a `fivespot dev` killed
outright), stays among the test process's descendants, where `descendants()` finds it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PR_SET_CHILD_SUBREAPER: Final = 36


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int
    """Start time in clock ticks since boot: with the pid, names one process (pids are reused)."""
    state: str
    uid: int
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} (ppid {self.ppid}, uid {self.uid}): {self.command}"


def _read(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    uid = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("Uid:"))
    return Proc(pid, int(fields[1]), int(fields[19]), fields[0], uid, command)


def processes() -> dict[int, Proc]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (proc := _read(int(entry.name))) is not None:
            found[proc.pid] = proc
    return found


def descendants(root: int) -> list[Proc]:
    """Every living (not zombie) process below `root`."""
    table = processes()
    children: dict[int, list[Proc]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child.pid)
            if child.state != "Z":
                found.append(child)
    return found


def reap_zombies(before: set[tuple[int, int]], ignore: tuple[str, ...] = ()) -> None:
    """Collect the exit status of the dead children that were not there `before` (orphans
    re-parented here have nobody else to do it)."""
    for proc in processes().values():
        if (proc.ppid == os.getpid() and proc.state == "Z" and (proc.pid, proc.start) not in before
                and not proc.command.startswith(ignore)):
            try:
                os.waitpid(proc.pid, os.WNOHANG)
            except ChildProcessError:
                pass


def survivors(before: set[tuple[int, int]], ignore: tuple[str, ...] = (),
              grace_s: float = 10.0) -> list[Proc]:
    """Processes below this one that were not there `before`, still alive after `grace_s`
    (some are in their SIGTERM grace time); commands starting with one of `ignore` are left out."""
    deadline = time.monotonic() + grace_s
    while True:
        left = [p for p in descendants(os.getpid())
                if (p.pid, p.start) not in before and not p.command.startswith(ignore)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def still_running(procs: list[Proc], timeout_s: float = 10.0) -> list[Proc]:
    """Those of `procs` still among this process's descendants after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = {(p.pid, p.start) for p in descendants(os.getpid())}
        left = [p for p in procs if (p.pid, p.start) in alive]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def kill(procs: list[Proc]) -> None:
    for proc in procs:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
