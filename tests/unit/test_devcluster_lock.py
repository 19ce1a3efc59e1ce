"""`make cluster` / `make controlplane` say when they wait on another build's lock."""

from __future__ import annotations

import fcntl
import io
import threading
import time
from pathlib import Path

import pytest

from fivespot.devcluster.build import binaries_dir, ensure_binaries


def _built_already(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache whose binaries exist, so only the lock can be in the way; its folder."""
    monkeypatch.setenv("FIVESPOT_CACHE_DIR", str(tmp_path))
    folder = binaries_dir()
    folder.mkdir(parents=True)
    for name in ("kube-apiserver", "kube-controller-manager", "etcd"):
        (folder / name).write_text("")
    return folder


def test_a_build_waiting_on_another_builds_lock_says_so_then_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _built_already(tmp_path, monkeypatch)
    out = io.StringIO()
    with open(folder / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiter = threading.Thread(target=ensure_binaries, args=(out,))
        waiter.start()
        deadline = time.monotonic() + 10
        while "waiting for another process" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "waiting for another process building the control plane" in out.getvalue()
        assert waiter.is_alive()
        fcntl.flock(held, fcntl.LOCK_UN)
    waiter.join(10)
    assert not waiter.is_alive()
    assert "the other build finished after" in out.getvalue()


def test_a_build_with_the_lock_free_says_nothing_about_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _built_already(tmp_path, monkeypatch)
    out = io.StringIO()
    ensure_binaries(out)
    assert out.getvalue() == ""
