"""The real kstatus (fluxcd/cli-utils, what Flux `wait` and health checks run), for tests.

`tools/kstatus/` is a small Go program over that library, built from Go modules like the control
plane, once per source version, into the fivespot cache (`fivespot.devcluster.build.cache_root()`), under a
lock so parallel test runs build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from fivespot.devcluster.build import cache_root

SOURCE = Path(__file__).resolve().parents[1] / "tools" / "kstatus"


def binary() -> Path:
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes()
                                     for name in ("go.mod", "go.sum", "main.go"))).hexdigest()[:16]
    folder = cache_root() / "kstatus" / digest
    built = folder / "kstatus"
    if built.is_file():
        return built
    folder.mkdir(parents=True, exist_ok=True)
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("building the kstatus helper needs the Go toolchain on PATH")
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.is_file():
            env = dict(os.environ, CGO_ENABLED="0", GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="-mod=mod")
            result = subprocess.run([go, "build", "-o", str(folder / "kstatus.tmp"), "."], cwd=SOURCE,
                                    env=env, capture_output=True, text=True, timeout=1200)
            if result.returncode != 0:
                raise RuntimeError(f"go build of tools/kstatus failed:\n{result.stderr[-4000:]}")
            os.replace(folder / "kstatus.tmp", built)
    return built


def verdicts(objects: list[dict[str, Any]]) -> list[str]:
    """kstatus's status (Current, InProgress, Failed, Terminating, ...) of each object."""
    result = subprocess.run([str(binary())], input=json.dumps(objects), capture_output=True,
                            text=True, timeout=60, check=True)
    return [v["status"] for v in json.loads(result.stdout)]
