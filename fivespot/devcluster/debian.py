"""Debian packages unpacked into a folder of the cache, for the tools the local world borrows
from Debian (Argo CD's redis-server, Prometheus' promtool).

`apt-get download` + `dpkg -x` installs nothing and starts no service, and needs no root; where
the packages cannot be downloaded, `apt-get install` is the caller's fallback (`install`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path


class DebianUnavailable(RuntimeError):
    """apt could not provide a package; the message is what apt said (its tail)."""


def require_tools() -> None:
    missing = [tool for tool in ("apt-get", "dpkg", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        raise DebianUnavailable(f"{', '.join(missing)} is not on PATH: this needs a Debian machine")


def unpack(packages: Sequence[str], folder: Path) -> dict[str, str]:
    """Download `packages` and unpack each into `folder`; returns each package's version."""
    require_tools()
    with tempfile.TemporaryDirectory() as work:
        downloaded = subprocess.run(["apt-get", "download", *packages], cwd=work,
                                    capture_output=True, text=True, timeout=600)
        debs = sorted(Path(work).glob("*.deb"))
        if downloaded.returncode != 0 or not debs:
            raise DebianUnavailable(f"apt-get download said {downloaded.stderr.strip()[-300:]!r}")
        folder.mkdir(parents=True, exist_ok=True)
        versions = {}
        for deb in debs:
            subprocess.run(["dpkg", "-x", str(deb), str(folder)], check=True, capture_output=True,
                           timeout=600)
            fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version"],
                                    capture_output=True, text=True, check=True).stdout
            found = dict(line.split(": ", 1) for line in fields.splitlines() if ": " in line)
            versions[found["Package"]] = found["Version"]
        return versions


def install(package: str) -> None:
    """`apt-get install` it into the system (the fallback when it cannot be downloaded)."""
    installed = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                                package], capture_output=True, text=True, timeout=900,
                               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if installed.returncode != 0:
        raise DebianUnavailable(f"apt-get install said {installed.stderr.strip()[-300:]!r} "
                                "(run `apt-get update` first?)")
