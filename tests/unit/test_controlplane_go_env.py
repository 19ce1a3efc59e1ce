"""The control plane's wrapper modules build with go.mod and go.sum as pinned: a module missing
from go.sum fails the build instead of being added from whatever the module proxy serves."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fivespot.devcluster.build import BUILD_TAGS, ETCD_MODULE, KUBERNETES_PROGRAMS, go_env, kubernetes_module


def _go_list(module: Path, *packages: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["go", "list", "-deps", "-tags", BUILD_TAGS, *packages], cwd=module,
                          env=go_env(module), capture_output=True, text=True, timeout=600)


def test_a_module_missing_from_go_sum_fails_the_build_and_go_sum_stays_as_pinned(
        tmp_path: Path) -> None:
    module = tmp_path / "etcd"
    shutil.copytree(ETCD_MODULE, module)
    pinned = (module / "go.sum").read_text()
    server = "go.etcd.io/etcd/server/v3 "
    trimmed = "".join(line for line in pinned.splitlines(keepends=True)
                      if not (line.startswith(server) and "/go.mod " not in line))
    assert trimmed != pinned
    (module / "go.sum").write_text(trimmed)
    listed = _go_list(module, ".")
    assert listed.returncode != 0
    assert "missing go.sum entry for module providing package go.etcd.io/etcd/server/v3" in (
        listed.stderr)
    assert (module / "go.sum").read_text() == trimmed, "go must not rewrite the pins"


@pytest.mark.parametrize("wrapper", ["etcd", "kubernetes"])
def test_the_pinned_wrapper_modules_hash_every_package_the_build_compiles(wrapper: str) -> None:
    """What `-mod=readonly` asks of a wrapper holds as pinned today (the etcd module and the
    selected Kubernetes version's, whose modules `make controlplane` has fetched)."""
    module = ETCD_MODULE if wrapper == "etcd" else kubernetes_module()
    packages = ["."] if wrapper == "etcd" else [f"k8s.io/kubernetes/cmd/{p}" for p in KUBERNETES_PROGRAMS]
    before = (module / "go.sum").read_bytes()
    listed = _go_list(module, *packages)
    assert listed.returncode == 0, listed.stderr[-4000:]
    assert (module / "go.sum").read_bytes() == before
