"""A compile killed with SIGKILL at any point leaves the old output or the new one, whole, and the
next compile cleans up after it.

Each run forks a child that runs `fivespot compile` into a folder holding an older output. The
child counts every file-system operation that changes something (each open for writing, mkdir,
rename, unlink, rmdir and the atomic swap, via Python's audit hooks, which fire just before the
operation) and SIGKILLs itself right before the Nth; N is drawn at random (seeded) over all of
them, so the kills land anywhere in the write, the swap and the removal of the old output.
"""

from __future__ import annotations

import os
import random
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fivespot.cli.main import main
from fivespot.compiler.output import with_manifest, write_tree
from fivespot.compiler.pipeline import compile_repo
from fivespot.compiler.swap import atomic_exchange_available
from tests.unit.outtree import files_of

ROOT = Path(__file__).resolve().parents[2]
OLD = ROOT / "examples" / "agent-sandbox" / "config"
NEW = Path(__file__).parent / "testdata" / "valid-no-consumers"
"""The smaller repo is the one compiled in each child, which keeps 50 runs to a few seconds; the
kills still cover writing the new output (26 files) and removing the old one (75)."""
RUNS = 50
SEED = 20261201

_CHANGING = frozenset({"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.chmod",
                       "os.symlink", "os.link", "os.truncate", "shutil.rmtree",
                       "ctypes.call_function"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _changes_something(event: str, args: tuple[Any, ...]) -> bool:
    if event in _CHANGING:
        return True
    if event == "open":
        _, mode, flags = args
        return bool((isinstance(mode, str) and set(mode) & set("wxa+"))
                    or (isinstance(flags, int) and flags & _WRITE_FLAGS))
    return False


def _in_child(body: Callable[[], int]) -> int:
    """Run `body` in a forked child; its exit code, or -SIGNAL if a signal ended it."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns into pytest
        code = 99
        try:
            code = body()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _compile_counting(out: Path, kill_at: int | None, report: int | None = None) -> int:
    count = 0

    def hook(event: str, args: tuple[Any, ...]) -> None:
        nonlocal count
        if _changes_something(event, args):
            count += 1
            if count == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)
    code = main(["compile", str(NEW), "--out", str(out)])
    if report is not None:
        os.write(report, str(count).encode())
    return code


@pytest.fixture(scope="module")
def compiled() -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The files of the old and the new output."""
    return compile_repo(OLD).files, compile_repo(NEW).files


def test_the_file_system_here_swaps_folders_atomically(tmp_path: Path) -> None:
    assert atomic_exchange_available(tmp_path)


def test_sigkill_at_any_point_leaves_the_old_or_the_new_output_whole(
        tmp_path: Path, compiled: tuple[dict[str, bytes], dict[str, bytes]]) -> None:
    old_files, new_files = compiled
    old, new = with_manifest(old_files), with_manifest(new_files)
    read, write = os.pipe()
    probe = tmp_path / "probe" / "out"
    write_tree(old_files, probe)
    assert _in_child(lambda: _compile_counting(probe, None, write)) == 0
    os.close(write)
    operations = int(os.read(read, 64))
    os.close(read)
    assert files_of(probe) == new
    assert operations > len(new) + len(old)  # each new file, each old one removed, the swap

    points = sorted(random.Random(SEED).sample(range(1, operations + 1), min(RUNS, operations)))
    outcomes = {"old": 0, "new": 0}
    for run, kill_at in enumerate(points):
        out = tmp_path / f"run-{run}" / "out"
        write_tree(old_files, out)
        assert _in_child(lambda: _compile_counting(out, kill_at)) == -signal.SIGKILL, kill_at
        found = files_of(out)
        assert found in (old, new), f"killed before operation {kill_at} of {operations}"
        outcomes["old" if found == old else "new"] += 1

        write_tree(new_files, out)  # the next compile cleans up after the killed one
        assert files_of(out) == new
        assert os.listdir(out.parent) == ["out"], f"left behind after operation {kill_at}"
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes
